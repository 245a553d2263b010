"""Steps shared by the backends: infeasibility screening, bounds, packaging results."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rpeg import stop
from rpeg.candidates import CandidateDirectory
from rpeg.context import Problem
from rpeg.plan import Plan
from rpeg.simulator import Simulator
from solvers.result import Result, Status, verdict


class BuildTimeout(Exception):
    """Building an exact model ran past the solve's deadline."""


class Deadline:
    """The wall-clock moment a solve must end by, checked between (and within) build phases.

    Parameters
    ----------
    seconds
        Seconds from now; ``math.inf`` for no deadline.
    """

    def __init__(self, seconds: float) -> None:
        self.at = time.perf_counter() + seconds
        self.phase = ""

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.perf_counter()

    def check(self, phase: str = "") -> None:
        """Raise :class:`BuildTimeout` naming ``phase`` (or the last one named) once passed.

        A stop request (:mod:`rpeg.stop`) ends the build as the deadline does.
        """
        if phase:
            self.phase = phase
        if time.perf_counter() >= self.at or stop.requested():
            raise BuildTimeout(self.phase)


def unplaceable_result(problem: Problem, solver: str, started: float) -> Result | None:
    """INFEASIBLE without searching when some vertex fits on no block; else None."""
    missing = problem.unplaceable()
    if not missing:
        return None
    name, shortfall = min(missing, key=lambda item: item[1])
    message = problem.unplaceable_reason(name, shortfall)
    others = [n for n, _ in missing if n != name]
    if others:
        message += f" (also fitting nowhere: {', '.join(others)})"
    return Result(
        Status.INFEASIBLE,
        solver,
        k_eval=problem.instance.k_eval,
        wall_time=time.perf_counter() - started,
        message=message,
        # Shortfall in bytes; null when a vertex has no strategy at all (strict JSON).
        stats={"unplaceable": {n: (s if math.isfinite(s) else None) for n, s in missing}},
    )


def plan_result(
    problem: Problem,
    solver: str,
    plan: Plan | None,
    started: float,
    *,
    bound: float | None = None,
    requested_gap: float = 0.0,
    stats: dict | None = None,
    message: str = "",
) -> Result:
    """Simulate ``plan`` and package it with its verdict.

    Parameters
    ----------
    problem
        The instance.
    solver
        Backend name.
    plan
        The plan to report (None: UNKNOWN, no plan found).
    started
        ``time.perf_counter()`` at the start of the solve (for the wall time).
    bound
        A proven lower bound on the makespan (s) from the backend; the result's
        bound is the larger of it and the plan-independent bounds, and at most
        the plan's makespan.
    requested_gap
        The gap the user allowed (``--gap``).
    stats, message
        Backend statistics and a one-line note.

    Returns
    -------
    Result
        For a plan that fits in memory, the status is
        :func:`solvers.result.verdict` of its simulated makespan and the
        bound: the one rule, whatever the backend.
    """
    stats = dict(stats or {})
    best_bound = problem.bounds.best
    if bound is not None:
        best_bound = max(best_bound, bound)
    k_eval = problem.instance.k_eval
    if plan is None:
        return Result(
            Status.UNKNOWN,
            solver,
            k_eval=k_eval,
            bound=best_bound,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message=message or "no plan found within the limits",
            requested_gap=requested_gap,
        )
    trace = problem.simulator.simulate(plan)
    if not trace.feasible:
        return Result(
            Status.ERROR,
            solver,
            plan=plan,
            makespan=trace.makespan,
            k_eval=k_eval,
            bound=best_bound,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message=(
                f"the plan overflows memory by {trace.violation_bytes / 1e9:.3f} GB in simulation"
            ),
            requested_gap=requested_gap,
        )
    makespan = trace.makespan
    # A valid bound never exceeds a feasible plan's makespan; a solver's float
    # tolerance can put it a hair above.
    best_bound = min(best_bound, makespan)
    return Result(
        verdict(makespan, best_bound, requested_gap),
        solver,
        plan=plan,
        makespan=makespan,
        k_eval=k_eval,
        bound=best_bound,
        wall_time=time.perf_counter() - started,
        stats=stats,
        message=message,
        requested_gap=requested_gap,
    )


def baseline_result(
    problem: Problem,
    solver: str,
    build: Callable[[CandidateDirectory, Simulator], Plan | None],
    requested_gap: float = 0.0,
) -> Result:
    """Screen for unplaceable vertices, build a baseline plan and simulate it."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, solver, started)
    if infeasible is not None:
        return infeasible
    plan = build(problem.directory, problem.simulator)
    return plan_result(problem, solver, plan, started, requested_gap=requested_gap)
