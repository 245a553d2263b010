"""Backend ``auto`` (the default): the portfolio of the specification.

greedy → local search (short) → CP-SAT warm-started from the local plan →
simulator check → local refinement of the best plan → one result with the
best simulated plan and the best bound any part proved, its status given by
the one rule (:func:`solvers.result.verdict`). When CP-SAT errors or finds
nothing better in time, the local plan stands and the result's message says
why.
"""

from __future__ import annotations

import time

from rpeg.context import Problem
from solvers import cpsat
from solvers.common import plan_result, unplaceable_result
from solvers.local import best_baseline, improve
from solvers.options import SolveOptions
from solvers.result import Result, Status, verdict

#: Shares of the time limit: first local search, CP-SAT; the rest refines.
LOCAL_SHARE, EXACT_SHARE = 0.15, 0.70


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Run the portfolio within ``options.time_limit``."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "auto", started)
    if infeasible is not None:
        return infeasible
    start = best_baseline(problem)
    if start is None:
        return plan_result(
            problem,
            "auto",
            None,
            started,
            requested_gap=options.gap,
            message="no baseline plan fits in memory",
        )
    simulator = problem.simulator
    stats: dict = {"baseline_makespan": simulator.evaluate(start).makespan}
    local_limit = min(LOCAL_SHARE * options.time_limit, _remaining(options, started))
    local_plan, local_stats = improve(problem, start, options, local_limit)
    stats["local"] = local_stats
    best_plan, best = local_plan, simulator.evaluate(local_plan).makespan
    stats["local_makespan"] = best
    bound = None
    message = ""
    if local_stats["interrupted"]:
        message = "interrupted during the local search: best plan so far"
    else:
        exact_limit = min(EXACT_SHARE * options.time_limit, _remaining(options, started))
        try:
            exact = cpsat.solve_with_hint(problem, options, local_plan, exact_limit)
        except KeyboardInterrupt:
            exact = None
            message = "interrupted during CP-SAT: local plan kept"
        except (MemoryError, RuntimeError, ValueError) as exc:
            # The portfolio's promise: an exact backend failing never loses the local plan.
            exact = None
            message = f"CP-SAT failed ({type(exc).__name__}: {exc}); local plan kept"
        if exact is not None:
            stats["cpsat"] = {k: v for k, v in exact.stats.items()}
            stats["cpsat_status"] = exact.status.value
            if exact.status is Status.ERROR:
                message = f"CP-SAT result rejected ({exact.message}); local plan kept"
            elif exact.plan is None or exact.stats.get("returned_start"):
                # CP-SAT handed back the local plan: its bound (if any) still counts.
                bound = exact.bound
                message = f"CP-SAT did not improve on the local plan ({exact.message})"
            else:
                bound = exact.bound
                if exact.makespan is not None and exact.makespan <= best:
                    best_plan, best = exact.plan, exact.makespan
        # The one rule decides whether the bound already proves the best plan.
        proven = bound is not None and verdict(best, bound, options.gap) in (
            Status.OPTIMAL,
            Status.OPTIMAL_WITHIN_GAP,
        )
        remaining = _remaining(options, started)
        if not proven and remaining > 0.5 and not message.startswith("interrupted"):
            refined, refine_stats = improve(problem, best_plan, options, remaining)
            stats["refine"] = refine_stats
            refined_makespan = simulator.evaluate(refined).makespan
            if refined_makespan < best:
                best_plan, best = refined, refined_makespan
    return plan_result(
        problem,
        "auto",
        best_plan,
        started,
        bound=bound,
        requested_gap=options.gap,
        stats=stats,
        message=message,
    )


def _remaining(options: SolveOptions, started: float) -> float:
    """Seconds left of the solve's time limit (at least 0)."""
    return max(0.0, options.time_limit - (time.perf_counter() - started))
