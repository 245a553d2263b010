"""Backend ``split``: generation on one block, everything else on a disjoint block.

Blocks sized by the two sides' work (:mod:`rlplan.rpeg.search.split`).
"""

from __future__ import annotations

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.split import split_plan
from rlplan.solvers.common import baseline_result
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Build and simulate the split-placement baseline."""
    return baseline_result(problem, "split", split_plan, options.gap)
