"""Backend ``concurrent``: the cluster partitioned among vertices of equal DAG depth."""

from __future__ import annotations

from rpeg.baselines import concurrent_plan
from rpeg.context import Problem
from solvers.common import baseline_result
from solvers.options import SolveOptions
from solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the concurrency-aware baseline."""
    return baseline_result(problem, "concurrent", concurrent_plan, options.gap)
