"""The steady-state period: the largest cycle ratio of a plan's event graph.

docs/simulator.md, "The steady-state period".
"""

from __future__ import annotations

import dataclasses
import json
import os
import random

import pytest

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.period import (
    CycleEdge,
    cycle_edges,
    cycle_offsets,
    cycle_problem,
    cyclic_sequence,
    max_cycle_ratio,
)
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan, plan_from_json
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search.sampling import random_plan


def test_a_refit_on_the_critical_cycle_is_paid_once_per_one_plus_staleness_periods():
    # Generation (vertex 0, 1 s) and training (vertex 1, 1 s) on disjoint GPUs; the data
    # edge 0 -> 1 is free, the refit 1 -> 0 takes 5 s at staleness 1 (step lag 2).
    # Cycles: each chain (1/1), and 0 -> 1 -> 0 of weight (1 + 0) + (1 + 5) = 7 over
    # height 0 + 2: T = 3.5 s.
    edges = cycle_edges([1.0, 1.0], [(0, 1, 0.0, 0), (1, 0, 5.0, 2)], {})
    assert max_cycle_ratio(2, edges) == pytest.approx(3.5)


def test_two_vertices_sharing_gpus_take_turns():
    # Generation (3 s) then training (2 s) on the same GPUs, staleness 0 (pub step lag 1),
    # q = 0: (0, t) then (1, t) then (0, t + 1): the turn cycle 0 -> 1 -> 0 weighs
    # 3 + 2 = 5 over height 0 + 1: T = 5 s. With the data edge alone (no turns) it would
    # be the pub cycle (3 + 2 + 0.5 lag) / 1 = 5.5: the refit's lag dominates here.
    turns = cycle_edges([3.0, 2.0], [(0, 1, 0.0, 0), (1, 0, 0.5, 1)], {(0, 1): 0})
    assert max_cycle_ratio(2, turns) == pytest.approx(5.5)
    # At staleness 1 the pub cycle is 5.5 / 2 = 2.75 and the turns decide: 5 s.
    stale = cycle_edges([3.0, 2.0], [(0, 1, 0.0, 0), (1, 0, 0.5, 2)], {(0, 1): 0})
    assert max_cycle_ratio(2, stale) == pytest.approx(5.0)


def test_a_cycle_without_periods_deadlocks():
    # q = 1 says (1, t + 1) goes before (0, t + 1): the turn edge 1 -> 0 of height
    # 1 - 1 = 0 beside the data edge 0 -> 1 of height 0 closes a cycle of weight 3 + 2
    # in no period.
    edges = cycle_edges([3.0, 2.0], [(0, 1, 0.0, 0)], {(0, 1): 1})
    with pytest.raises(ValueError, match="deadlocks"):
        max_cycle_ratio(2, edges)


def test_the_ratio_is_the_largest_over_several_cycles():
    # Three vertices: chain ratios 1, 2, 1; cycle 0 -> 1 -> 2 -> 0 of weight 1 + 2 + 4 = 7
    # over height 0 + 0 + 3 (ratio 2.33); cycle 0 -> 2 -> 0 of weight 6 + 4 = 10 over
    # height 1 + 3 (2.5): T = 2.5.
    edges = [
        CycleEdge(0, 0, 1.0, 1),
        CycleEdge(1, 1, 2.0, 1),
        CycleEdge(2, 2, 1.0, 1),
        CycleEdge(0, 1, 1.0, 0),
        CycleEdge(1, 2, 2.0, 0),
        CycleEdge(2, 0, 4.0, 3),
        CycleEdge(0, 2, 6.0, 1),
    ]
    assert max_cycle_ratio(3, edges) == pytest.approx(2.5)


def test_a_cyclic_order_gives_its_turn_offsets_and_its_sequence():
    # Window order: training of the previous step (vertex 1, shift 1), then generation
    # (vertex 0, shift 0), both on shared GPUs: (1, t) shares a window with (0, t + 1), so
    # with 1 listed first q(1, 0) = 1 - 0 = 1.
    cycle = ((1, 1), (0, 0))
    assert cycle_offsets(cycle, [(0, 1), (0, 1)]) == {(1, 0): 1}
    # Windows 0, 1, 2 over 2 steps: (0, 0) | (1, 0) (0, 1) | (1, 1): run ids step * 2 + v.
    assert cyclic_sequence(cycle, 2, 2) == [0, 1, 2, 3]
    assert cycle_problem(cycle, 2, [(0, 1, 0.0, 0), (1, 0, 0.0, 1)]) is None
    # Training listed with shift 0 before generation would train before generating.
    assert "before its predecessor" in cycle_problem(
        ((1, 0), (0, 0)), 2, [(0, 1, 0.0, 0), (1, 0, 0.0, 1)]
    )
    assert "every vertex once" in cycle_problem(((0, 0),), 2, [])


# -- the simulator: the period of a plan is the limit of its unrolled schedule --------------


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def steady_problem(path: str, **optimizer) -> Problem:
    """The problem of ``path`` (from the repository root) under the steady-state objective."""
    instance = load_instance(os.path.join(ROOT, path))
    changed = dataclasses.replace(instance.optimizer, objective="steady_state", **optimizer)
    return Problem.from_instance(dataclasses.replace(instance, optimizer=changed))


def feasible_plans(problem: Problem, count: int, seed: int = 0) -> list[Plan]:
    """Up to ``count`` memory-feasible random plans (list order) of ``problem``."""
    rng = random.Random(seed)
    plans = []
    for _ in range(40 * count):
        plan = random_plan(problem.directory, rng)
        if problem.simulator.memory_violation(plan) <= 0:
            plans.append(plan)
        if len(plans) == count:
            break
    return plans


@pytest.mark.parametrize(
    "path",
    [
        "instances/tiny_lag_grpo_2gpu_async.yaml",
        "instances/tiny_grpo_2gpu.yaml",
        "instances/tiny_grpo_4gpu.yaml",
        "tests/data/tiny_grpo_2x2gpu.yaml",
    ],
)
def test_the_period_is_the_limit_of_the_unrolled_makespan(path):
    # The list schedule settles into a repeating pattern within a few steps, after which
    # every step adds the period: (makespan(2k) - makespan(k)) / k is T for k = 8 and 16.
    problem = steady_problem(path)
    simulator = problem.simulator
    plans = feasible_plans(problem, 8)
    assert len(plans) >= 2
    # Every placement at staleness 0, 1 and 2 of the actor.
    for plan in [p.with_staleness("actor", s) for p in plans for s in (0, 1, 2)]:
        period = simulator.period(plan)
        spans = {k: simulator.makespan_over(plan, k) for k in (8, 16, 32)}
        assert (spans[16] - spans[8]) / 8 == pytest.approx(period, rel=1e-9)
        assert (spans[32] - spans[16]) / 16 == pytest.approx(period, rel=1e-9)


def test_makespan_over_k_tends_to_the_period_from_either_side():
    # makespan(k) = k*T + c once the pattern repeats; c > 0 is the fill of a pipelined
    # plan, c < 0 what the first steps skip: a synchronous plan's first rollout waits for
    # no refit, so makespan(k) = k*T - refit and makespan(k)/k stays below T.
    problem = steady_problem("instances/tiny_lag_grpo_2gpu_async.yaml")
    simulator = problem.simulator
    signs = set()
    for plan in feasible_plans(problem, 12):
        period = simulator.period(plan)
        offsets = [simulator.makespan_over(plan, k) - k * period for k in (8, 12, 16)]
        assert offsets == pytest.approx([offsets[0]] * 3, abs=1e-9)
        signs.add(offsets[0] > 0)
    assert signs == {True, False}


def test_the_anchor_optimum_runs_at_its_long_run_step():
    # The makespan(16) optimum of the mixed H100/H20 anchor (one step stale, generation on
    # the H20 pool, training on the H100 node): its unrolled makespan(k)/k falls toward
    # the period from above, and (makespan(64) - makespan(32)) / 32 is the period.
    problem = steady_problem("instances/anchor/grpo_r1_7b_math_h100_h20.yaml")
    simulator = problem.simulator
    plan = _anchor_plan(problem)
    period = simulator.period(plan)
    longer, shorter = simulator.makespan_over(plan, 64), simulator.makespan_over(plan, 32)
    assert (longer - shorter) / 32 == pytest.approx(period, rel=1e-9)
    steps = [simulator.makespan_over(plan, k) / k for k in (2, 8, 16, 32, 64)]
    assert steps == sorted(steps, reverse=True)
    assert all(step > period for step in steps)
    trace = simulator.simulate(plan)
    assert trace.step_time == pytest.approx(period)
    assert trace.period == pytest.approx(period)
    assert trace.unrolled_step == pytest.approx(simulator.makespan_over(plan, 16) / 16)
    assert trace.makespan == pytest.approx(16 * period)


def _anchor_plan(problem: Problem) -> Plan:
    """The anchor's makespan(16) optimum (``auto``, proven), placements and staleness.

    Read under the makespan objective, whose instance the file was written for.
    """
    instance = dataclasses.replace(
        problem.instance,
        optimizer=dataclasses.replace(problem.instance.optimizer, objective="makespan"),
    )
    directory = Problem.from_instance(instance).directory
    with open(os.path.join(ROOT, "tests", "data", "anchor_h100_h20_optimum.json")) as handle:
        plan = plan_from_json(json.load(handle), directory)
    return Plan(plan.placements, plan.staleness)


def test_a_cyclic_order_that_is_not_topological_is_refused():
    problem = steady_problem("instances/tiny_lag_grpo_2gpu_async.yaml")
    plan = feasible_plans(problem, 1)[0]
    # Training (2) of the same step before its reward (1): not a cyclic order.
    wrong = plan.with_order(((0, 0), (2, 0), (1, 0)))
    with pytest.raises(PlanError, match=r"actor\.train is placed before its predecessor"):
        problem.simulator.period(wrong)
