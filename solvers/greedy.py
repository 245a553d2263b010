"""Backend ``greedy``: fastest feasible strategy per vertex on the whole cluster."""

from __future__ import annotations

import time

from rpeg.baselines import greedy_plan
from rpeg.context import Problem
from solvers.common import plan_result, unplaceable_result
from solvers.options import SolveOptions
from solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the greedy baseline."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "greedy", started)
    if infeasible is not None:
        return infeasible
    plan = greedy_plan(problem.directory, problem.simulator)
    return plan_result(problem, "greedy", plan, started)
