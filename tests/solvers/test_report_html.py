"""``report.html`` of ``solve`` and the HTML builder shared with ``pareto`` and ``sweep``."""

from __future__ import annotations

import os

from rlplan.outputs.html_page import HtmlReport
from rlplan.solvers import solve
from rlplan.solvers.options import SolveOptions
from tests.htmlcheck import assert_self_contained, parse_report
from tests.solvers.conftest import ROOT, load_problem


def test_builder_escapes_text_and_embeds_figures():
    """Text is escaped (no markup injected); a figure is a data URI; numbers right-aligned."""
    report = HtmlReport("a <b> & c")
    report.paragraph("<script>alert(1)</script>")
    report.table(("x", "y"), [[1.23456789, "<i>"], [None, True]], muted=[False, True])
    report.figure(b"\x89PNG\r\n\x1a\n" + b"\0" * 200, 'caption "quoted"')
    text = report.render()
    assert "<script>" not in text and "&lt;script&gt;" in text
    contents = assert_self_contained(text, figures=1, tables=1)
    assert contents.tables[0] == [["x", "y"], ["1.23457", "<i>"], ["—", "yes"]]
    assert contents.headings == ["a <b> & c"]
    assert '<td class="num">1.23457</td>' in text and '<tr class="muted">' in text


def test_solve_writes_a_self_contained_report_html(cli, tmp_path):
    """Summary, bound, placement, staleness, memory and colocation tables, and the Gantt
    chart inline (the optimum shares both GPUs: its rollout wakes and sleeps)."""
    out = tmp_path / "run"
    instance = os.path.join(ROOT, "instances", "tiny_dpo_2gpu.yaml")
    code, stdout, _ = cli("solve", instance, "--solver", "exhaustive", "--out", out, "--quiet")
    assert code == 0 and "report.html" in stdout
    text = (out / "report.html").read_text()
    # "Against the baselines" (the solve's value lines) comes after the summary.
    contents = assert_self_contained(text, figures=1, tables=7)
    assert contents.headings[1:] == [
        "Summary",
        "Against the baselines",
        "Bound",
        "Placement",
        "Staleness",
        "Where the time goes",
        "Framework settings",
        "Memory per GPU",
        "Colocation",
        "Gantt chart",
    ]
    summary = dict(row for row in contents.tables[0] if len(row) == 2)
    assert summary["status"] == "OPTIMAL" and summary["solver"] == "exhaustive"
    reference = solve("exhaustive", load_problem("tiny_dpo_2gpu.yaml"), SolveOptions(60))
    assert summary["step time (simulated)"] == f"{reference.step_time:.4f} s"
    assert contents.tables[1][0] == ["against", "its step time", "this plan"]
    placement = contents.tables[3]
    assert placement[0][0] == "vertex" and len(placement) > 2
    headers = [table[0] for table in contents.tables]
    memory = contents.tables[headers.index(["GPUs", "peak"])]
    assert memory[1][1].endswith("GB")
    colocation = contents.tables[headers.index(["vertex", "event", "seconds per step"])]
    assert colocation[0] == ["vertex", "event", "seconds per step"]
    assert ["actor.generate", "wake"] in [row[:2] for row in colocation[1:]]


def test_report_html_without_a_plan(cli, tmp_path):
    """An infeasible instance still gets a report: summary and bound, no figure."""
    out = tmp_path / "run"
    instance = os.path.join(ROOT, "instances", "infeasible_70b_2gpu.yaml")
    code, _, _ = cli("solve", instance, "--solver", "greedy", "--out", out, "--quiet")
    assert code == 1
    contents = assert_self_contained((out / "report.html").read_text(), figures=0, tables=2)
    assert "INFEASIBLE" in contents.headings[0]
    assert "Placement" not in contents.headings
    assert parse_report((out / "report.html").read_text()).images == []
