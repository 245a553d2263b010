"""result.json names every time with its unit; the incumbent history ends at the result."""

from __future__ import annotations

import json

import pytest

from rlplan.cli import app as main
from rlplan.compare.cells import Cell, run_cell
from rlplan.solvers.progress import finish_history
from tests.solvers.conftest import ROOT
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

TINY_PPO = "tiny_ppo_2gpu.yaml"


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_result_json_has_explicit_units(tmp_path, capsys, backend):
    """makespan_s / step_time_s / bound_makespan_s / bound_step_s / gap agree with each other and
    the trace, and the history ends at the simulated makespan, not at the solver's objective
    (which the floored model puts below it)."""
    out = tmp_path / "run"
    instance = f"{ROOT}/instances/{TINY_PPO}"
    code = main.main(["solve", instance, "--solver", backend, "--out", str(out), "--quiet"])
    capsys.readouterr()
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    trace = json.loads((out / "trace.json").read_text())
    for old in ("makespan", "step_time", "bound"):
        assert old not in result
    k = result["k_eval"]
    assert k == 2
    assert result["makespan_s"] == trace["makespan"]
    assert result["makespan_s"] == pytest.approx(KNOWN_OPTIMA[TINY_PPO], rel=1e-4)
    assert result["step_time_s"] == pytest.approx(result["makespan_s"] / k, rel=1e-15)
    assert result["bound_step_s"] == pytest.approx(result["bound_makespan_s"] / k, rel=1e-15)
    assert result["bound_makespan_s"] <= result["makespan_s"]
    assert result["gap"] == pytest.approx(
        (result["makespan_s"] - result["bound_makespan_s"]) / result["makespan_s"], abs=1e-15
    )
    assert result["wall_time_s"] > 0
    assert result["optimality_tolerance"] == 1e-4
    history = result["stats"]["incumbent_history"]
    objective = result["stats"].get("cp_objective_s", result["stats"].get("milp_objective_s"))
    assert objective < result["makespan_s"]  # the model objective is below the simulation
    assert history[-1][1] == result["makespan_s"]
    assert all(value >= result["makespan_s"] for _, value in history)
    assert [t for t, _ in history] == sorted(t for t, _ in history)


def test_finish_history_known_answers():
    """Solver objectives under the simulated makespan are raised to it; the last entry is it."""
    assert finish_history([(0.1, 12.0), (0.5, 9.9995)], 10.0, 1.0) == [(0.1, 12.0), (0.5, 10.0)]
    assert finish_history([(0.5, 11.0), (0.1, 12.0)], 10.0, 1.0) == [
        (0.1, 12.0),
        (0.5, 11.0),
        (1.0, 10.0),
    ]
    assert finish_history([(0.1, 9.0), (0.2, 8.0)], 10.0, 1.0) == [(0.1, 10.0)]
    assert finish_history([], 10.0, 1.0) == [(1.0, 10.0)]
    assert finish_history([(0.1, 12.0)], None, 1.0) == [(0.1, 12.0)]


def test_compare_records_carry_units_and_end_at_the_makespan():
    """A benchmark cell records makespan_s, step_time_s, bound_makespan_s; its history ends at
    the simulated makespan."""
    path = f"{ROOT}/instances/{TINY_PPO}"
    with open(path, encoding="utf-8") as handle:
        cell = Cell(path, "cpsat", 0, handle.read())
    record = run_cell(cell, time_limit=30, threads=2, seed=0)
    assert record["status"] == "OPTIMAL"
    assert record["makespan_s"] == pytest.approx(KNOWN_OPTIMA[TINY_PPO], rel=1e-4)
    assert record["step_time_s"] == pytest.approx(record["makespan_s"] / 2)
    assert record["bound_makespan_s"] <= record["makespan_s"]
    assert record["history"][-1][1] == record["makespan_s"]
