"""report.md: a one-line summary first, identical per-GPU memory rows merged into GPU ranges."""

from __future__ import annotations

import os
import time

import pytest

from rlplan.outputs.report_md import memory_rows, render_report
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import greedy_plan
from rlplan.solvers.common import plan_result
from rlplan.solvers.result import Result, Status
from tests.solvers.conftest import ROOT


def _problem(name: str) -> Problem:
    return Problem.load(os.path.join(ROOT, "instances", name))


def test_memory_rows_merge_runs_of_equal_peaks():
    peaks = [61.2e9] * 128 + [3.1e9] + [61.2e9] * 2 + [0.0]
    assert memory_rows(peaks) == [
        "| GPUs 0-127 | 61.20 GB |",
        "| GPU 128 | 3.10 GB |",
        "| GPUs 129-130 | 61.20 GB |",
        "| GPU 131 | 0.00 GB |",
    ]
    # equal as shown (two decimals) is equal
    assert memory_rows([1.001e9, 1.004e9]) == ["| GPUs 0-1 | 1.00 GB |"]
    assert memory_rows([]) == []


@pytest.fixture(scope="module")
def large_report() -> tuple[Problem, Result, str]:
    """The greedy plan of the 256-GPU instance, rendered."""
    problem = _problem("ppo_70b_4x8x8_h100.yaml")
    plan = greedy_plan(problem.directory, problem.simulator)
    result = plan_result(problem, "greedy", plan, time.perf_counter())
    trace = problem.simulator.simulate(plan)
    return problem, result, render_report(problem, result, trace)


def test_report_starts_with_a_one_line_summary(large_report):
    problem, result, report = large_report
    first = report.splitlines()[0]
    k_eval = problem.instance.k_eval
    assert first.startswith(f"# ppo_70b_4x8x8_h100 — {result.status.value}: ")
    assert f"step time {result.step_time:.4f} s" in first
    assert f"bound {result.bound / k_eval:.4f} s/step" in first
    assert f"gap {result.gap:.4%}" in first
    assert "256 GPUs" in first


def test_256_gpu_report_memory_table_is_short(large_report):
    problem, _, report = large_report
    lines = report.splitlines()
    table = lines[lines.index("## Memory per GPU") :]
    rows = [line for line in table if line.startswith("| GPU")]
    assert rows[0] == "| GPUs | peak |"
    assert 1 < len(rows) <= 20  # one row per run of equal peaks, not 256
    # the ranges cover every GPU once, in order
    covered = []
    for row in rows[1:]:
        gpus = row.split("|")[1].split()[1]
        low, _, high = gpus.partition("-")
        covered += range(int(low), int(high or low) + 1)
    assert covered == list(range(problem.instance.hardware.num_gpus))
    # 124 lines with "Where the time goes" (two per vertex); 256 memory rows would pass 140
    assert len(lines) < 140


def test_summary_line_without_a_plan():
    problem = _problem("tiny_ppo_2gpu.yaml")
    result = Result(Status.UNKNOWN, "cpsat", k_eval=problem.instance.k_eval, bound=10.0)
    first = render_report(problem, result, None).splitlines()[0]
    assert first == "# tiny_ppo_2gpu — UNKNOWN: no plan, bound 5.0000 s/step, 2 GPUs (cpsat)"
