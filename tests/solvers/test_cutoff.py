"""Cutoffs between solves (docs/solvers.md#cutoffs-between-solves).

On ``tiny_dpo_2gpu_v2`` with the penalty off (lambda_stale 0) the optimum is the
off-policy plan, OFF_POLICY = 13.254058518982717 s over k_eval 2 steps (the
oracle's, ``tests/solvers/test_staleness.py``). A cutoff 1 % below it leaves
no plan, so each exact backend must return its warm start with the cutoff as
its bound; a cutoff 0.2 % above it (and below the warm start) must still
find the optimum.
"""

from __future__ import annotations

import pytest

from rlplan.solvers import cpsat
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.milp import backend as milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status, reaches_cutoff
from tests.solvers.test_staleness import OFF_POLICY, ON_POLICY, REL, flip_problem

BACKENDS = {"cpsat": cpsat.solve_with_hint, "milp": milp.solve_with_start}


def solve_cut(name: str, cutoff: float):
    """Solve from the warm start's placement at staleness 0 (13.316978168983987 s)."""
    problem = flip_problem(0.0)
    options = SolveOptions(time_limit=60, threads=2, cutoff=cutoff)
    start = warm_start_plan(problem, SolveOptions(time_limit=5, threads=2))
    start = start.with_staleness("actor", 0)
    assert problem.simulator.evaluate(start).makespan == pytest.approx(ON_POLICY)
    return problem, start, BACKENDS[name](problem, options, start, 60)


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_cutoff_below_the_optimum_is_proven_as_the_bound(name):
    cutoff = 0.99 * OFF_POLICY
    _, start, result = solve_cut(name, cutoff)
    assert result.status is not Status.ERROR, result.message
    assert result.stats["cutoff_proved"] is True
    assert result.stats["cutoff_makespan_s"] == pytest.approx(cutoff)
    assert reaches_cutoff(result.bound, cutoff)
    # the bound stays valid: below the true optimum
    assert result.bound <= OFF_POLICY * (1 + REL)
    assert result.plan == start  # nothing below the cutoff: the warm start comes back


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_a_cutoff_above_the_optimum_keeps_it(name):
    cutoff = 1.002 * OFF_POLICY  # 13.2806 s: below the warm start, above the optimum
    _, _, result = solve_cut(name, cutoff)
    assert result.stats["cutoff_makespan_s"] == pytest.approx(cutoff)
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(OFF_POLICY, rel=REL)
    assert "cutoff_proved" not in result.stats


def test_reaches_cutoff_needs_both_numbers():
    assert reaches_cutoff(10.0, 10.0)
    assert not reaches_cutoff(9.9, 10.0)
    assert not reaches_cutoff(None, 10.0)
    assert not reaches_cutoff(10.0, None)
