"""Solver backends. Each module exposes ``solve(problem, options) -> Result``."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from rpeg.context import Problem
from rpeg.errors import InputError
from solvers.options import SolveOptions
from solvers.result import Result, Status

#: Backend name -> module implementing it.
BACKENDS: dict[str, str] = {
    "greedy": "solvers.greedy",
    "concurrent": "solvers.concurrent",
    "local": "solvers.local",
    "exhaustive": "solvers.exhaustive",
    "cpsat": "solvers.cpsat",
    "auto": "solvers.auto",
}


def get_solver(name: str) -> Callable[[Problem, SolveOptions], Result]:
    """The ``solve`` function of backend ``name``.

    Raises
    ------
    InputError
        For an unknown backend name.
    """
    module = BACKENDS.get(name)
    if module is None:
        raise InputError("--solver", f"unknown solver {name!r} (available: {', '.join(BACKENDS)})")
    return importlib.import_module(module).solve


def solve(name: str, problem: Problem, options: SolveOptions) -> Result:
    """Run backend ``name`` on ``problem``."""
    return get_solver(name)(problem, options)


__all__ = ["BACKENDS", "Result", "SolveOptions", "Status", "get_solver", "solve"]
