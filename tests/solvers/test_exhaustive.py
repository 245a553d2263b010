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

#: Makespans of the optimal plans (k_eval = 2 steps unless said) over each plan space (cost
#: model v2 with the rollout engine's memory and the colocation costs,
#: docs/cost-model.md#colocation); optimal for the score (KNOWN_SCORES: the makespan, x 1.05
#: for an off-policy plan under the default lambda_stale 0.05).
#: Each value is the simulated makespan of the plan written out in OPTIMAL_PLANS
#: (test_the_written_plan_simulates_to_the_known_optimum), and the exhaustive oracle
#: proves that no plan of the space scores lower (test_exhaustive_proves_the_known_optimum);
#: CP-SAT, the MILP (test_exact.py) and the local search (test_local.py) find the same
#: value. Every tiny instance writes host_bandwidth 25e9, so a rollout sharing its GPUs
#: wakes and sleeps at 25 GB/s (w = s = its shard 2P/tp / 25e9 each), and the refit of a
#: rollout on its trainer's block is a device copy (the shard / (1.008e12 / 2)). The
#: off-policy penalty (x 1.05) outweighs every refit a staleness of 1 would hide, so
#: every optimum below but tiny_lag_grpo_2gpu_async's is on-policy. The plan behind each
#: optimum:
#:
#: Every rollout below runs at the smallest gpu_memory_utilization of its instance whose
#: engine starts (0.2 of a 24 GB GPU, 4.8 GB; 0.8 on the lag instances): its KV pool then
#: holds every sequence of a replica, so a larger share is no faster and needs more memory.
#:
#: * tiny_ppo_2gpu (actor staleness 0 or 1): the rollout on both GPUs (tp 2, 8.9283 s;
#:   it shares them, so w = s = 630_095_872 / 25e9 = 0.0252 s), critic.infer dp 2
#:   (0.0909 s), then reference.infer on GPU 0 (0.2463 s) beside reward.infer on GPU 1
#:   (0.1817 s), actor.train and critic.train tp 2 on both (0.4983 + 0.4013 s), at
#:   staleness 0. Step 0 trains the actor first, so the refit of its weights to the next
#:   rollout on the same block (a CUDA IPC copy of 630_095_872 B, 1.2502 ms) overlaps
#:   critic.train, and actor.train 0 waits instead for reference.infer's data from GPU 0
#:   (d = 13.9 us); step 1 trains the critic first, whose inputs are ready when
#:   reference.infer ends, so actor.train 1 waits for nothing:
#:   2 * (w + 8.9283 + s + 0.0909 + 0.2463 + 0.4983 + 0.4013) + d = 20.43103 s. The plain
#:   step order (actor.train first in both steps) gives 20.43104 s (2 d), the simulator's
#:   default priority 20.43226 s (it waits for the refit). Staleness 1 hides the refit
#:   (20.43101 s) but scores x 1.05 = 21.45 s. Without the colocation costs the optimum
#:   was 2 * 10.1651 s.
#: * tiny_ppo_2gpu_sync (staleness 0 only): the same plan and makespan.
#: * tiny_ppo_2gpu_ac (AC-share, lambda_ac 0.15): the same separate plan and score as
#:   tiny_ppo_2gpu (its header; test_ac_share.py checks both templates).
#: * tiny_grpo_2gpu: actor.train tp 2 keeps its ZeRO-1 states (14.22 GB) on both GPUs,
#:   so the rollout's engine gets 0.2 (4.8 GB; 0.3 would overflow GPU 1, which also holds
#:   reference.infer's 3.55 GB: 14.22 + 3.55 + 7.2 > 22.8). The rollout tp 2 (8.4142 s;
#:   w = s = 1_776_943_104 / 25e9 = 0.0711 s), then actor.infer on GPU 0 beside
#:   reference.infer on GPU 1 (0.5006 s each, after the rollout's data, d = 11.9 us),
#:   reward.infer after actor.infer on GPU 0 (0.1189 s), actor.train tp 2 (0.9380 s,
#:   after reward.infer's data, d), at staleness 0: the next rollout waits for the refit
#:   of the trained weights on its block (3.53 ms):
#:   2 * (w + 8.4142 + s + d + 0.5006 + 0.1189 + d + 0.9380) + 3.53 ms = 20.23124 s.
#:   reward.infer cannot run dp 2: beside them GPU 1 would peak at 23.56 GB > 22.8 GB.
#:   Staleness 1 would hide the refit (at best 20.2277 s, in step order) but scores x 1.05
#:   = 21.24 s. The baselines give 20.2603 s.
#: * tiny_grpo_4gpu (staleness 0 only, no actor.infer): every vertex on the 4 GPUs in
#:   turn, 2 * (w + 2.1840 + s + 0.0398 + 0.0290 + 0.1887) s with w = s = 0.0252 s, plus
#:   the 1.25 ms device refit before the second rollout; the baselines find this plan.
#: * tiny_dpo_2gpu: every vertex on both GPUs in turn: rollout tp 2 (3.8393 s; w = s =
#:   1_498_415_104 / 25e9 = 0.0599 s), actor.infer and reference.infer dp 2 (0.2645 s
#:   each), actor.train tp 2 (0.9677 s), at staleness 0: 2 * 5.45579 s plus the 2.97 ms
#:   refit before the second rollout, 10.91456 s. Staleness 1 would hide the refit
#:   (10.91159 s, what the baselines choose) but scores x 1.05 = 11.46 s.
#: * tiny_dpo_4gpu (staleness 0 only): every vertex on the 4 GPUs in turn, 2 * (w +
#:   7.5170 + s + 0.2497 + 0.2497 + 0.9630) s with w = s = 888_471_552 / 25e9 = 0.0355 s,
#:   plus the refit before the second rollout: the reshard of the actor's weights (dp 4
#:   -> tp 4, 0.0356 s) and the device copy (1.76 ms), 0.0373 s; the baselines find this
#:   plan.
#: * tiny_dpo_2gpu_v2 (every v2 dimension, 15.12 GB per GPU): actor.train fits only with
#:   full recompute and over both GPUs (ZeRO-3: 11.99 GB resident), so the rollout, whose
#:   engine takes at least 4.8 GB, shares its GPUs: 11.99 + 4.8 > 15.12, and actor.train
#:   is offloaded too (2.0187 s: a 0.4795 s onload, 1.0597 s of compute, a 0.4795 s
#:   offload; 13.56 GB transient). actor.infer and reference.infer run offloaded on a GPU
#:   each, side by side (0.6491 s: a 0.1199 s onload, then 0.5292 s of compute; resident
#:   weights of 2.47 GB would not fit beside the training's 13.56 GB); rollout tp 2 at 0.2
#:   with max_num_seqs 32 (3.8393 s, w = s = 0.0599 s). Everything in turn at staleness
#:   0, d = 13.2 us a data transfer between the blocks, and before the second rollout the
#:   refit: the reshard of the ZeRO-3 weights to the rollout's tp 2 (59.95 ms) and the
#:   device copy (2.97 ms), 62.92 ms: 2 * (w + 3.8393 + s + d + 0.6491 + d + 2.0187) +
#:   62.92 ms = 13.31698 s. Staleness 1 would hide the refit (at best 13.2540 s, in step
#:   order) but scores x 1.05 = 13.92 s; the baselines give 14.0161 s.
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
#:   rollout GPU is the critical path: 3 * (w + G + s + d + r) + d + T = 9.1253 s, score
#:   9.1253 x 1.05 = 9.5816 s, below the best on-policy plan's 9.7094 s (staleness pays
#:   6.4 %, more than the 5 % penalty): the same placement at staleness 0,
#:   3 * (w + G + s + 2d + r + T) + 2p. The simulator's default run priority starts the
#:   second rollout before the first reward.infer, 9.4129 s, so the optimum needs the
#:   explicit order (the local search reaches it by its swap_order move).
KNOWN_OPTIMA = {
    "tiny_ppo_2gpu.yaml": 20.431026369275497,
    "tiny_ppo_2gpu_sync.yaml": 20.431026369275497,
    "tiny_ppo_2gpu_ac.yaml": 20.431026369275497,
    "tiny_grpo_2gpu.yaml": 20.231244137529277,
    "tiny_grpo_4gpu.yaml": 4.9852181797038675,
    "tiny_dpo_2gpu.yaml": 10.914558606214143,
    "tiny_dpo_4gpu.yaml": 18.13834243490076,
    "tiny_dpo_2gpu_v2.yaml": 13.316978168983987,
    "tiny_lag_grpo_2gpu.yaml": 6.455631676603824,
    "tiny_lag_grpo_2gpu_async.yaml": 9.125323598080135,
}
#: The optimal scores: the makespans above, the off-policy one x 1.05
#: (9.125323598080135 x 1.05 = 9.581589777984142).
KNOWN_SCORES = {
    **KNOWN_OPTIMA,
    "tiny_lag_grpo_2gpu_async.yaml": 9.581589777984142,
}

_PPO_ROWS = [
    ("actor.generate", 0, 2, Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=16)),
    ("reference.infer", 0, 1, Strategy(1, 1, 1, 1)),
    ("reward.infer", 1, 1, Strategy(1, 1, 1, 1)),
    ("critic.infer", 0, 2, Strategy(2, 1, 1, 1)),
    ("actor.train", 0, 2, Strategy(1, 1, 2, 1)),
    ("critic.train", 0, 2, Strategy(1, 1, 2, 1)),
]
#: The PPO instances' run order (vertex indices of _PPO_ROWS): step 0 trains the actor
#: first, step 1 the critic.
_SYNC_ORDER = tuple((v, 0) for v in (0, 3, 1, 2, 4, 5)) + tuple((v, 1) for v in (0, 3, 1, 2, 5, 4))
_PPO = ({"actor": 0, "critic": 0}, _PPO_ROWS, _SYNC_ORDER)
_LAG = [
    ("actor.generate", 0, 1, Strategy(1, 1, 1, 1, gpu_memory_utilization=0.8, max_num_seqs=16)),
    ("reward.infer", 0, 2, Strategy(1, 1, 2, 1)),
    ("actor.train", 1, 1, Strategy(1, 1, 1, 1)),
]

#: The plans described above: staleness, per vertex (first GPU, GPUs, strategy), and
#: "step order" or an explicit (vertex, step) sequence where the plan needs a run order.
OPTIMAL_PLANS = {
    "tiny_ppo_2gpu.yaml": _PPO,
    "tiny_ppo_2gpu_sync.yaml": _PPO,
    "tiny_ppo_2gpu_ac.yaml": _PPO,
    "tiny_grpo_2gpu.yaml": (
        {"actor": 0},
        [
            (
                "actor.generate",
                0,
                2,
                Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=16),
            ),
            ("actor.infer", 0, 1, Strategy(1, 1, 1, 8)),
            ("reference.infer", 1, 1, Strategy(1, 1, 1, 8)),
            ("reward.infer", 0, 1, Strategy(1, 1, 1, 8)),
            ("actor.train", 0, 2, Strategy(1, 1, 2, 8)),
        ],
    ),
    "tiny_grpo_4gpu.yaml": (
        {"actor": 0},
        [
            (
                "actor.generate",
                0,
                4,
                Strategy(2, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32),
            ),
            ("reference.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("reward.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("actor.train", 0, 4, Strategy(2, 1, 2, 1)),
        ],
    ),
    "tiny_dpo_2gpu.yaml": (
        {"actor": 0},
        [
            (
                "actor.generate",
                0,
                2,
                Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32),
            ),
            ("actor.infer", 0, 2, Strategy(2, 1, 1, 1)),
            ("reference.infer", 0, 2, Strategy(2, 1, 1, 1)),
            ("actor.train", 0, 2, Strategy(1, 1, 2, 2)),
        ],
    ),
    "tiny_dpo_4gpu.yaml": (
        {"actor": 0},
        [
            (
                "actor.generate",
                0,
                4,
                Strategy(1, 1, 4, 1, gpu_memory_utilization=0.2, max_num_seqs=32),
            ),
            ("actor.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("reference.infer", 0, 4, Strategy(4, 1, 1, 1)),
            ("actor.train", 0, 4, Strategy(4, 1, 1, 2)),
        ],
    ),
    "tiny_dpo_2gpu_v2.yaml": (
        {"actor": 0},
        [
            (
                "actor.generate",
                0,
                2,
                Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32),
            ),
            ("actor.infer", 0, 1, Strategy(1, 1, 1, 4, offload=True)),
            ("reference.infer", 1, 1, Strategy(1, 1, 1, 4, offload=True)),
            ("actor.train", 0, 2, Strategy(2, 1, 1, 4, "full", "zero3", True)),
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
    # the same placement at staleness 0 on the async instance: every run waits for the
    # previous one in each of the 3 steps, and two weight copies; it scores above the
    # off-policy optimum's makespan x 1.05
    on_policy = 3 * (rollout + 2 * data + reward + train) + 2 * weights
    asynchronous = load_problem("tiny_lag_grpo_2gpu_async.yaml")
    synchronous = written_plan("tiny_lag_grpo_2gpu_async.yaml").with_staleness("actor", 0)
    assert asynchronous.simulator.evaluate(synchronous).makespan == pytest.approx(
        on_policy, rel=1e-12
    )
    assert on_policy > KNOWN_SCORES["tiny_lag_grpo_2gpu_async.yaml"]
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
    assert result.score == pytest.approx(KNOWN_SCORES[name], rel=1e-12)
    assert result.bound == pytest.approx(result.score, rel=1e-12)
    assert problem.simulator.simulate(result.plan).makespan == pytest.approx(
        result.makespan, rel=1e-12
    )


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_no_sampled_feasible_plan_beats_the_optimum(name):
    """Random feasible plans (with random orders) never score below the proven optimum."""
    problem = load_problem(name)
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        evaluation = problem.simulator.evaluate(plan)
        if evaluation.feasible:
            checked += 1
            assert evaluation.score >= KNOWN_SCORES[name] * (1 - 1e-12)
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
    assert strategies["actor.train"] == Strategy(2, 1, 1, 4, "full", "zero3", True)
    assert strategies["actor.infer"] == Strategy(1, 1, 1, 4, offload=True)
    assert strategies["reference.infer"] == Strategy(1, 1, 1, 4, offload=True)
    assert strategies["actor.generate"] == Strategy(
        1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32
    )
    assert result.plan.staleness_map == {"actor": 0}
    # peak 13.56 GB: nothing resident, the offloaded ZeRO-3 training the largest transient
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
    # The unpruned tiny_dpo_4gpu space takes about 30 s alone; the limit leaves room for a
    # loaded machine, the enumeration's outcome does not depend on it.
    result = exhaustive.solve(problem, SolveOptions(time_limit=300))
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
