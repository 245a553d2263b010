"""The "Where the time goes" section of report.md and report.html.

Per vertex of the plan, one run's time by part: the parts come from the cost
model and sum to the vertex's run time; only parts non-zero in some vertex get
a column; the HTML draws one stacked bar per vertex as inline SVG.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlplan.outputs.report_html import render_html_report
from rlplan.outputs.report_md import render_report
from rlplan.outputs.time_parts_section import (
    PART_LABELS,
    TimePartsSection,
    VertexParts,
    stacked_bars_svg,
    summary_words,
    time_parts_section,
    vertex_time_parts,
)
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import greedy_plan
from rlplan.rpeg.templates import Kind, Vertex
from rlplan.solvers.common import plan_result
from tests.htmlcheck import assert_self_contained

ROOT = Path(__file__).resolve().parents[2]
#: Bar length of the SVG chart in pixels (time_parts_section._BAR_W).
BAR = 560


@pytest.fixture(scope="module")
def dense_report():
    """The greedy plan of the shipped dense GRPO instance, rendered both ways."""
    problem = Problem.load(str(ROOT / "instances" / "tiny_grpo_2gpu.yaml"))
    plan = greedy_plan(problem.directory, problem.simulator)
    result = plan_result(problem, "greedy", plan, time.perf_counter())
    trace = problem.simulator.simulate(plan)
    md = render_report(problem, result, trace)
    html = render_html_report(problem, result, trace)
    return problem, plan, md, html


def md_table(report: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the section's table in report.md."""
    lines = report.splitlines()
    start = lines.index("## Where the time goes")
    table = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("| "):
            table.append([cell.strip() for cell in line.strip("|").split("|")])
    return table[0], table[1:]


def seconds(cell: str) -> float:
    """``0.1114 s (1.3 %)`` -> 0.1114; ``—`` -> 0."""
    return 0.0 if cell == "—" else float(re.match(r"(-?[\d.]+) s", cell).group(1))


def test_md_parts_sum_to_each_vertex_run_time(dense_report):
    """Every vertex's row: parts (4 decimals) add up to its run time, shares to 100 %.

    E.g. the greedy rollout of tiny_grpo_2gpu at the time of writing:
    prefill 0.1114 + memory-bound decode 6.2548 + decode overhead 2.0480
    = 8.4142 s, its run time; the shares 1.3 + 74.3 + 24.3 = 99.9 %.
    """
    problem, plan, md, _ = dense_report
    header, rows = md_table(md)
    assert header[:2] == ["vertex", "run time"]
    names = [vertex.name for vertex in problem.directory.for_plan(plan).template.vertices]
    assert [row[0] for row in rows] == names
    for row in rows:
        parts = [seconds(cell) for cell in row[2:]]
        # each shown value is off by at most half a unit of its last digit
        assert sum(parts) == pytest.approx(seconds(row[1]), abs=0.5e-4 * (len(parts) + 1))
        shares = [float(re.search(r"\(([\d.]+) %\)", c).group(1)) for c in row[2:] if c != "—"]
        assert sum(shares) == pytest.approx(100.0, abs=0.05 * len(shares) + 1e-9)


def test_parts_are_the_cost_models_and_sum_to_the_run_time(dense_report):
    """Unrounded: each vertex's parts sum to its candidate's run time within 1e-9
    relative; the rollout's are ``rollout_time_parts`` at its group levels."""
    problem, plan, _, _ = dense_report
    section = time_parts_section(problem, plan)
    directory = problem.directory.for_plan(plan)
    for vertex, placement, row in zip(
        directory.template.vertices, plan.placements, section.rows, strict=True
    ):
        assert sum(row.parts.values()) == pytest.approx(row.run, rel=1e-9)
        if vertex.kind is Kind.GENERATE:
            strategy, shape = placement.strategy, placement.block.extent
            levels = directory.cluster.group_levels(
                shape, strategy.dp, strategy.pp, strategy.tp, strategy.cp, strategy.ep, strategy.etp
            )
            expected = directory.cost.rollout_time_parts(vertex.model, strategy, levels)
            shown = {key: value for key, value in row.parts.items() if key in expected}
            assert shown == expected
            assert row.parts["decode_memory_bound"] > 0


def test_only_parts_non_zero_somewhere_get_a_column(dense_report):
    """A column per part that some vertex has, none for parts every vertex lacks (the
    dense rollout of tiny_grpo_2gpu is memory-bound throughout: no compute-bound
    decode column, no all-to-all without experts)."""
    problem, plan, md, _ = dense_report
    section = time_parts_section(problem, plan)
    used = {key for row in section.rows for key, value in row.parts.items() if value != 0}
    assert set(section.columns) == used
    header, _ = md_table(md)
    labels = [PART_LABELS.get(key, key) for key in section.columns]
    assert header[2:] == labels
    assert "all-to-all" not in header and "decode (compute-bound)" not in header
    assert "decode (memory-bound)" in header


def test_html_has_the_table_and_one_stacked_bar_per_vertex(dense_report):
    """The same table as report.md; per vertex one bar whose segments span the full
    bar length (shares of the run), one segment per non-zero part, each with a tooltip."""
    _, _, md, html = dense_report
    contents = assert_self_contained(html, figures=0, tables=6)
    assert "Where the time goes" in contents.headings
    header, rows = md_table(md)
    table = next(t for t in contents.tables if t[0][:2] == ["vertex", "run time"])
    assert table == [header, *rows]
    svg = re.search(r"<svg.*?</svg>", html, re.S).group(0)
    segments = re.findall(r'<rect x="([\d.]+)" y="(\d+)" width="([\d.]+)"[^>]*><title>', svg)
    by_row: dict[str, float] = {}
    for _, y, width in segments:
        by_row[y] = by_row.get(y, 0.0) + float(width)
    assert len(by_row) == len(rows)
    assert all(total == pytest.approx(BAR, abs=0.01 * len(segments)) for total in by_row.values())
    assert len(segments) == sum(cell != "—" for row in rows for cell in row[2:])


def test_summary_in_words_names_the_largest_parts_first():
    """62 % experts, 18 % all-to-all, 9 % attention, 6 % non-GEMM, 5 % DP comm; the
    0.5 % head is below the 1 % cut."""
    row = VertexParts(
        "actor.train",
        10.0,
        {"attention": 0.9, "experts": 6.2, "all_to_all": 1.8, "head": 0.05,
         "non_gemm": 0.55, "dp_comm": 0.5},
    )  # fmt: skip
    assert summary_words(row) == (
        "actor.train: 62 % experts, 18 % all-to-all, 9 % attention, 6 % non-GEMM, 5 % DP comm"
    )


def test_svg_escapes_names_and_references_nothing():
    """A vertex name with markup is escaped in labels and tooltips; no address, not
    even the SVG namespace (inline SVG in HTML needs none)."""
    section = TimePartsSection(("prefill",), (VertexParts("<b>&", 2.0, {"prefill": 2.0}),))
    svg = stacked_bars_svg(section)
    assert "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    assert "http" not in svg


def _vertex(kind: Kind) -> Vertex:
    return Vertex("actor", kind)


def test_adapter_uses_time_parts_when_the_cost_model_has_it():
    cost = SimpleNamespace(time_parts=lambda vertex, shape, strategy: {"experts": 1.5})
    assert vertex_time_parts(cost, _vertex(Kind.TRAIN), (1, 1, 2), None) == {"experts": 1.5}


def test_adapter_without_time_parts():
    """A rollout's parts and the rest of its run as colocation (10 - 3 - 5 = 2 s);
    any other vertex one part ``run``."""
    strategy = SimpleNamespace(dp=1, pp=1, tp=2, cp=1, ep=1, etp=1)
    cost = SimpleNamespace(
        run_time=lambda vertex, shape, strategy: 10.0,
        cluster=SimpleNamespace(group_levels=lambda *args: ("g",) * 5),
        rollout_time_parts=lambda model, strategy, levels: {"prefill": 3.0, "decode_overhead": 5.0},
    )
    parts = vertex_time_parts(cost, _vertex(Kind.GENERATE), (1, 1, 2), strategy)
    assert parts == {"prefill": 3.0, "decode_overhead": 5.0, "colocation": 2.0}
    assert vertex_time_parts(cost, _vertex(Kind.INFER), (1, 1, 2), strategy) == {"run": 10.0}
