"""The exhaustive oracle: proven optima of the tiny instances."""

from __future__ import annotations

import random

import pytest

from rpeg.cost import Strategy
from rpeg.sampling import random_plan
from solvers import exhaustive
from solvers.options import SolveOptions
from solvers.result import Status
from tests.solvers.conftest import load_problem

#: Optimal makespans (k_eval = 2 steps) over each plan space (cost model v2),
#: established by the exhaustive oracle; CP-SAT and the MILP prove the same values
#: within their 1e-4 rounding tolerance (test_exact.py). The plan behind each optimum:
#:
#: * tiny_ppo_2gpu (actor staleness 0 or 1): the rollout on both GPUs (tp 2, 8.9283 s),
#:   critic.infer dp 2 (0.0909 s), then reference.infer on GPU 0 beside reward.infer on
#:   GPU 1 (0.2463 s), critic.train and actor.train tp 2 on both (0.4013 + 0.4983 s):
#:   2 * 10.1651 s. actor.train has the rollout's layout on the same block, so its
#:   weights reach the next rollout without a lag and staleness 0 costs nothing (staleness
#:   1 gains nothing). The baselines give 20.5231 s (greedy) and 20.4221 s (concurrent).
#: * tiny_ppo_2gpu_sync (staleness 0 only): the same plan and makespan; the concurrent
#:   baseline gives 20.3826 s.
#: * tiny_ppo_2gpu_ac (AC-share, lambda_ac 0.15): the same separate plan and score; the
#:   best fused plan is 4.7 % faster raw (19.3712 s) but scores 19.3712 x 1.15 = 22.2768 s
#:   (its header; test_ac_share.py checks both templates).
#: * tiny_grpo_2gpu: the rollout tp 2 (8.4142 s), reward.infer dp 2 (0.0596 s),
#:   actor.infer on GPU 0 beside reference.infer on GPU 1 (0.5006 s), actor.train tp 2
#:   (0.9380 s), each step in turn: 2 * 9.9124 s. Staleness 0 again costs no lag; the
#:   weights for actor.infer (another block) move while the next rollout runs. Both
#:   baselines give 19.8281 s.
#: * tiny_grpo_4gpu (no actor.infer): every vertex on the 4 GPUs in turn, 2 * (2.1840
#:   + 0.0398 + 0.0290 + 0.1887) s; the baselines find this plan.
#: * tiny_dpo_2gpu: every vertex on both GPUs in turn: rollout tp 2 (3.8393 s),
#:   actor.infer and reference.infer dp 2 (0.2645 s each), actor.train tp 2 (0.9677 s),
#:   2 * 5.3359 s; the baselines find this plan.
#: * tiny_dpo_4gpu (staleness 0 only): every vertex on the 4 GPUs in turn, 2 * (7.5170
#:   + 0.2497 + 0.2497 + 0.9630) s plus the 0.0356 s reshard of the actor's weights
#:   (dp 4 -> tp 4) before the second rollout; the baselines find this plan.
#: * tiny_dpo_2gpu_v2 (every v2 dimension, 15.12 GB per GPU): actor.train fits only with
#:   full recompute, fastest with ZeRO-3 over both GPUs (1.0597 s, 11.99 GB resident);
#:   beside it reference.infer fits only offloaded (0.4130 s); rollout tp 2 with
#:   concurrency 32 (3.8393 s) and actor.infer dp 2 (0.2649 s); everything on both GPUs in
#:   turn, staleness 1 (a ZeRO-3 source always pays a reshard): 2 * 5.5770 s.
KNOWN_OPTIMA = {
    "tiny_ppo_2gpu.yaml": 20.330197131515494,
    "tiny_ppo_2gpu_sync.yaml": 20.330197131515494,
    "tiny_ppo_2gpu_ac.yaml": 20.330197131515494,
    "tiny_grpo_2gpu.yaml": 19.824900882581485,
    "tiny_grpo_4gpu.yaml": 4.8831526499616436,
    "tiny_dpo_2gpu.yaml": 10.671839143732873,
    "tiny_dpo_4gpu.yaml": 17.99442414619981,
    "tiny_dpo_2gpu_v2.yaml": 11.153978520875567,
}


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_exhaustive_proves_the_known_optimum(name):
    """The oracle completes within 30 s, proves OPTIMAL, and its plan simulates to the optimum."""
    problem = load_problem(name)
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)
    assert result.bound == pytest.approx(result.makespan, rel=1e-12)
    assert problem.simulator.simulate(result.plan).makespan == pytest.approx(
        result.makespan, rel=1e-12
    )


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_no_sampled_feasible_plan_beats_the_optimum(name):
    """Random feasible plans (with random orders) never simulate below the proven optimum."""
    problem = load_problem(name)
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        evaluation = problem.simulator.evaluate(plan)
        if evaluation.feasible:
            checked += 1
            assert evaluation.makespan >= KNOWN_OPTIMA[name] * (1 - 1e-12)
    assert checked > 0


def test_ppo_2gpu_optimum_beats_both_baselines():
    """On the 2-GPU PPO instance the optimum is strictly better than either baseline.

    The baselines give 20.5231 s and 20.4221 s > 20.3302 s * 1.001 = 20.3505 s (see
    KNOWN_OPTIMA).
    """
    from solvers import concurrent, greedy

    problem = load_problem("tiny_ppo_2gpu.yaml")
    for backend in (greedy, concurrent):
        assert (
            backend.solve(problem, SolveOptions()).makespan
            > KNOWN_OPTIMA["tiny_ppo_2gpu.yaml"] * 1.001
        )


def test_refuses_a_plan_space_too_large_naming_its_size():
    """On the 16-GPU instance the oracle refuses at once, naming the number of placements."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.UNKNOWN
    assert result.plan is None
    placements, _ = exhaustive.plan_space_size(problem)
    assert f"{placements:,} placements" in result.message
    assert result.wall_time < 5


def test_time_limit_gives_feasible_not_optimal():
    """Stopped by its time limit, the oracle does not claim optimality."""
    problem = load_problem("tiny_grpo_4gpu.yaml")
    result = exhaustive.solve(problem, SolveOptions(time_limit=0.05))
    assert result.status in (Status.FEASIBLE, Status.UNKNOWN)
    assert "time limit" in result.message


def test_v2_optimum_uses_recompute_zero3_and_offload():
    """On the memory-tight v2 instance the optimum needs the v2 dimensions (KNOWN_OPTIMA)."""
    problem = load_problem("tiny_dpo_2gpu_v2.yaml")
    directory = problem.directory
    train = directory.template.index("actor.train")
    # without full recompute no actor.train candidate fits in 15.12 GB (ZeRO-3 over 2 GPUs:
    # 11.99 GB resident + 3.58 GB transient: activations, logits, two gathered layers)
    kept = [c for per_shape in directory.options[train].values() for c in per_shape]
    assert kept and all(c.strategy.recompute == "full" for c in kept)
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    placements = result.plan.placements
    strategies = {
        name: placement.strategy
        for name, placement in zip(directory.template.names, placements, strict=True)
    }
    assert strategies["actor.train"] == Strategy(2, 1, 1, 4, "full", "zero3", False)
    assert strategies["reference.infer"] == Strategy(1, 1, 2, 4, offload=True)
    assert strategies["actor.generate"] == Strategy(1, 1, 2, 1, concurrency=32)
    assert result.plan.staleness_map == {"actor": 1}
    # peak 11.99 GB (ZeRO-3 states) + 2.69 GB (offloaded reference: weights + working set)
    trace = problem.simulator.simulate(result.plan)
    assert max(trace.peak_memory_bytes) <= directory.capacity


@pytest.mark.parametrize(
    "name",
    # (on tiny_grpo_2gpu pruning removes no candidate)
    ["tiny_dpo_2gpu.yaml", "tiny_dpo_2gpu_v2.yaml", "tiny_ppo_2gpu.yaml"],
)
def test_dominance_pruning_keeps_the_optimum(name, monkeypatch):
    """Without dominance pruning of the candidate directory the oracle finds the same optimum."""
    import rpeg.candidates
    from rpeg.context import Problem
    from tests.solvers.conftest import ROOT

    pruned = load_problem(name)
    monkeypatch.setattr(rpeg.candidates, "_non_dominated", lambda found, *_, **__: list(found))
    problem = Problem.load(f"{ROOT}/instances/{name}")
    # every memory-feasible strategy is kept: a larger plan space than the pruned one
    assert exhaustive.plan_space_size(problem)[0] > exhaustive.plan_space_size(pruned)[0]
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)
