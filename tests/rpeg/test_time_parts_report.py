"""The "Where the time goes" section of report.md and report.html.

Per vertex of the plan, one run's time by part: the parts come from the cost
model and sum to the vertex's run time; only parts non-zero in some vertex get
a column; the HTML draws one stacked bar per vertex as inline SVG.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from rlplan.outputs.report_html import render_html_report
from rlplan.outputs.report_md import render_report
from rlplan.outputs.time_parts_section import (
    PART_LABELS,
    TimePartsSection,
    VertexParts,
    stacked_bars_svg,
    summary_words,
    time_parts_section,
)
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import greedy_plan
from rlplan.solvers.common import plan_result
from tests.htmlcheck import assert_self_contained

ROOT = Path(__file__).resolve().parents[2]
#: Bar length of the SVG chart in pixels (time_parts_section._BAR_W).
BAR = 560


def rendered(path: Path):
    """The greedy plan of an instance, rendered both ways."""
    problem = Problem.load(str(path))
    plan = greedy_plan(problem.directory, problem.simulator)
    result = plan_result(problem, "greedy", plan, time.perf_counter())
    trace = problem.simulator.simulate(plan)
    md = render_report(problem, result, trace)
    html = render_html_report(problem, result, trace)
    return problem, plan, md, html


@pytest.fixture(scope="module")
def dense_report():
    """The shipped dense GRPO instance tiny_grpo_2gpu."""
    return rendered(ROOT / "instances" / "tiny_grpo_2gpu.yaml")


@pytest.fixture(scope="module")
def moe_report(tmp_path_factory):
    """tiny_grpo_2gpu with a 4-expert top-2 actor (experts of width 64) whose experts
    are split over both GPUs (expert_parallel 2, every vertex on both GPUs)."""
    document = yaml.safe_load((ROOT / "instances" / "tiny_grpo_2gpu.yaml").read_text())
    document["models"]["actor"].update(experts=4, experts_per_token=2, expert_ffn_dim=64)
    document["placement"].update(min_block_gpus=2, expert_parallel=[2])
    path = tmp_path_factory.mktemp("moe") / "tiny_moe_grpo_2gpu.yaml"
    path.write_text(yaml.safe_dump(document))
    return rendered(path)


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
    """``0.1114 s (1.3 %)`` -> 0.1114; ``3.21e-05 s (< 0.1 %)`` -> 3.21e-05; ``—`` -> 0."""
    return 0.0 if cell == "—" else float(re.match(r"(\S+) s\b", cell).group(1))


@pytest.mark.parametrize("which", ["dense_report", "moe_report"])
def test_md_parts_sum_to_each_vertex_run_time(which, request):
    """Every vertex's row: its parts as shown add up to its run time, its shares to 100 %.

    E.g. the greedy plan of tiny_grpo_2gpu at the time of writing: actor.train
    attention 0.0524 + dense FFN 0.3239 + head 0.0654 + non-GEMM 0.3092 + TP comm
    0.1870 = 0.9379 s against a run of 0.9380 s (each cell off by at most 0.5e-4);
    the rollout's prefill 0.1114 + memory-bound decode 6.2548 + decode overhead
    2.0480 = 8.4142 s.
    """
    problem, plan, md, _ = request.getfixturevalue(which)
    header, rows = md_table(md)
    assert header[:2] == ["vertex", "run time"]
    names = [vertex.name for vertex in problem.directory.for_plan(plan).template.vertices]
    assert [row[0] for row in rows] == names
    for row in rows:
        parts = [seconds(cell) for cell in row[2:]]
        assert sum(parts) == pytest.approx(seconds(row[1]), abs=0.5e-4 * (len(parts) + 1))
        shares = [float(m.group(1)) for c in row[2:] if (m := re.search(r"\(([\d.]+) %\)", c))]
        assert sum(shares) == pytest.approx(100.0, abs=0.05 * len(row) + 1e-9)


@pytest.mark.parametrize("which", ["dense_report", "moe_report"])
def test_parts_are_the_cost_models_and_sum_to_the_run_time(which, request):
    """Each row holds ``CostModel.time_parts`` of its vertex as placed, and the
    candidate's run time (the placement table's); unrounded, the parts sum to it
    within 1e-9 relative."""
    problem, plan, _, _ = request.getfixturevalue(which)
    section = time_parts_section(problem, plan)
    directory = problem.directory.for_plan(plan)
    for index, (vertex, placement, row) in enumerate(
        zip(directory.template.vertices, plan.placements, section.rows, strict=True)
    ):
        shape, strategy = placement.block.extent, placement.strategy
        assert row.parts == directory.cost.time_parts(vertex, shape, strategy)
        assert row.run == directory.candidate(index, shape, strategy).time
        assert sum(row.parts.values()) == pytest.approx(row.run, rel=1e-9)


def test_moe_vertices_show_experts_and_all_to_all(moe_report):
    """With ep 2 the actor's train, infer and rollout runs pay an all-to-all and the
    train run routed-expert GEMMs; the dense reward model has neither."""
    problem, plan, md, _ = moe_report
    section = time_parts_section(problem, plan)
    rows = {row.vertex: row for row in section.rows}
    assert {"experts", "all_to_all"} <= set(section.columns)
    assert rows["actor.train"].parts["experts"] > 0
    for name in ("actor.train", "actor.generate"):
        assert rows[name].parts["all_to_all"] > 0
    assert rows["reward.infer"].parts.get("experts", 0) == 0
    assert rows["reward.infer"].parts.get("all_to_all", 0) == 0
    header, table = md_table(md)
    reward = next(row for row in table if row[0] == "reward.infer")
    assert reward[header.index("all-to-all")] == "—"
    assert "all-to-all" in next(
        line for line in md.splitlines() if line.startswith("- actor.train")
    )


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
