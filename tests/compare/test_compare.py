"""``main.py compare``: results file, resume, summary, plots, executors."""

from __future__ import annotations

import csv
import importlib.util
import math
import os

import pytest

from rlplan.cli import app as main
from rlplan.compare.store import COLUMNS, ResultStore
from rlplan.compare.suite import DEFAULT_SUITE, load_suite
from rlplan.compare.summary import fill_gaps, render_summary
from tests.solvers.conftest import ROOT

TINY = [
    os.path.join(ROOT, "instances", name) for name in ("tiny_dpo_2gpu.yaml", "tiny_grpo_4gpu.yaml")
]


def _rows(folder) -> list[dict]:
    with open(os.path.join(folder, "results.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


def test_two_instance_suite_writes_results_summary_and_plots(tmp_path, capsys):
    """Every cell lands in results.csv with the spec's fields; summary and both plots appear."""
    out = tmp_path / "bench"
    code = main.main(
        [
            "compare",
            *TINY,
            "--solvers",
            "greedy,exhaustive",
            "--time-limit",
            "20",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 4
    assert tuple(rows[0]) == COLUMNS
    for row in rows:
        assert row["status"] in ("FEASIBLE", "OPTIMAL")
        assert float(row["step_time_s"]) > 0 and float(row["wall_time_s"]) >= 0
        assert row["gap_to_best_bound"] != ""
        assert float(row["time_to_first_plan_s"]) <= float(row["wall_time_s"]) + 1e-9
    exhaustive = [r for r in rows if r["solver"] == "exhaustive"]
    assert all(
        r["status"] == "OPTIMAL" and float(r["gap_to_best_bound"]) == 0.0 for r in exhaustive
    )
    summary = (out / "summary.md").read_text()
    assert "tiny_dpo_2gpu" in summary and "| exhaustive |" in summary
    for plot in ("performance_profile.png", "gap_over_time.png"):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rerun_resumes_skipping_finished_cells(tmp_path, capsys):
    """A second run with one more solver runs only the new cells; old rows stay as they were."""
    out = tmp_path / "bench"
    main.main(
        [
            "compare",
            TINY[0],
            "--solvers",
            "greedy",
            "--time-limit",
            "10",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    first = _rows(out)
    capsys.readouterr()
    main.main(
        [
            "compare",
            TINY[0],
            "--solvers",
            "greedy,concurrent",
            "--time-limit",
            "10",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    printed = capsys.readouterr().out
    assert "1 cells to run (1 already in" in printed
    rows = _rows(out)
    assert len(rows) == 2
    assert rows[0]["step_time_s"] == first[0]["step_time_s"]
    assert {r["solver"] for r in rows} == {"greedy", "concurrent"}


def test_a_row_cut_by_a_crash_is_ignored_and_rerun(tmp_path):
    """A half-written last line (a crash mid-write) does not count as a finished cell."""
    store = ResultStore(str(tmp_path))
    store.append(
        {
            "instance": "a",
            "solver": "greedy",
            "repeat": 0,
            "seed": 0,
            "status": "FEASIBLE",
            "step_time_s": 1.0,
        }
    )
    with open(store.csv_path, "a") as handle:
        handle.write("b,greedy,0,0")
    assert store.finished() == {("a", "greedy", 0)}


def test_summary_gaps_geometric_mean_and_wins():
    """Hand-made records: best bound 90 on makespans 100 and 120 give gaps 10% and 25%."""
    records = [
        {
            "instance": "i",
            "solver": "s1",
            "repeat": 0,
            "status": "FEASIBLE",
            "makespan_s": 100.0,
            "step_time_s": 50.0,
            "bound_makespan_s": 80.0,
            "wall_time_s": 1.0,
        },
        {
            "instance": "i",
            "solver": "s2",
            "repeat": 0,
            "status": "FEASIBLE",
            "makespan_s": 120.0,
            "step_time_s": 60.0,
            "bound_makespan_s": 90.0,
            "wall_time_s": 1.0,
        },
    ]
    fill_gaps(records)
    # best bound = max(80, 90) = 90: (100-90)/100 = 0.10 and (120-90)/120 = 0.25
    assert records[0]["gap_to_best_bound"] == pytest.approx(0.10)
    assert records[1]["gap_to_best_bound"] == pytest.approx(0.25)
    summary = render_summary(records, ["s1", "s2"], 60)
    # geometric mean of one gap is the gap; s1 wins (step 50 < 60); bound per step 90/2 = 45
    assert "| s1 | 10.000% | 1/1 | 1 | 0 |" in summary
    assert "| s2 | 25.000% | 1/1 | 0 | 0 |" in summary
    assert "| i | 50.0000 | 45.0000 | 10.000% | 25.000% |" in summary
    two = [dict(records[0], instance="j"), *records]
    fill_gaps(two)
    # on j only s1 ran (bound 80): gap (100-80)/100 = 20%; geometric mean of 10% and 20%
    expected = math.exp((math.log(1.10) + math.log(1.20)) / 2) - 1  # = 14.891%
    assert f"| s1 | {expected:.3%} | 2/2 |" in render_summary(two, ["s1", "s2"], 60)


def test_bad_input_is_refused_before_any_work(tmp_path, capsys):
    """Unknown solver, missing suite file, or a bad instance: exit 2, no results folder."""
    out = tmp_path / "bench"
    assert main.main(["compare", TINY[0], "--solvers", "greedy,nope", "--out", str(out)]) == 2
    assert main.main(["compare", "--suite", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: {}\n")
    assert main.main(["compare", str(bad), "--solvers", "greedy", "--out", str(out)]) == 2
    assert not out.exists()


def test_default_suite_runs_from_tiny_to_large():
    """The shipped default suite lists existing instances from 2 to 256 GPUs."""
    suite = load_suite(DEFAULT_SUITE)
    names = [os.path.basename(p) for p in suite.instances]
    assert any(n.startswith("tiny_") for n in names) and "ppo_70b_4x8x8_h100.yaml" in names


@pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install -e '.[ray]')"
)
def test_two_cell_suite_on_a_local_ray_instance(tmp_path, capsys):
    """--executor ray starts a local Ray instance, runs each cell as a task, writes results."""
    out = tmp_path / "ray"
    code = main.main(
        [
            "compare",
            TINY[0],
            "--solvers",
            "greedy,local",
            "--time-limit",
            "10",
            "--executor",
            "ray",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    rows = _rows(out)
    assert sorted(r["solver"] for r in rows) == ["greedy", "local"]
    assert all(r["status"] == "FEASIBLE" for r in rows)
