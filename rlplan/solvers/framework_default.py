"""Backend ``default:FRAMEWORK``: the plan a framework's documented defaults give.

Built in the framework's plan space whatever ``engine.framework`` says
(:mod:`rlplan.rpeg.search.framework_defaults`), simulated on the problem.
"""

from __future__ import annotations

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.engine import FRAMEWORK_NAMES
from rlplan.rpeg.search.framework_defaults import DEFAULT_PLANS
from rlplan.solvers.common import baseline_result
from rlplan.solvers.framework_gap import unsupported_result
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result


def check_framework(name: str) -> None:
    """Refuse an unknown framework name (``--solver default:NAME``)."""
    if name not in DEFAULT_PLANS:
        raise InputError(
            "--solver",
            f"default:NAME needs a framework ({', '.join(FRAMEWORK_NAMES)}), not {name!r}",
        )


def solve(problem: Problem, options: SolveOptions, framework: str) -> Result:
    """Build and simulate ``framework``'s default plan, in its plan space."""
    inside = problem.with_framework(framework)
    refused = unsupported_result(inside, f"default:{framework}")
    if refused is not None:
        return refused
    return baseline_result(inside, f"default:{framework}", DEFAULT_PLANS[framework], options.gap)
