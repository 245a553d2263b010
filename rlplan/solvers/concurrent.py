"""Backend ``concurrent``: the cluster partitioned among vertices of equal DAG depth.

On a cluster of GPU pools each depth group may also get one pool
(:func:`rlplan.rpeg.search.baselines.concurrent_plan`).
"""

from __future__ import annotations

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import concurrent_plan
from rlplan.solvers.common import baseline_result
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the concurrency-aware baseline."""
    return baseline_result(problem, "concurrent", concurrent_plan, options.gap)
