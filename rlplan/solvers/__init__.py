"""Solver backends. Each module exposes ``solve(problem, options) -> Result``."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

#: Backend name -> module implementing it.
BACKENDS: dict[str, str] = {
    "greedy": "rlplan.solvers.greedy",
    "concurrent": "rlplan.solvers.concurrent",
    "split": "rlplan.solvers.split",
    "local": "rlplan.solvers.local",
    "exhaustive": "rlplan.solvers.exhaustive",
    "cpsat": "rlplan.solvers.cpsat",
    "auto": "rlplan.solvers.auto",
    "milp": "rlplan.solvers.milp",
    "default": "rlplan.solvers.framework_default",
}


def get_solver(name: str) -> Callable[[Problem, SolveOptions], Result]:
    """The ``solve`` function of backend ``name``.

    Raises
    ------
    InputError
        For an unknown backend name.
    """
    if name.startswith("milp:"):
        engine = name.split(":", 1)[1]
        if not engine:
            raise InputError("--solver", "milp:NAME needs a solver name, e.g. milp:cbc")
        # Backends load by name from BACKENDS, so that a command imports only the one it runs.
        milp = importlib.import_module(BACKENDS["milp"])
        milp.check_engine(engine)
        return functools.partial(milp.solve, engine=engine)
    if name.startswith("default:"):
        framework = importlib.import_module(BACKENDS["default"])
        framework.check_framework(name.split(":", 1)[1])
        return functools.partial(framework.solve, framework=name.split(":", 1)[1])
    module = None if name == "default" else BACKENDS.get(name)
    if module is None:
        known = ", ".join(key for key in BACKENDS if key != "default")
        raise InputError(
            "--solver",
            f"unknown solver {name!r} (available: {known}, milp:NAME, default:FRAMEWORK)",
        )
    return importlib.import_module(module).solve


def solve(name: str, problem: Problem, options: SolveOptions) -> Result:
    """Run backend ``name`` on ``problem``."""
    return get_solver(name)(problem, options)


__all__ = ["BACKENDS", "Result", "SolveOptions", "Status", "get_solver", "solve"]
