"""The formulation charges every run edge the simulator's lag, floored to the time unit.

With equal coefficients, a backend's objective can only differ from the
simulated makespan of its plan by rounding or by idle time in its schedule,
which :func:`rlplan.formulation.schedule.earliest_ends` removes.
"""

from __future__ import annotations

import random

import pytest

from rlplan.formulation import build_formulation
from rlplan.formulation.schedule import active_lags, earliest_ends
from rlplan.rpeg.search.sampling import random_plan
from rlplan.rpeg.templates import unroll
from tests.solvers.conftest import TINY, load_problem

PLANS = 20


@pytest.mark.parametrize("name", [*TINY, "ppo_8b_1x2x8_h100.yaml"])
def test_active_lags_are_the_simulator_lags_floored(name):
    problem = load_problem(name)
    simulator = problem.simulator
    formulation = build_formulation(problem, 100.0, prune=False)
    rng = random.Random(3)
    for _ in range(PLANS):
        plan = formulation.canonical(random_plan(problem.directory, rng))
        chosen = [formulation.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        lags = simulator.lags(plan)
        expected: dict[tuple[int, int], int] = {}
        for edge in unroll(problem.directory.template, formulation.k_eval, plan.staleness_map):
            lag = formulation.to_units(lags[edge.template_edge]) if edge.template_edge >= 0 else 0
            key = (edge.src, edge.dst)
            expected[key] = max(expected.get(key, 0), lag)
        assert active_lags(formulation, chosen, plan.staleness_map) == expected


@pytest.mark.parametrize("name", TINY)
def test_earliest_schedule_of_a_warm_start_is_its_simulation(name):
    """The earliest schedule of a simulated plan is within the rounding tolerance of it."""
    problem = load_problem(name)
    rng = random.Random(5)
    plan = random_plan(problem.directory, rng)
    makespan = problem.simulator.evaluate(plan).makespan
    formulation = build_formulation(problem, makespan)
    chosen, staleness, starts = formulation.warm_start(plan)
    earliest = max(earliest_ends(formulation, chosen, staleness, starts)) * formulation.unit
    assert earliest <= makespan + 1e-9
    assert makespan - earliest <= formulation.rounding_tolerance()
