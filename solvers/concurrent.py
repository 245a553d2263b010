"""Backend ``concurrent``: the cluster partitioned among vertices of equal DAG depth."""

from __future__ import annotations

import time

from rpeg.baselines import concurrent_plan
from rpeg.context import Problem
from solvers.common import plan_result, unplaceable_result
from solvers.options import SolveOptions
from solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the concurrency-aware baseline."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "concurrent", started)
    if infeasible is not None:
        return infeasible
    plan = concurrent_plan(problem.directory, problem.simulator)
    return plan_result(problem, "concurrent", plan, started)
