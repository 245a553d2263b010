"""CP-SAT: proven optima equal the exhaustive oracle's, bounds are valid, schedules replay."""

from __future__ import annotations

import random

import pytest

from formulation import build_formulation
from rpeg.sampling import random_plan
from solvers import auto, cpsat, exhaustive
from solvers.options import SolveOptions
from solvers.result import Status
from tests.solvers.conftest import load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

#: Durations and lags are floored to a unit of at most 1e-4 of the heuristic
#: makespan spread over a path, so a CP-SAT optimum is within 1e-4 (relative)
#: of the true optimum, and its bound below it.
REL = 1e-4


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_cpsat_proves_the_exhaustive_optimum(name):
    """OPTIMAL, simulated makespan equal to the oracle's optimum, bound below it."""
    problem = load_problem(name)
    result = cpsat.solve(problem, SolveOptions(time_limit=60, threads=2))
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=REL)
    assert result.makespan >= KNOWN_OPTIMA[name] * (1 - 1e-12)
    assert result.bound <= KNOWN_OPTIMA[name] * (1 + 1e-12)
    assert result.gap <= REL


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_cpsat_schedule_replays_in_the_simulator(name):
    """The plan carries CP-SAT's start order; simulating it gives the solver's objective."""
    problem = load_problem(name)
    result = cpsat.solve(problem, SolveOptions(time_limit=60, threads=2))
    assert result.plan.order is not None
    simulated = problem.simulator.simulate(result.plan).makespan
    tolerance = build_formulation(
        problem, result.stats["heuristic_start_makespan"]
    ).rounding_tolerance()
    assert abs(simulated - result.stats["cp_objective_s"]) <= tolerance
    assert simulated == result.makespan


@pytest.mark.parametrize(
    "name", ["tiny_ppo_2gpu.yaml", "tiny_grpo_4gpu.yaml", "tiny_dpo_4gpu.yaml"]
)
def test_cpsat_bound_never_exceeds_sampled_feasible_plans(name):
    """The proven bound is at most the simulated makespan of random feasible plans."""
    problem = load_problem(name)
    result = cpsat.solve(problem, SolveOptions(time_limit=60, threads=2))
    rng = random.Random(3)
    checked = 0
    for _ in range(2000):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        evaluation = problem.simulator.evaluate(plan)
        if evaluation.feasible:
            checked += 1
            assert result.bound <= evaluation.makespan
    assert checked > 0


def test_optimal_warm_start_is_returned_optimal():
    """Hinted with the oracle's optimal plan, CP-SAT proves it optimal and keeps its value."""
    problem = load_problem("tiny_ppo_2gpu.yaml")
    optimum = exhaustive.solve(problem, SolveOptions(time_limit=60))
    result = cpsat.solve_with_hint(problem, SolveOptions(threads=2), optimum.plan, 60)
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(optimum.makespan, rel=REL)
    assert result.stats["heuristic_start_makespan"] == optimum.makespan


def test_auto_reports_best_plan_with_proven_bound():
    """The portfolio returns a plan no worse than the local search's with CP-SAT's bound."""
    problem = load_problem("tiny_grpo_2gpu.yaml")
    result = auto.solve(problem, SolveOptions(time_limit=20, threads=2))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(KNOWN_OPTIMA["tiny_grpo_2gpu.yaml"], rel=REL)
    assert result.makespan <= result.stats["local_makespan"]
    assert result.bound <= result.makespan
    assert result.stats["cpsat_status"] == "OPTIMAL"


def test_auto_on_an_unplaceable_instance_is_infeasible_without_search():
    """A vertex fitting nowhere gives INFEASIBLE naming it, before any search."""
    problem = load_problem("infeasible_70b_2gpu.yaml")
    result = auto.solve(problem, SolveOptions(time_limit=20))
    assert result.status is Status.INFEASIBLE
    assert "fits on no block" in result.message
    assert result.wall_time < 5
