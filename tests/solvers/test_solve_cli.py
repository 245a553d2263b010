"""``main.py solve``: outputs, exit codes and the Result document."""

from __future__ import annotations

import json
import os

from rlplan.cli import app as main
from tests.solvers.conftest import ROOT


def _instance(name: str) -> str:
    return os.path.join(ROOT, "instances", name)


def test_solve_writes_every_output_and_exit_0(tmp_path, capsys):
    """plan, traces, result, report and Gantt chart appear; result.json follows the spec."""
    out = tmp_path / "run"
    code = main.main(
        [
            "solve",
            _instance("tiny_dpo_2gpu.yaml"),
            "--solver",
            "exhaustive",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    assert sorted(os.listdir(out)) == [
        "gantt.png",
        "plan.json",
        "report.html",
        "report.md",
        "result.json",
        "tiny_dpo_2gpu.yaml",
        "trace.json",
        "trace.perfetto.json",
    ]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "OPTIMAL"
    for key in (
        "solver",
        "makespan_s",
        "step_time_s",
        "bound_makespan_s",
        "bound_step_s",
        "gap",
        "wall_time_s",
        "stats",
    ):
        assert key in result
    trace = json.loads((out / "trace.json").read_text())
    assert trace["makespan"] == result["makespan_s"]
    report = (out / "report.md").read_text()
    assert "| status | OPTIMAL |" in report and "actor.train" in report and "Staleness" in report
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".staging")]


def test_solve_infeasible_instance_exit_1_names_vertex(tmp_path, capsys):
    """A 70B actor on two 24 GB GPUs: INFEASIBLE, exit 1, the vertex and its shortfall."""
    code = main.main(
        ["solve", _instance("infeasible_70b_2gpu.yaml"), "--out", str(tmp_path / "x"), "--quiet"]
    )
    printed = capsys.readouterr().out
    assert code == 1
    assert "INFEASIBLE" in printed
    assert "actor.train" in printed and "GB more than the usable" in printed


def test_solve_refused_exhaustive_exit_3(tmp_path, capsys):
    """No plan within the limits (the oracle refuses a large space): exit 3, no plan file."""
    out = tmp_path / "y"
    code = main.main(
        [
            "solve",
            _instance("ppo_8b_1x2x8_h100.yaml"),
            "--solver",
            "exhaustive",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 3
    assert not (out / "plan.json").exists()


def test_solve_unknown_solver_exit_2(tmp_path, capsys):
    """An unknown backend name is bad input: one line naming --solver, nothing written."""
    out = tmp_path / "z"
    code = main.main(
        ["solve", _instance("tiny_dpo_2gpu.yaml"), "--solver", "nope", "--out", str(out)]
    )
    assert code == 2
    assert "--solver" in capsys.readouterr().err
    assert not out.exists()
