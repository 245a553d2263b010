"""Backend ``greedy``: fastest feasible strategy per vertex on the whole cluster."""

from __future__ import annotations

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.baselines import greedy_plan
from rlplan.solvers.common import baseline_result
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the greedy baseline."""
    return baseline_result(problem, "greedy", greedy_plan, options.gap)
