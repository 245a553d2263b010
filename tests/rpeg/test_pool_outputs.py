"""Outputs grouped by GPU pool (docs/outputs.md#gpu-pools), and one-pool outputs unchanged.

The two-pool instance (tests/data/tiny_two_pools_grpo.yaml) is solved to its
optimum, the rollout on pool ``wide`` and the training on pool ``fast``
(tests/solvers/test_pools_exact.py). The one-pool files under
tests/data/one_pool_outputs/ were written for instances/tiny_grpo_2gpu.yaml
and its greedy plan before outputs knew of pools; the one-pool outputs must
still be those.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

from rlplan.cli.evaluate import gpu_memory_lines
from rlplan.outputs.gantt import POOL_BOUNDARY, POOL_LABEL, gantt_figure
from rlplan.outputs.perfetto import perfetto_trace
from rlplan.outputs.report_html import render_html_report
from rlplan.outputs.report_md import render_report
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import greedy_plan
from rlplan.solvers import exhaustive
from rlplan.solvers.common import plan_result
from rlplan.solvers.options import SolveOptions
from tests.htmlcheck import parse_report
from tests.rpeg.test_perfetto import check_trace_events

REPO = Path(__file__).resolve().parents[2]
TWO_POOLS = REPO / "tests" / "data" / "tiny_two_pools_grpo.yaml"
ONE_POOL = REPO / "instances" / "tiny_grpo_2gpu.yaml"
GOLDEN = REPO / "tests" / "data" / "one_pool_outputs"


@functools.cache
def two_pools():
    """The two-pool problem, its optimal result and the trace of its plan."""
    problem = Problem.load(str(TWO_POOLS))
    result = exhaustive.solve(problem, SolveOptions(time_limit=60, threads=1, seed=0))
    return problem, result, problem.simulator.simulate(result.plan)


@functools.cache
def one_pool():
    """The one-pool problem, the result of its greedy plan and its trace."""
    problem = Problem.load(str(ONE_POOL))
    plan = greedy_plan(problem.directory, problem.simulator)
    result = plan_result(problem, "greedy", plan, time.perf_counter())
    return problem, result, problem.simulator.simulate(plan)


def section(text: str, heading: str) -> str:
    """From ``heading`` to the next level-2 heading (or the end)."""
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start : end + 1 if end >= 0 else len(text)]


def test_two_pool_report_md_names_both_pools_and_groups_rows():
    problem, result, trace = two_pools()
    placement = section(render_report(problem, result, trace), "## Placement")
    assert "| fast | gpus 0-1 | 1 x 1 x 2 = 2 GPUs | 400 TFLOP/s, 24 GB | 2 per GPU-hour |" in (
        placement
    )
    assert "| wide | gpus 2-3 | 1 x 1 x 2 = 2 GPUs | 100 TFLOP/s, 24 GB | 1 per GPU-hour |" in (
        placement
    )
    rows = [line for line in placement.splitlines() if line.startswith("| ") and "origin" in line]
    # The template puts actor.generate first; grouped by pool, fast's training comes first.
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| fast", "actor.train"],
        ["| wide", "actor.generate"],
    ]
    assert "| — | reward.rule | none (CPU) |" in placement


def test_two_pool_report_md_memory_section_is_per_pool():
    problem, result, trace = two_pools()
    memory = section(render_report(problem, result, trace), "## Memory per GPU")
    fast, wide = memory.split("### Pool wide")
    assert "### Pool fast" in fast and "| GPUs 0-1 | 0.36 GB |" in fast
    assert "peak 0.36 GB" in fast and "| GPUs 2-3" not in fast
    assert "peak 12.00 GB" in wide and "| GPUs 2-3 | 12.00 GB |" in wide


def test_two_pool_report_html_has_pool_column_and_memory_per_pool():
    problem, result, trace = two_pools()
    contents = parse_report(render_html_report(problem, result, trace))
    pools = next(table for table in contents.tables if table[0][:2] == ["pool", "GPUs"])
    assert [row[0] for row in pools[1:]] == ["fast", "wide"]
    assert pools[1][-1] == "2 per GPU-hour"
    placement = next(table for table in contents.tables if table[0][:2] == ["pool", "vertex"])
    assert [row[:2] for row in placement[1:3]] == [
        ["fast", "actor.train"],
        ["wide", "actor.generate"],
    ]
    assert "Pool fast" in contents.headings and "Pool wide" in contents.headings


def test_two_pool_summary_prints_a_memory_line_per_pool():
    problem, _, trace = two_pools()
    assert gpu_memory_lines(trace, problem) == [
        "memory       pool fast: peak 0.36 GB of 22.80 GB per GPU",
        "memory       pool wide: peak 12.00 GB of 22.80 GB per GPU",
    ]


def test_two_pool_perfetto_names_each_pool():
    problem, _, trace = two_pools()
    instance = problem.instance
    document = perfetto_trace(trace, instance.layout_hardware, pools=instance.pools)
    assert check_trace_events(document) == []
    names = {
        event["pid"]: event["args"]["name"]
        for event in document["traceEvents"]
        if event["name"] == "process_name"
    }
    runs = {
        event["name"]: names[event["pid"]]
        for event in document["traceEvents"]
        if event.get("cat") == "run"
    }
    assert runs == {
        "actor.train": "pool fast rack 0 node 0",
        "actor.generate": "pool wide rack 0 node 0",
    }
    assert document["otherData"]["pools"] == {"fast": "0-1", "wide": "2-3"}
    blocks = perfetto_trace(trace, instance.layout_hardware, pools=instance.pools, max_gpu_tracks=1)
    assert check_trace_events(blocks) == []
    processes = [e["args"]["name"] for e in blocks["traceEvents"] if e["name"] == "process_name"]
    assert processes[:2] == ["pool fast blocks (2 GPUs)", "pool wide blocks (2 GPUs)"]


def test_two_pool_gantt_draws_and_labels_pool_boundaries():
    problem, _, trace = two_pools()
    instance = problem.instance
    figure = gantt_figure(trace, instance.layout_hardware, pools=instance.pools)
    axes = figure.axes[0]
    lines = [line for line in axes.get_lines() if line.get_gid() == POOL_BOUNDARY]
    assert [line.get_ydata()[0] for line in lines] == [2]
    labels = [text.get_text() for text in axes.texts if text.get_gid() == POOL_LABEL]
    assert labels == ["pool fast", "pool wide"]
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "pool boundary" in legend


def test_one_pool_report_is_unchanged():
    problem, result, trace = one_pool()
    report = render_report(problem, result, trace)
    golden = (GOLDEN / "tiny_grpo_2gpu.report.md").read_text()
    assert section(report, "## Placement") + "\n" + section(report, "## Memory per GPU") == golden
    assert "| pool |" not in report and "### Pool" not in report
    contents = parse_report(render_html_report(problem, result, trace))
    assert all(table[0][0] != "pool" for table in contents.tables)
    assert not any(heading.startswith("Pool ") for heading in contents.headings)


def test_one_pool_trace_gantt_and_summary_are_unchanged():
    problem, _, trace = one_pool()
    instance = problem.instance
    document = perfetto_trace(
        trace, instance.layout_hardware, instance_name=instance.name, pools=instance.pools
    )
    golden = json.loads((GOLDEN / "tiny_grpo_2gpu.perfetto-tracks.json").read_text())
    metadata = [event for event in document["traceEvents"] if event["ph"] == "M"]
    assert {"metadata": metadata, "otherData": document["otherData"]} == golden
    figure = gantt_figure(trace, instance.layout_hardware, pools=instance.pools)
    gids = {artist.get_gid() for artist in figure.axes[0].get_children()}
    assert POOL_BOUNDARY not in gids and POOL_LABEL not in gids
    line = (GOLDEN / "tiny_grpo_2gpu.memory-line.txt").read_text().rstrip("\n")
    assert gpu_memory_lines(trace, problem) == [line]
