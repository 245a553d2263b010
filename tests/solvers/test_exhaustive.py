"""The exhaustive oracle: proven optima of the tiny instances."""

from __future__ import annotations

import random

import pytest

from rlplan.rpeg.model import candidates
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.search.sampling import random_plan
from rlplan.solvers import exhaustive
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import load_problem

#: Optimal makespans (k_eval = 2 steps unless said) over each plan space (cost model v2
#: with colocation costs, docs/cost-model.md#colocation). Each value is the simulated
#: makespan of the plan written out in OPTIMAL_PLANS
#: (test_the_written_plan_simulates_to_the_known_optimum), and the exhaustive oracle
#: proves that no plan of the space is faster (test_exhaustive_proves_the_known_optimum);
#: CP-SAT, the MILP (test_exact.py) and the local search (test_local.py) find the same
#: value. Every tiny instance writes host_bandwidth 25e9, so a rollout sharing its GPUs
#: wakes and sleeps at 25 GB/s (w = s = its shard 2P/tp / 25e9 each), and the refit of a
#: rollout on its trainer's block is a device copy (the shard / (1.008e12 / 2)). The plan
#: behind each optimum:
#:
#: * tiny_ppo_2gpu (actor staleness 0 or 1): the rollout on both GPUs (tp 2, 8.9283 s;
#:   it shares them, so w = s = 630_095_872 / 25e9 = 0.0252 s), critic.infer dp 2
#:   (0.0909 s), then reference.infer on GPU 0 beside reward.infer on GPU 1 (0.2463 s),
#:   critic.train and actor.train tp 2 on both (0.4013 + 0.4983 s): 2 * 10.21551 s. The
#:   actor's weights reach the next rollout on the same block in the same layout: a
#:   CUDA IPC copy of 630_095_872 B, 1.2502 ms, which staleness 0 would wait for (20.43226
#:   s); staleness 1 removes it. Without the colocation costs this was 2 * 10.1651 s at
#:   staleness 0.
#: * tiny_ppo_2gpu_sync (staleness 0 only): the same placement; step 0 runs actor.train
#:   before critic.train, so the 1.25 ms refit overlaps critic.train, and actor.train 0
#:   waits instead for reference.infer's data from GPU 0 (d = 13.9 us); step 1 keeps
#:   critic.train first. 20.43103 s, d above tiny_ppo_2gpu (the plain step order,
#:   actor.train first in both steps, gives 20.43104 s).
#: * tiny_ppo_2gpu_ac (AC-share, lambda_ac 0.15): the same separate plan and score as
#:   tiny_ppo_2gpu (test_ac_share.py checks both templates).
#: * tiny_grpo_2gpu: the rollout tp 2 (8.4142 s; w = s = 1_776_943_104 / 25e9 = 0.0711
#:   s), reward.infer dp 2 (0.0596 s), actor.infer on GPU 0 beside reference.infer on GPU
#:   1 (0.5006 s), actor.train tp 2 (0.9380 s), each step in turn: 2 * 10.05461 s. At
#:   staleness 1 the refit (3.53 ms) is not waited for; the runs go in step order (the
#:   default priority would start the second rollout before the first step's log-probs).
#: * tiny_grpo_4gpu (staleness 0 only, no actor.infer): every vertex on the 4 GPUs in
#:   turn, 2 * (w + 2.1840 + s + 0.0398 + 0.0290 + 0.1887) s with w = s = 0.0252 s, plus
#:   the 1.25 ms device refit before the second rollout.
#: * tiny_dpo_2gpu: every vertex on both GPUs in turn: rollout tp 2 (3.8393 s; w = s =
#:   1_498_415_104 / 25e9 = 0.0599 s), actor.infer and reference.infer dp 2 (0.2645 s
#:   each), actor.train tp 2 (0.9677 s), 2 * 5.45579 s at staleness 1 (staleness 0 would
#:   wait 2.97 ms for the refit).
#: * tiny_dpo_4gpu (staleness 0 only): every vertex on the 4 GPUs in turn, 2 * (w +
#:   7.5170 + s + 0.2497 + 0.2497 + 0.9630) s with w = s = 888_471_552 / 25e9 = 0.0355 s,
#:   plus the refit before the second rollout: the reshard of the actor's weights (dp 4
#:   -> tp 4, 0.0356 s) and the device copy (1.76 ms), 0.0373 s.
#: * tiny_dpo_2gpu_v2 (every v2 dimension, 15.12 GB per GPU): actor.train fits only with
#:   full recompute, fastest with ZeRO-3 over both GPUs (1.0597 s, 11.99 GB resident);
#:   beside it reference.infer fits only offloaded (0.4130 s: its 0.0599 s onload from
#:   the host, then 0.3531 s of compute); rollout tp 2 with concurrency 32 (3.8393 s,
#:   w = s = 0.0599 s) and actor.infer dp 2 (0.2649 s); everything on both GPUs in turn,
#:   staleness 1 (a ZeRO-3 source always pays a reshard): 2 * 5.69686 s.
#: * tiny_lag_grpo_2gpu (staleness 0 only; the header gives the memory argument): the
#:   rollout cannot share a GPU with actor.train, and actor.train on both GPUs would leave
#:   the rollout none, so the rollout runs on one GPU (G = 2.8083 s) and actor.train on the
#:   other (T = 0.2386 s). reward.infer runs tp 2 on both GPUs (r = 0.0511 s, a data
#:   transfer d = 1.5020 ms on each side) rather than beside the rollout (0.0580 s + d:
#:   slower by 4.0 ms) or beside actor.train (19.30 GB > 19.0 GB usable). Sharing GPU 0
#:   with reward.infer, the rollout wakes and sleeps (w = s = 1_260_191_744 / 25e9 =
#:   50.41 ms). At staleness 0 every run waits for the previous one, and the trained
#:   weights cross to the rollout's GPU before step 1 (an NCCL copy, p = 51.91 ms):
#:   2 * (w + G + s + d + r + d + T) + p = 6.4556 s
#:   (test_lag_instances_match_the_hand_derivation recomputes it from the cost model).
#: * tiny_lag_grpo_2gpu_async (k_eval = 3, staleness 0 or 1): the same placement at
#:   staleness 1, with the runs in step order: each rollout waits for the previous step's
#:   reward.infer (which shares GPU 0); the weights of step t-2 arrive long before. The
#:   rollout GPU is the critical path: 3 * (w + G + s + d + r) + d + T = 9.1253 s.
KNOWN_OPTIMA = {
    "tiny_ppo_2gpu.yaml": 20.431012471035498,
    "tiny_ppo_2gpu_sync.yaml": 20.431026369275497,
    "tiny_ppo_2gpu_ac.yaml": 20.431012471035498,
    "tiny_grpo_2gpu.yaml": 20.109211779221486,
    "tiny_grpo_4gpu.yaml": 4.9852181797038675,
    "tiny_dpo_2gpu.yaml": 10.911585560372874,
    "tiny_dpo_4gpu.yaml": 18.13834243490076,
    "tiny_dpo_2gpu_v2.yaml": 11.393724937515566,
    "tiny_lag_grpo_2gpu.yaml": 6.455631676603824,
    "tiny_lag_grpo_2gpu_async.yaml": 9.125323598080135,
}

_PPO_ROWS = [
    ("actor.generate", 0, 2, Strategy(1, 1, 2, 1, concurrency=16)),
    ("reference.infer", 0, 1, Strategy(1, 1, 1, 1)),
    ("reward.infer", 1, 1, Strategy(1, 1, 1, 1)),
    ("critic.infer", 0, 2, Strategy(2, 1, 1, 1)),
    ("actor.train", 0, 2, Strategy(1, 1, 2, 1)),
    ("critic.train", 0, 2, Strategy(1, 1, 2, 1)),
]
_PPO = ({"actor": 1, "critic": 0}, _PPO_ROWS)
#: tiny_ppo_2gpu_sync's run order (vertex indices of _PPO_ROWS): step 0 trains the actor
#: first, step 1 the critic.
_SYNC_ORDER = tuple((v, 0) for v in (0, 3, 1, 2, 4, 5)) + tuple((v, 1) for v in (0, 3, 1, 2, 5, 4))
_LAG = [
    ("actor.generate", 0, 1, Strategy(1, 1, 1, 1, concurrency=16)),
    ("reward.infer", 0, 2, Strategy(1, 1, 2, 1)),
    ("actor.train", 1, 1, Strategy(1, 1, 1, 1)),
]

#: The plans described above: staleness, per vertex (first GPU, GPUs, strategy), and
#: "step order" or an explicit (vertex, step) sequence where the plan needs a run order.
OPTIMAL_PLANS = {
    "tiny_ppo_2gpu.yaml": _PPO,
    "tiny_ppo_2gpu_sync.yaml": ({"actor": 0, "critic": 0}, _PPO_ROWS, _SYNC_ORDER),
    "tiny_ppo_2gpu_ac.yaml": _PPO,
    "tiny_grpo_2gpu.yaml": (
        {"actor": 1},
        [
            ("actor.generate", 0, 2, Strategy(1, 1, 2, 1, concurrency=16)),
            ("actor.infer", 0, 1, Strategy(1, 1, 1, 8)),
            ("reference.infer", 1, 1, Strategy(1, 1, 1, 8)),
            ("reward.infer", 0, 2, Strategy(2, 1, 1, 8)),
            ("actor.train", 0, 2, Strategy(1, 1, 2, 8)),
        ],
        "step order",
    ),
    "tiny_grpo_4gpu.yaml": (
        {"actor": 0},
        [
            ("actor.generate", 0, 4, Strategy(2, 1, 2, 1, concurrency=32)),
            ("reference.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("reward.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("actor.train", 0, 4, Strategy(2, 1, 2, 1)),
        ],
    ),
    "tiny_dpo_2gpu.yaml": (
        {"actor": 1},
        [
            ("actor.generate", 0, 2, Strategy(1, 1, 2, 1, concurrency=32)),
            ("actor.infer", 0, 2, Strategy(2, 1, 1, 1)),
            ("reference.infer", 0, 2, Strategy(2, 1, 1, 1)),
            ("actor.train", 0, 2, Strategy(1, 1, 2, 2)),
        ],
    ),
    "tiny_dpo_4gpu.yaml": (
        {"actor": 0},
        [
            ("actor.generate", 0, 4, Strategy(1, 1, 4, 1, concurrency=32)),
            ("actor.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("reference.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("actor.train", 0, 4, Strategy(4, 1, 1, 2)),
        ],
    ),
    "tiny_dpo_2gpu_v2.yaml": (
        {"actor": 1},
        [
            ("actor.generate", 0, 2, Strategy(1, 1, 2, 1, concurrency=32)),
            ("actor.infer", 0, 2, Strategy(2, 1, 1, 4)),
            ("reference.infer", 0, 2, Strategy(1, 1, 2, 4, offload=True)),
            ("actor.train", 0, 2, Strategy(2, 1, 1, 4, "full", "zero3", False)),
        ],
    ),
    "tiny_lag_grpo_2gpu.yaml": ({"actor": 0}, _LAG),
    "tiny_lag_grpo_2gpu_async.yaml": ({"actor": 1}, _LAG, "step order"),
}


def written_plan(name: str) -> Plan:
    """The plan of OPTIMAL_PLANS[name] in the problem's terms."""
    problem = load_problem(name)
    staleness, rows, *order = OPTIMAL_PLANS[name]
    assert [row[0] for row in rows] == list(problem.directory.template.names)
    blocks = {(b.start, b.size): b for b in problem.directory.cluster.blocks}
    placements = tuple(
        Placement(blocks[(start, size)], strategy) for _, start, size, strategy in rows
    )
    plan = Plan(placements, make_staleness(staleness))
    if order == ["step order"]:  # every run of step t before any of t + 1, template order
        steps = problem.instance.k_eval
        plan = plan.with_order(tuple((v, t) for t in range(steps) for v in range(len(rows))))
    elif order:
        plan = plan.with_order(order[0])
    return plan


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_the_written_plan_simulates_to_the_known_optimum(name):
    """Each known optimum is the simulated makespan of its written-out plan, which fits."""
    problem = load_problem(name)
    evaluation = problem.simulator.evaluate(written_plan(name))
    assert evaluation.feasible
    assert evaluation.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)


def test_lag_instances_match_the_hand_derivation():
    """The two lag instances' optima, recomputed from the cost model's durations and lags.

    G, r, T: the written plan's rollout, reward.infer and actor.train times; d: a data
    transfer between GPUs; p: the trained weights to the rollout's GPU; w, s: the
    rollout's wake and sleep, as it shares GPU 0 with reward.infer (KNOWN_OPTIMA).
    """
    problem = load_problem("tiny_lag_grpo_2gpu.yaml")
    directory = problem.directory
    cost = directory.cost
    plan = written_plan("tiny_lag_grpo_2gpu.yaml")
    times = [
        directory.candidate(vertex, placement.block.extent, placement.strategy).time
        for vertex, placement in enumerate(plan.placements)
    ]
    rollout, reward, train = times
    data = cost.data_lag(False, "g")
    weights = cost.pub_lag("actor", False, False, "g", plan.placements[0].strategy)
    assert data == pytest.approx(1.5e-3 + 49152 / 25e9, rel=1e-12)
    assert weights > 30 * data
    # tp 1: the whole 2P = 1_260_191_744 B each way at the written 25e9 B/s
    wake = sleep = 1_260_191_744 / 25e9
    assert problem.simulator.switch(0, plan.placements[0].strategy) == pytest.approx(
        (wake, sleep), rel=1e-12
    )
    rollout += wake + sleep
    sync = 2 * (rollout + data + reward + data + train) + weights
    assert sync == pytest.approx(KNOWN_OPTIMA["tiny_lag_grpo_2gpu.yaml"], rel=1e-12)
    pipelined = 3 * (rollout + data + reward) + data + train
    assert pipelined == pytest.approx(KNOWN_OPTIMA["tiny_lag_grpo_2gpu_async.yaml"], rel=1e-12)
    # without the lags the optimum would be faster by far more than the 1e-4 rounding
    # tolerance of the exact backends: dropping them from a model must show
    assert 4 * data + weights > 1e-3 * sync


def test_lag_instances_keep_rollout_and_training_apart():
    """No plan of the lag instances that shares a GPU between the rollout and actor.train
    fits in memory (sampled: 2000 random plans)."""
    for name in ("tiny_lag_grpo_2gpu.yaml", "tiny_lag_grpo_2gpu_async.yaml"):
        problem = load_problem(name)
        index = problem.directory.template.index
        rng = random.Random(5)
        for _ in range(2000):
            plan = random_plan(problem.directory, rng)
            rollout = plan.placements[index("actor.generate")].block
            if rollout.intersects(plan.placements[index("actor.train")].block):
                assert not problem.simulator.evaluate(plan).feasible


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

    The baselines give 20.6239 s (greedy) and 20.5229 s (concurrent) > 20.4310 s * 1.001
    = 20.4514 s (see KNOWN_OPTIMA).
    """
    from rlplan.solvers import concurrent, greedy

    problem = load_problem("tiny_ppo_2gpu.yaml")
    for backend in (greedy, concurrent):
        assert (
            backend.solve(problem, SolveOptions()).makespan
            > KNOWN_OPTIMA["tiny_ppo_2gpu.yaml"] * 1.001
        )


def test_refuses_a_plan_space_too_large_naming_its_size(monkeypatch):
    """On the 16-GPU instance the oracle refuses before simulating any plan, naming the
    number of placements."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")

    def no_simulation(*_args, **_kwargs):
        raise AssertionError("the oracle simulated a plan of a space it refuses")

    monkeypatch.setattr(problem.simulator, "evaluate", no_simulation)
    monkeypatch.setattr(problem.simulator, "simulate", no_simulation)
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.UNKNOWN
    assert result.plan is None
    placements, _ = exhaustive.plan_space_size(problem)
    assert f"{placements:,} placements" in result.message


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


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_dominance_pruning_keeps_the_optimum(name, monkeypatch):
    """Without dominance pruning of the candidate directory the oracle proves the same
    optimum, on every tiny instance (on most, pruning removes candidates)."""
    from rlplan.rpeg.evaluation.problem import Problem
    from tests.solvers.conftest import ROOT

    pruned = load_problem(name)
    monkeypatch.setattr(candidates, "_non_dominated", lambda found, *_, **__: list(found))
    problem = Problem.load(f"{ROOT}/instances/{name}")
    # every memory-feasible strategy is kept: a plan space at least as large
    assert exhaustive.plan_space_size(problem)[0] >= exhaustive.plan_space_size(pruned)[0]
    result = exhaustive.solve(problem, SolveOptions(time_limit=60))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)


def test_dominance_pruning_removes_candidates_somewhere():
    """The pruning test above is not vacuous: pruning shrinks most tiny plan spaces."""
    from rlplan.rpeg.evaluation.problem import Problem
    from tests.solvers.conftest import ROOT

    shrunk = 0
    original = candidates._non_dominated
    for name in sorted(KNOWN_OPTIMA):
        pruned = exhaustive.plan_space_size(load_problem(name))[0]
        candidates._non_dominated = lambda found, *_, **__: list(found)
        try:
            full = exhaustive.plan_space_size(Problem.load(f"{ROOT}/instances/{name}"))[0]
        finally:
            candidates._non_dominated = original
        shrunk += full > pruned
    assert shrunk >= len(KNOWN_OPTIMA) // 2
