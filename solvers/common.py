"""Steps shared by the backends: infeasibility screening, bounds, packaging results."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rpeg.candidates import CandidateDirectory
from rpeg.context import Problem
from rpeg.plan import Plan
from rpeg.simulator import Simulator
from solvers.result import Result, Status


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
    proven_optimal: bool = False,
    stats: dict | None = None,
    message: str = "",
) -> Result:
    """Simulate ``plan`` and package it; the bound is at least the plan-independent bounds."""
    stats = dict(stats or {})
    best_bound = problem.bounds.best
    if bound is not None:
        best_bound = max(best_bound, bound)
    if plan is None:
        return Result(
            Status.UNKNOWN,
            solver,
            k_eval=problem.instance.k_eval,
            bound=best_bound,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message=message or "no plan found within the limits",
        )
    trace = problem.simulator.simulate(plan)
    if not trace.feasible:
        return Result(
            Status.ERROR,
            solver,
            plan=plan,
            makespan=trace.makespan,
            k_eval=problem.instance.k_eval,
            bound=best_bound,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message=(
                f"the plan overflows memory by {trace.violation_bytes / 1e9:.3f} GB in simulation"
            ),
        )
    makespan = trace.makespan
    if best_bound > makespan:
        best_bound = makespan if proven_optimal else best_bound
    status = Status.OPTIMAL if proven_optimal else Status.FEASIBLE
    return Result(
        status,
        solver,
        plan=plan,
        makespan=makespan,
        k_eval=problem.instance.k_eval,
        bound=best_bound,
        wall_time=time.perf_counter() - started,
        stats=stats,
        message=message,
    )


def baseline_result(
    problem: Problem, solver: str, build: Callable[[CandidateDirectory, Simulator], Plan | None]
) -> Result:
    """Screen for unplaceable vertices, build a baseline plan and simulate it."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, solver, started)
    if infeasible is not None:
        return infeasible
    return plan_result(problem, solver, build(problem.directory, problem.simulator), started)
