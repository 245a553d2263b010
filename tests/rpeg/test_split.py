"""The split-placement baseline (rlplan/rpeg/search/split.py) on small instances."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.split import _tried_sizes, generation_share, split_blocks, split_plan

REPO = Path(__file__).resolve().parents[2]
TINY_GRPO_4 = REPO / "instances" / "tiny_grpo_4gpu.yaml"
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"


def stale_grpo_4(folder: Path) -> Problem:
    """tiny_grpo_4gpu with actor staleness 0 or 1."""
    text = TINY_GRPO_4.read_text().replace(
        "staleness_candidates: {actor: [0]}", "staleness_candidates: {actor: [0, 1]}"
    )
    path = folder / "stale.yaml"
    path.write_text(text)
    return Problem.load(str(path))


def test_tried_sizes_are_the_neighbours_of_the_share():
    # Two sizes at or below 5.2 GPUs (2 and 4) and two above (8 and 16).
    assert _tried_sizes([1, 2, 4, 8, 16], 5.2) == [2, 4, 8, 16]
    # Nothing above 3.1 among sizes below the pool's 4: only 1 and 2.
    assert _tried_sizes([1, 2], 3.1) == [1, 2]


def placements(problem: Problem, plan) -> dict[str, tuple[str, int, int]]:
    vertices = problem.directory.template.vertices
    return {
        vertex.name: (p.block.label(), p.strategy.dp, p.strategy.tp)
        for vertex, p in zip(vertices, plan.placements, strict=True)
    }


def test_split_on_four_gpus_by_hand():
    problem = Problem.load(str(TINY_GRPO_4))
    directory = problem.directory
    # Fastest candidates' GPU-seconds (`check` lists them): actor.generate 2.9199 on one
    # GPU; reference.infer 0.1590, reward.infer 0.1159 (one GPU), actor.train 0.2891 x 2
    # GPUs = 0.5781. Share = 2.9199 / (2.9199 + 0.8531) = 0.774, 3.10 of 4 GPUs.
    assert generation_share(directory) == pytest.approx(0.774, abs=1e-3)
    # Sizes below the pool's 4 are 1 and 2, both at or below 3.10: generation on 1 or 2
    # GPUs, the rest on the 2-GPU block beside it (4 does not fit beside), both orders.
    pairs = [(a.label(), b.label()) for a, b in split_blocks(directory, 0.774)]
    assert pairs == [
        ("gpu 0", "gpus 2-3"),
        ("gpu 2", "gpus 0-1"),
        ("gpus 0-1", "gpus 2-3"),
        ("gpus 2-3", "gpus 0-1"),
    ]
    plan = split_plan(directory, problem.simulator)
    # Staleness 0 only: a step is sequential. Generation on 2 GPUs (tp 2: 2.2610 s) beats
    # one GPU (2.9199 s); the rest run their fastest 2-GPU strategies (0.0795 + 0.0580 +
    # 0.2891 s). Step = 2.2610 + 0.4266 = 2.6876 s plus the transfers (2.7002 simulated).
    assert placements(problem, plan) == {
        "actor.generate": ("gpus 0-1", 1, 2),
        "reference.infer": ("gpus 2-3", 2, 1),
        "reward.infer": ("gpus 2-3", 2, 1),
        "actor.train": ("gpus 2-3", 2, 1),
    }
    assert plan.staleness == (("actor", 0),)
    step = problem.simulator.evaluate(plan).makespan / problem.instance.k_eval
    assert step == pytest.approx(2.6876, abs=0.02)


def test_split_takes_staleness_one_where_listed(tmp_path):
    problem = stale_grpo_4(tmp_path)
    plan = split_plan(problem.directory, problem.simulator)
    assert plan.staleness == (("actor", 1),)
    # Staleness 1, k_eval 2: the second rollout overlaps the first training, so the two
    # steps take 2 x 2.260953 + (0.079543 + 0.057982 + 0.289057) = 4.948488 s, 2.474244
    # per step (2.474250 simulated: transfer latencies).
    step = problem.simulator.evaluate(plan).makespan / problem.instance.k_eval
    assert step == pytest.approx(2.474244, rel=1e-4)


def test_no_split_when_training_needs_every_gpu():
    # tiny_ppo_2gpu: actor.train has candidates on the 2-GPU block only, so no block is
    # left for generation beside it.
    problem = Problem.load(str(TINY_PPO))
    assert split_plan(problem.directory, problem.simulator) is None
