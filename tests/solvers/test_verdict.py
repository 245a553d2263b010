"""One verdict: OPTIMAL iff the gap is within the rounding tolerance (docs/solvers.md)."""

from __future__ import annotations

import json
import time

import pytest

from rlplan.cli import app as main
from rlplan.solvers import get_solver
from rlplan.solvers.common import plan_result
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import OPTIMALITY_TOLERANCE, Result, Status, verdict
from tests.solvers.conftest import ROOT, load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

TINY_PPO = "tiny_ppo_2gpu.yaml"


def test_the_rule_on_known_gaps():
    """Gap = (100 - bound) / 100: 0.01% is OPTIMAL, 0.02% is not, a requested 1% covers 0.5%."""
    assert OPTIMALITY_TOLERANCE == 1e-4
    assert verdict(100.0, 100.0) is Status.OPTIMAL
    assert verdict(100.0, 99.99) is Status.OPTIMAL  # gap 0.01% = the tolerance
    assert verdict(100.0, 99.98) is Status.FEASIBLE  # gap 0.02%
    assert verdict(100.0, None) is Status.FEASIBLE
    assert verdict(100.0, 99.5, requested_gap=0.01) is Status.OPTIMAL_WITHIN_GAP
    assert verdict(100.0, 98.0, requested_gap=0.01) is Status.FEASIBLE  # gap 2% > 1%
    assert verdict(100.0, 99.995, requested_gap=0.01) is Status.OPTIMAL  # within the tolerance


def test_plan_result_applies_the_rule_to_any_backend():
    """The same plan and bound give the same status whatever backend packages them."""
    problem = load_problem(TINY_PPO)
    optimum = get_solver("exhaustive")(problem, SolveOptions(time_limit=30))
    makespan = optimum.makespan
    started = time.perf_counter()
    for solver in ("cpsat", "milp", "auto", "local"):
        close = plan_result(problem, solver, optimum.plan, started, bound=makespan * (1 - 5e-5))
        assert close.status is Status.OPTIMAL
        assert close.gap == pytest.approx(5e-5)
        far = plan_result(problem, solver, optimum.plan, started, bound=makespan * (1 - 2e-3))
        assert far.status is Status.FEASIBLE
        asked = plan_result(
            problem,
            solver,
            optimum.plan,
            started,
            bound=makespan * (1 - 2e-3),
            requested_gap=0.01,
        )
        assert asked.status is Status.OPTIMAL_WITHIN_GAP


@pytest.mark.parametrize(
    "backend", ["greedy", "concurrent", "local", "exhaustive", "cpsat", "milp", "auto"]
)
def test_every_backend_reports_the_verdict_of_its_gap(backend):
    """tiny_ppo_2gpu: every status is the rule applied to the result's own makespan and bound;
    the exact backends and auto all reach the known optimum and say OPTIMAL (auto used to say
    FEASIBLE at a 0.0023% gap)."""
    problem = load_problem(TINY_PPO)
    result = get_solver(backend)(problem, SolveOptions(time_limit=30, threads=2))
    assert result.status is verdict(result.makespan, result.bound)
    if backend in ("exhaustive", "cpsat", "milp", "auto"):
        assert result.makespan == pytest.approx(KNOWN_OPTIMA[TINY_PPO], rel=1e-4)
        assert result.status is Status.OPTIMAL
        assert result.gap <= OPTIMALITY_TOLERANCE


def test_requested_gap_is_reported_optimal_within_gap(tmp_path, capsys):
    """--gap 0.5 on a local plan 9.5% above the plan-independent bound: OPTIMAL_WITHIN_GAP, and
    the status line says so, never plain OPTIMAL."""
    out = tmp_path / "run"
    instance = f"{ROOT}/instances/{TINY_PPO}"
    code = main.main(
        ["solve", instance, "--solver", "local", "--gap", "0.5", "--out", str(out), "--quiet"]
    )
    printed = capsys.readouterr().out
    assert code == 0
    document = json.loads((out / "result.json").read_text())
    assert OPTIMALITY_TOLERANCE < document["gap"] <= 0.5
    assert document["status"] == "OPTIMAL_WITHIN_GAP"
    assert document["requested_gap"] == 0.5
    status_line = printed.splitlines()[0]
    assert "optimal within the requested 50% gap" in status_line
    assert not status_line.startswith("status       OPTIMAL ")
    report = (out / "report.md").read_text()
    assert "| status | OPTIMAL |" not in report


def test_without_a_requested_gap_the_same_plan_is_feasible(tmp_path, capsys):
    """The same local plan without --gap: FEASIBLE (its gap is above the tolerance)."""
    out = tmp_path / "run"
    instance = f"{ROOT}/instances/{TINY_PPO}"
    assert main.main(["solve", instance, "--solver", "local", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert json.loads((out / "result.json").read_text())["status"] == "FEASIBLE"


@pytest.mark.parametrize("gap", ["-0.1", "1.5", "2.5", "nan"])
def test_bad_gap_is_one_line_exit_2(tmp_path, capsys, gap):
    """A gap outside [0, 1]: one line naming --gap, exit 2, nothing written (a gap of 1, any
    feasible plan, is accepted: tests/test_solve_options.py)."""
    out = tmp_path / "run"
    instance = f"{ROOT}/instances/{TINY_PPO}"
    code = main.main(["solve", instance, "--gap", gap, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--gap" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_optimal_within_gap_counts_as_a_plan():
    """OPTIMAL_WITHIN_GAP carries a plan (exit 0), like OPTIMAL and FEASIBLE."""
    assert Status.OPTIMAL_WITHIN_GAP.has_plan
    assert not Status.UNKNOWN.has_plan
    result = Result(Status.OPTIMAL_WITHIN_GAP, "cpsat", requested_gap=0.01)
    described = result.describe_status()
    assert described.startswith("OPTIMAL_WITHIN_GAP: optimal within the requested 1% gap")
