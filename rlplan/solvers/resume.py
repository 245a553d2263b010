"""The time a cut second solve leaves: spent on the first solve when it is still open.

The staleness switch (:mod:`rlplan.solvers.staleness`) and the AC-share
templates (:mod:`rlplan.solvers.templates`) both solve one space in half the
limit, then a second space cut off below the first one's plan. When the
penalty outweighs what the second space gains, the cut solve proves that in
seconds and most of the limit is left. :func:`resume_open` gives that time
back to the first space when its solve ended without closing its gap: it
solves that space again, cut off at its plan's score, so finding no plan under
the cutoff proves the plan optimal (docs/solvers.md#resuming-an-open-first-solve).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status, verdict

Backend = Callable[[Problem, SolveOptions], Result]

#: The least time left (s) worth a second solve of the first space: below it the
#: exact model would barely be built (about a second at 64 GPUs).
RESUME_MIN_S = 2.0


def needs_resume(result: Result, options: SolveOptions, remaining: float) -> bool:
    """Whether ``result`` has a plan whose gap is still open and ``remaining`` s are worth it."""
    return (
        result.plan is not None
        and result.status is Status.FEASIBLE
        and result.bound is not None
        and remaining >= RESUME_MIN_S
        and verdict(result.score, result.bound, options.gap) is Status.FEASIBLE
    )


def resume_open(
    problem: Problem,
    first: Result,
    options: SolveOptions,
    remaining: float,
    solve_one: Backend,
    other: Result,
) -> Result:
    """Solve ``problem`` again in ``remaining`` s, cut off at the best score known; merge.

    The cutoff is the smaller score of ``first`` and ``other`` (the second
    space's result): a plan of ``problem`` matters only below both.

    Both solves bound the same space, so the larger bound holds; the plan of
    the smaller score is kept (a tie keeps ``first``'s). A second solve that
    ends in ERROR or without a plan leaves ``first`` as it was, its own
    statistics under ``stats["resumed"]``. The seed moves on by one so that
    the second search does not repeat the first's opening.

    Returns
    -------
    Result
        ``first`` with the better plan, the larger bound, its verdict and the
        wall time of both solves.
    """
    started = time.perf_counter()
    again = dataclasses.replace(options, time_limit=remaining, seed=options.seed + 1)
    cutoff = min(r.score for r in (first, other) if r.plan is not None and r.status.has_plan)
    second = solve_one(problem, again.with_cutoff(cutoff))
    resumed = {
        "status": second.status.value,
        "wall_time_s": second.wall_time,
        "score_s": second.score,
        "bound_s": second.bound,
        "message": second.message,
    }
    merged = first
    if second.status.has_plan and second.plan is not None and second.score < first.score:
        merged = second
    bound, source = first.bound, first.bound_source
    if second.status is not Status.ERROR and second.bound is not None and second.bound > bound:
        bound, source = second.bound, second.bound_source
    bound = min(bound, merged.score)
    message = merged.message
    if second.stats.get("cutoff_proved"):
        message = f"a second solve found no plan under the cutoff {cutoff:.4f} s"
    return dataclasses.replace(
        merged,
        status=verdict(merged.score, bound, options.gap),
        bound=bound,
        bound_source=source,
        wall_time=first.wall_time + time.perf_counter() - started,
        stats={**merged.stats, "resumed": resumed},
        message=message,
    )
