"""Backend ``greedy``: fastest feasible strategy per vertex on the whole cluster."""

from __future__ import annotations

from rpeg.baselines import greedy_plan
from rpeg.context import Problem
from solvers.common import baseline_result
from solvers.options import SolveOptions
from solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the greedy baseline."""
    return baseline_result(problem, "greedy", greedy_plan, options.gap)
