"""The local search: feasibility, determinism, baselines, and the tiny optima."""

from __future__ import annotations

import dataclasses
import random

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.candidates import strategy_problem
from rlplan.rpeg.search import moves
from rlplan.rpeg.search.annealing import SimulatedAnnealing
from rlplan.rpeg.search.sampling import random_plan
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.search.stopping import StoppingCriterion
from rlplan.solvers import local
from rlplan.solvers.local import best_baseline
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.rpeg.moe_instances import tiny_moe_problem
from tests.solvers.conftest import load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA, KNOWN_SCORES
from tests.solvers.test_pools_exact import TWO_POOLS

#: Tiny instances whose optimum the local search misses with its defaults (seed 0,
#: optimizer.e_max = 20000 evaluations, score_eps = 1e-4): what it returns instead, and
#: the knob that makes it reach the optimum.
#:
#: * the three tiny PPO instances: the plan at staleness 0 in the simulator's default run
#:   order, 20.43226 s, whose second rollout waits 1.25 ms for its CUDA IPC refit
#:   (test_exhaustive.py). The optimum's run order saves those 1.25 ms (6.1e-5 of the
#:   makespan) by training the actor first in step 0, and d = 13.9 us more (6.8e-7) by
#:   training the critic first in step 1: both less than score_eps, so the search never
#:   counts them as a new best. With score_eps 1e-7 it does (with 1e-5 or 1e-6 it stops
#:   at 20.43104 s on tiny_ppo_2gpu_sync, the plain step order). Staleness 1 would hide
#:   the refit too, but scores x 1.05.
#:
#: Every other tiny optimum is found with the defaults: tiny_lag_grpo_2gpu_async's (which
#: needs staleness 1 and the step order at once) by 8 of seeds 0-9 (seeds 6 and 9 stop
#: at 9.14149 s, 0.18 % above), seed 0 among them.
SHORT_OF = {
    "tiny_ppo_2gpu.yaml": (20.43226266125772, {"score_eps": 1e-7}),
    "tiny_ppo_2gpu_ac.yaml": (20.43226266125772, {"score_eps": 1e-7}),
    "tiny_ppo_2gpu_sync.yaml": (20.43226266125772, {"score_eps": 1e-7}),
}


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_local_finds_the_exhaustive_optimum(name):
    """Gap to the proven optimum score is zero (up to float rounding of the simulator),
    with the defaults or, for the instances of SHORT_OF, with the knob named there."""
    problem = load_problem(name)
    result = local.solve(problem, SolveOptions(time_limit=600, seed=0))
    assert result.status is Status.FEASIBLE
    assert result.stats["stop_reason"].startswith("evaluation budget")
    if name in SHORT_OF:
        found, knobs = SHORT_OF[name]
        assert result.score == pytest.approx(found, rel=1e-9)
        assert found > KNOWN_SCORES[name] * (1 + 1e-6)
        result = local.solve(_with_knobs(problem, **knobs), SolveOptions(time_limit=600, seed=0))
    assert result.score == pytest.approx(KNOWN_SCORES[name], rel=1e-9)
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-9)


def _with_knobs(problem: Problem, **knobs) -> Problem:
    instance = problem.instance
    optimizer = dataclasses.replace(instance.optimizer, **knobs)
    return Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))


@pytest.mark.parametrize(
    "name",
    [
        "tiny_ppo_2gpu.yaml",
        "tiny_grpo_2gpu.yaml",
        "ppo_8b_1x2x8_h100.yaml",
        "grpo_7b_1x2x8_h100.yaml",
    ],
)
def test_same_seed_same_plan_never_worse_than_baseline_always_feasible(name):
    """Deterministic per seed, feasible in simulation, and no worse than its start."""
    problem = _with_knobs(load_problem(name), e_max=3000)
    first = local.solve(problem, SolveOptions(time_limit=600, seed=3))
    second = local.solve(problem, SolveOptions(time_limit=600, seed=3))
    assert first.plan == second.plan
    assert first.makespan == second.makespan
    trace = problem.simulator.simulate(first.plan)
    assert trace.feasible
    assert trace.makespan == first.makespan
    baseline = best_baseline(problem)
    # no worse by the score it minimises (an on-policy plan may be a little slower)
    assert first.score <= problem.simulator.evaluate(baseline).score


@pytest.mark.parametrize("hard_oom", [False, True])
def test_memory_tight_instance_returns_feasible_plan(hard_oom):
    """Where most co-locations overflow memory, penalised or rejected, the result fits."""
    problem = _with_knobs(load_problem("dpo_8b_1x2x8_a100.yaml"), e_max=4000, hard_oom=hard_oom)
    result = local.solve(problem, SolveOptions(time_limit=600, seed=1))
    assert problem.simulator.simulate(result.plan).feasible


def test_ablation_knobs_run():
    """fixed_mb, uniform_vertex, no_polish and geometric cooling give feasible plans."""
    problem = _with_knobs(
        load_problem("tiny_grpo_4gpu.yaml"),
        e_max=2000,
        fixed_mb=True,
        uniform_vertex=True,
        no_polish=True,
        geometric_cooling=True,
    )
    result = local.solve(problem, SolveOptions(time_limit=600, seed=0))
    assert result.stats["polish_evaluations"] == 0
    assert problem.simulator.simulate(result.plan).feasible


def test_interrupt_returns_best_so_far():
    """A Ctrl-C during the search returns the best plan found so far, without polishing."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")
    calls = {"count": 0}

    def progress(best, evaluations):
        calls["count"] += 1
        if calls["count"] == 500:
            raise KeyboardInterrupt

    search = SimulatedAnnealing(problem.simulator, seed=0, progress=progress)
    start = best_baseline(problem)
    stop = StoppingCriterion(10**9, 600)
    outcome = search.run(start, stop)
    assert stop.interrupted
    assert outcome.statistics.stop_reason == "interrupted"
    assert outcome.statistics.polish_evaluations == 0
    assert problem.simulator.simulate(outcome.plan).feasible
    assert outcome.score <= problem.simulator.evaluate(start).score


def _state(problem: Problem, plan) -> SearchState:
    return SearchState.of(plan, problem.simulator.evaluate(plan), problem.simulator.capacity)


@pytest.mark.parametrize("move", moves.DEFAULT_MOVES, ids=lambda m: m.name)
def test_moves_stay_inside_the_plan_space(move):
    """Every neighbour has plan-space blocks and strategies, and simulates without error."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")
    if move is moves.CHANGE_POOL:
        problem = Problem.load(str(TWO_POOLS))  # one pool elsewhere: the move does not apply
    elif not move.applicable(problem.directory):
        problem = tiny_moe_problem()  # change_expert_layout: one (ep, etp, cp) when dense
    directory = problem.directory
    context = moves.MoveContext(directory, problem.instance.optimizer, problem.simulator)
    rng = random.Random(11)
    # a random plan of the space: the baseline puts every vertex on the whole cluster,
    # where the block moves (move_block, swap_blocks, colocate, separate) do not apply
    plan = random_plan(directory, random.Random(11))
    produced = 0
    for _ in range(150):
        for neighbour in move.propose(_state(problem, plan), context, rng):
            produced += 1
            for vertex, placement in zip(
                directory.template.vertices, neighbour.placements, strict=True
            ):
                assert placement.block in directory.cluster.blocks
                assert (
                    strategy_problem(
                        directory.instance, vertex, placement.block.extent, placement.strategy
                    )
                    is None
                )
            problem.simulator.evaluate(neighbour)
            if rng.random() < 0.3:
                plan = neighbour
    assert produced > 0


def test_order_swaps_are_topological_and_change_the_order():
    """swap_order yields orders the simulator accepts (it raises on non-topological ones)."""
    problem = load_problem("tiny_ppo_2gpu.yaml")
    context = moves.MoveContext(problem.directory, problem.instance.optimizer)
    rng = random.Random(5)
    plan = best_baseline(problem)
    swapped = 0
    for _ in range(300):
        for neighbour in moves.SWAP_ORDER.propose(_state(problem, plan), context, rng):
            swapped += 1
            assert neighbour.order is not None
            problem.simulator.evaluate(neighbour)
            plan = neighbour
    assert swapped > 10


def test_start_from_a_sampled_plan_when_no_baseline_fits():
    """On tiny_lag_grpo_2gpu the baselines share GPUs between rollout and training, which
    memory forbids; the start is then a seeded random plan that fits (the same each run)."""
    from rlplan.rpeg.search.baselines import concurrent_plan, greedy_plan

    problem = load_problem("tiny_lag_grpo_2gpu.yaml")
    assert greedy_plan(problem.directory, problem.simulator) is None
    assert concurrent_plan(problem.directory, problem.simulator) is None
    start = best_baseline(problem)
    assert start is not None and problem.simulator.evaluate(start).feasible
    assert best_baseline(problem) == start


def _without_search(problem: Problem) -> Problem:
    """``problem`` with a search that stops at its start: e_max 1, no polish."""
    knobs = dataclasses.replace(problem.instance.optimizer, e_max=1, no_polish=True)
    return Problem.from_instance(dataclasses.replace(problem.instance, optimizer=knobs))


def test_the_better_start_wins_whichever_runs_first():
    """With searches that stop at their start, improve_from_starts returns the better of
    two starts (tiny_dpo_2gpu's greedy baseline and its optimum) in either order, and
    says which start it came from."""
    from tests.rpeg.test_moves import optimum

    problem = _without_search(load_problem("tiny_dpo_2gpu.yaml"))
    best = optimum("tiny_dpo_2gpu.yaml")
    worse = best_baseline(problem)
    score = problem.simulator.evaluate
    assert score(worse).score > score(best).score
    options = SolveOptions(time_limit=30, seed=0)
    for starts, index in (([worse, best], 1), ([best, worse], 0)):
        plan, stats = local.improve_from_starts(problem, starts, options, 30)
        assert plan == best
        assert stats["start"] == index
        assert stats["evaluations"] == 3  # one per start, one going on from the leader


def test_the_leading_start_gets_the_rest_of_the_time(monkeypatch):
    """Two starts race over RACE_SHARE of the time in equal parts; the search then goes
    on from the leader's best plan with what is left, and its plan is kept when better.

    The searches are stand-ins that return a fixed plan per start and use up their time
    on a stand-in clock: the leader's (the optimum of tiny_dpo_2gpu, the better score)
    must be the plan the third search starts from, with (1 - RACE_SHARE) x 30 s = 18 s."""
    from tests.rpeg.test_moves import optimum

    problem = load_problem("tiny_dpo_2gpu.yaml")
    best = optimum("tiny_dpo_2gpu.yaml")
    worse = best_baseline(problem)
    calls = []

    clock = [0.0]

    def improve(problem, start, options, time_limit, max_evaluations=None):
        calls.append((start, time_limit))
        clock[0] += time_limit
        stats = {"evaluations": 1, "interrupted": False}
        return (best if start == best else start), stats

    monkeypatch.setattr(local, "improve", improve)
    monkeypatch.setattr(local.time, "perf_counter", lambda: clock[0])
    plan, stats = local.improve_from_starts(problem, [worse, best], SolveOptions(), 30)
    heat = 30 * local.RACE_SHARE / 2
    assert [start for start, _ in calls] == [worse, best, best]
    assert calls[0][1] == calls[1][1] == pytest.approx(heat)
    assert calls[2][1] == pytest.approx(30 - 2 * heat)
    assert plan == best and stats["start"] == 1 and stats["evaluations"] == 3


def test_split_baseline_is_a_second_start_when_it_fits_and_differs():
    """tiny_grpo_4gpu's split baseline (rollout and training apart) fits and differs from
    the better shared baseline: the search starts from both, and the solve's baseline
    lines reuse it; when the split baseline is the start itself there is one start."""
    problem = load_problem("tiny_grpo_4gpu.yaml")
    start = best_baseline(problem)
    found: dict = {}
    starts = local.search_starts(problem, start, found)
    assert starts[0] == start and len(starts) == 2
    assert found["split"] == starts[1]
    assert local.search_starts(problem, starts[1], {}) == [starts[1]]
