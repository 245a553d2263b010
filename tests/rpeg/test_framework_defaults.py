"""Framework-default baselines (rlplan/rpeg/search/framework_defaults.py)."""

from __future__ import annotations

import functools
from pathlib import Path

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.framework_defaults import (
    NEMO_RL_DEFAULTS,
    default_candidate,
    nemo_rl_default,
    openrlhf_default,
    slime_default,
    verl_default,
)

REPO = Path(__file__).resolve().parents[2]
TINY_GRPO_4 = REPO / "instances" / "tiny_grpo_4gpu.yaml"
GRPO_7B = REPO / "instances" / "grpo_7b_1x2x8_h100.yaml"


@functools.cache
def problem(path: Path, framework: str) -> Problem:
    return Problem.load(str(path)).with_framework(framework)


def rows(p: Problem, plan) -> dict[str, tuple]:
    vertices = p.directory.template.vertices
    return {
        v.name: (pl.block.label(), pl.strategy)
        for v, pl in zip(vertices, plan.placements, strict=True)
    }


def test_default_candidate_takes_the_most_defaults_then_the_fastest():
    p = problem(TINY_GRPO_4, "nemo-rl")
    directory = p.directory
    whole = directory.cluster.whole_blocks()[0]
    # The rollout's candidates on 4 GPUs, fastest first: dp 2 x tp 2 (2.1840 s), 1 x 2
    # (2.4471 s), 4 x 1 (2.7525 s), 2 x 1, 1 x 1, all at 0.2 of each GPU (larger shares
    # are no faster here, so the directory keeps none). NeMo RL's vLLM tp 1 holds for the
    # last three; 0.6 for none: the fastest tp-1 candidate, dp 4 x tp 1, is taken.
    fastest = directory.options[0][whole.extent][0].strategy
    assert (fastest.dp, fastest.tp) == (2, 2)
    chosen = default_candidate(directory, 0, whole, NEMO_RL_DEFAULTS.defaults).strategy
    assert (chosen.dp, chosen.tp, chosen.gpu_memory_utilization) == (4, 1, 0.2)


def test_verl_default_is_colocated_with_its_rollout_defaults():
    p = problem(GRPO_7B, "verl")
    plan = verl_default(p.directory, p.simulator)
    placed = rows(p, plan)
    # The hybrid engine: every vertex on the 16 GPUs; the rollout at verl's rollout.yaml
    # defaults, all in the instance's lists (tp 2 over 16 GPUs: dp 8; 0.5; 256).
    assert {block for block, _ in placed.values()} == {"gpus 0-15"}
    rollout = placed["actor.generate"][1]
    assert (rollout.dp, rollout.tp, rollout.gpu_memory_utilization, rollout.max_num_seqs) == (
        8,
        2,
        0.5,
        256,
    )
    assert plan.staleness == (("actor", 0),)


def test_nemo_rl_default_puts_the_reward_model_apart():
    p = problem(GRPO_7B, "nemo-rl")
    placed = rows(p, nemo_rl_default(p.directory, p.simulator))
    # Colocated policy and generation on one block; the reward model on GPUs of its own.
    reward = placed.pop("reward.infer")[0]
    blocks = {block for block, _ in placed.values()}
    assert len(blocks) == 1 and reward not in blocks
    assert placed["actor.generate"][1].tp == 1  # vllm_cfg.tensor_parallel_size: 1


def test_slime_default_puts_the_rollout_after_the_actor():
    p = problem(TINY_GRPO_4, "slime")
    placed = rows(p, slime_default(p.directory, p.simulator))
    # --colocate off: the rollout's GPUs after the actor's; one GPU per engine (tp 1).
    # The split pairs with generation last are (gpu 2 | gpus 0-1) and (gpus 2-3 | 0-1);
    # two engines beat one (the faster simulated plan is kept).
    assert placed["actor.generate"][0] == "gpus 2-3"
    assert placed["actor.generate"][1].tp == 1
    assert {placed[name][0] for name in placed if name != "actor.generate"} == {"gpus 0-1"}


def test_backend_names_the_framework(cli, tmp_path):
    code, stdout, _ = cli(
        "solve", GRPO_7B, "--solver", "default:verl", "--quiet", "--out", tmp_path / "run"
    )
    assert code == 0 and "(default:verl," in stdout
    code, _, err = cli("solve", GRPO_7B, "--solver", "default:vrel", "--out", tmp_path / "x")
    assert code == 2 and len(err.splitlines()) == 1 and "default:NAME" in err


def test_openrlhf_default_runs_vllm_apart_first():
    p = problem(GRPO_7B, "openrlhf")
    placed = rows(p, openrlhf_default(p.directory, p.simulator))
    # --train.colocate_all off: the vLLM engines on GPUs of their own, placed first here;
    # --vllm.tensor_parallel_size 1; the DeepSpeed groups share the other block.
    generation = placed.pop("actor.generate")
    others = {block for block, _ in placed.values()}
    assert len(others) == 1 and generation[0] not in others
    assert generation[0].startswith("gpus 0-") and generation[1].tp == 1
