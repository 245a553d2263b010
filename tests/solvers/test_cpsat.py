"""CP-SAT: proven optima equal the exhaustive oracle's, bounds are valid, schedules replay."""

from __future__ import annotations

import pytest

from rlplan.solvers import auto, cpsat, exhaustive
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

#: Durations and lags are floored to a unit of at most 1e-4 of the heuristic
#: makespan spread over a path, so a CP-SAT optimum is within 1e-4 (relative)
#: of the true optimum, and its bound below it.
REL = 1e-4


def test_optimal_warm_start_is_returned_optimal():
    """Hinted with the oracle's optimal plan, CP-SAT proves it optimal and keeps its value.

    On the on-policy plan space: ``solve_with_hint`` is the backend below the
    staleness switch and minimises the makespan, so on the full space it may
    return an off-policy plan of smaller makespan whose penalised score is
    above the switch-free bound (docs/solvers.md).
    """
    problem = load_problem("tiny_ppo_2gpu.yaml").on_policy()
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


def test_auto_on_an_unplaceable_instance_is_infeasible_without_search(monkeypatch):
    """A vertex fitting nowhere gives INFEASIBLE naming it, before any search."""
    problem = load_problem("infeasible_70b_2gpu.yaml")

    def no_search(*_args, **_kwargs):
        raise AssertionError("a search started on an unplaceable instance")

    monkeypatch.setattr(auto, "best_baseline", no_search)
    monkeypatch.setattr(auto, "improve", no_search)
    result = auto.solve(problem, SolveOptions(time_limit=20))
    assert result.status is Status.INFEASIBLE
    assert "fits on no block" in result.message
