"""What every command shares: exit codes, option checks, loading an instance, run folders."""

from __future__ import annotations

import math
import os
import sys
import time

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.engine import framework_name
from rlplan.rpeg.schema.solver_options import COMMAND_LINE, check_option

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_NO_PLAN = 0, 1, 2, 3


def gigabytes(value: float) -> str:
    """``value`` bytes as ``"12.34 GB"``."""
    return f"{value / 1e9:.2f} GB"


def check_count(value: float | None, option: str, low: float, high: float) -> None:
    """Refuse, before any work, a count option that is not in ``[low, high]``.

    For the options that are not solve options (``--workers``, ``--repeats``,
    ``--evaluations``); the solve options follow their rules
    (:func:`check_solve_flag`).

    Parameters
    ----------
    value
        The value given (None: not given, nothing to check).
    option
        The option's name, for the error line.
    low, high
        The accepted range (inclusive).
    """
    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        span = " to ".join(str(int(x)) if float(x).is_integer() else f"{x:g}" for x in (low, high))
        raise InputError(option, f"must be a whole number from {span}, got {value}")


def check_solve_flag(name: str, value: float | None) -> None:
    """Refuse, before any work, a solve option's flag (``--time-limit``, ``--seed``) out of rule.

    Parameters
    ----------
    name
        The option's rule (:data:`~rlplan.rpeg.schema.solver_options.OPTION_RULES`).
    value
        The flag's value (None: not given, nothing to check).
    """
    if value is not None:
        check_option(name, value, COMMAND_LINE)


def load_problem(path: str, framework: str | None = None) -> Problem:
    """The problem of the instance file ``path``; its warnings go to stderr.

    ``framework`` (``--framework``) replaces the instance's ``engine.framework``.
    """
    if framework is not None:
        framework_name(framework, "--framework")  # a bad flag costs no loading time
    problem = Problem.load(path)
    for warning in problem.instance.warnings:
        print(warning, file=sys.stderr)
    if framework is not None:
        problem = problem.with_framework(framework, "--framework")
    return problem


def report_unplaceable(problem: Problem) -> bool:
    """Print an INFEASIBLE line per vertex that fits nowhere; whether there was one."""
    missing = problem.unplaceable()
    for name, shortfall in missing:
        print(f"INFEASIBLE: {problem.unplaceable_reason(name, shortfall)}")
    return bool(missing)


def default_out(name: str) -> str:
    """The default output folder ``runs/<name>-<time>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{name}-{stamp}")


def default_workers(workers: int | None) -> int:
    """``--workers``, or half the cores (at least 1)."""
    return workers if workers is not None else max(1, (os.cpu_count() or 1) // 2)
