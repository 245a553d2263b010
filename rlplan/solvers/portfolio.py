"""CP-SAT and the MILP side by side on one exact solve: the exact phase of ``auto``.

On a cluster of at least :data:`PORTFOLIO_MIN_GPUS` GPUs (where the MILP is
strong) with two or more threads, the MILP (HiGHS, one thread) runs in a forked
child process (:mod:`rlplan.solvers.forked`) while CP-SAT runs here with the
other threads, both warm-started from the same plan on the same
formulation. Whichever proves first, the optimum or that no plan is below
the solve's cutoff, ends the other: a MILP proof stops CP-SAT's search (it
returns its best plan), a CP-SAT proof terminates the child. Otherwise both
run to the one time limit (the child is terminated a moment after it, at
the latest). The result keeps the better simulated plan
(a tie keeps CP-SAT's) and the larger of the two bounds, ``bound_source``
naming the backend whose bound holds; a MILP that fails, errs or dies never
loses CP-SAT's plan. ``stats["portfolio"]`` records each backend's status,
wall time and bound, and which proved (``proved_by``).

Otherwise (one thread, a smaller cluster, no highspy) CP-SAT alone runs
with every thread, as before the portfolio. See
docs/solvers.md#the-exact-portfolio.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

from rlplan.rpeg import interrupts
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers import cpsat
from rlplan.solvers.common import plan_result
from rlplan.solvers.forked import ForkedCall
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.progress import SilentProgress
from rlplan.solvers.result import PROVEN, Result, Status, reaches_cutoff

#: Seconds before the time limit the MILP child's own limit ends (at most
#: :data:`ANSWER_SHARE` of the limit): HiGHS overruns its limit by a moment,
#: then the plan is read back, simulated and sent.
ANSWER_RESERVE_S = 1.0
#: Seconds past the time limit the child's answer is still waited for (at most
#: :data:`ANSWER_SHARE` of the limit).
ANSWER_GRACE_S = 2.0
ANSWER_SHARE = 0.05
#: Seconds between looks at the child's pipe.
POLL_S = 0.05
#: The smallest cluster (GPUs) on which the MILP runs beside CP-SAT.
PORTFOLIO_MIN_GPUS = 32


def solve_with_hint(
    problem: Problem, options: SolveOptions, start: Plan, time_limit: float
) -> Result:
    """CP-SAT and, where :func:`runs_both`, the MILP beside it, from ``start``.

    Returns
    -------
    Result
        CP-SAT's result, or the two backends' results combined (:func:`combine`).
    """
    if not runs_both(problem, options):
        return cpsat.solve_with_hint(problem, options, start, time_limit)
    started = time.perf_counter()
    milp_options = dataclasses.replace(options, threads=1, progress=SilentProgress())
    ends = started + time_limit - min(ANSWER_RESERVE_S, ANSWER_SHARE * time_limit)
    child = ForkedCall(lambda: _solve_milp(problem, milp_options, start, ends))
    stop = threading.Event()  # set once the MILP has proven: CP-SAT's search ends
    grace = min(ANSWER_GRACE_S, ANSWER_SHARE * time_limit)
    watch = _Watch(child, stop, started, started + time_limit + grace, options.cutoff)
    watch.thread.start()
    try:
        cp_options = dataclasses.replace(options, threads=options.threads - 1)
        cp = cpsat.solve_with_hint(problem, cp_options, start, time_limit, stop=stop, max_lp=True)
        cp_wall = time.perf_counter() - started
        if (
            cp.status in PROVEN
            or reaches_cutoff(cp.bound, options.cutoff)
            or interrupts.requested()
        ):
            # A CP-SAT proof, of the optimum or of the cutoff (or a stop request) ends the MILP.
            watch.give_up.set()
        watch.thread.join()  # else the MILP answers by the time limit
    finally:
        watch.give_up.set()
        watch.thread.join()
        child.end()
    return combine(problem, options.gap, started, cp, cp_wall, child, watch.answered_s)


@dataclasses.dataclass
class _Watch:
    """A thread waiting for the MILP child's answer; it stops CP-SAT on a MILP proof."""

    child: ForkedCall
    stop: threading.Event
    started: float
    deadline: float
    cutoff: float | None = None
    answered_s: float | None = None
    give_up: threading.Event = dataclasses.field(default_factory=threading.Event)
    thread: threading.Thread = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="milp-watch", daemon=True)

    def _run(self) -> None:
        while not self.give_up.is_set() and not interrupts.requested():
            if time.perf_counter() > self.deadline:
                return
            if self.child.wait(POLL_S):
                self.answered_s = time.perf_counter() - self.started
                value = self.child.value
                if isinstance(value, Result) and (
                    value.status in PROVEN or reaches_cutoff(value.bound, self.cutoff)
                ):
                    self.stop.set()
                return


def combine(
    problem: Problem,
    gap: float,
    started: float,
    cp: Result,
    cp_wall: float,
    child: ForkedCall,
    milp_wall: float | None,
) -> Result:
    """One result of CP-SAT's and the MILP's: the better plan, the larger bound.

    A MILP result that is missing (the child failed, died or was ended) or an
    ERROR (its bound proves nothing) leaves CP-SAT's result as it is, with
    ``stats["portfolio"]`` added; so does a CP-SAT ERROR, which ``auto``
    handles as before.
    """
    milp = child.value if isinstance(child.value, Result) else None
    summary = {
        "cpsat": _summary(cp, cp_wall),
        "milp": _summary(milp, milp_wall, child.error or "ended before it answered"),
    }
    provers = [
        (wall, name)
        for name, result, wall in (("cpsat", cp, cp_wall), ("milp", milp, milp_wall))
        if result is not None and result.status in PROVEN and wall is not None
    ]
    summary["proved_by"] = min(provers)[1] if provers else None
    if cp.status is Status.ERROR or milp is None or milp.status is Status.ERROR:
        cp.stats["portfolio"] = summary
        return cp
    with_plan = [r for r in (cp, milp) if r.plan is not None]
    if not with_plan:
        cp.stats["portfolio"] = summary
        return cp
    best = min(with_plan, key=lambda r: (r.score, r is not cp))
    bounded = [r for r in (cp, milp) if r.bound is not None]
    strongest = max(bounded, key=lambda r: (r.bound, r is cp), default=None)
    summary["bound_from"] = None if strongest is None else strongest.solver
    bound = None if strongest is None else strongest.bound / problem.score_factor
    return plan_result(
        problem,
        best.solver,
        best.plan,
        started,
        bound=bound,
        requested_gap=gap,
        stats={**best.stats, "portfolio": summary},
        message=best.message,
        templates=best.templates,
        bound_source=None if strongest is None else strongest.bound_source,
    )


def runs_both(problem: Problem, options: SolveOptions) -> bool:
    """Whether the MILP runs beside CP-SAT: two threads or more, highspy, a large cluster
    (every pool's GPUs counted).

    Below :data:`PORTFOLIO_MIN_GPUS` GPUs CP-SAT alone with every thread proves
    first (the MILP did not prove 8 H100 in 180 s), and halving its workers
    for the MILP only slows the proof (benchmarks/portfoliobench.py). The
    environment variable ``RLPLAN_PORTFOLIO_MIN_GPUS`` sets another threshold.
    """
    smallest = int(os.environ.get("RLPLAN_PORTFOLIO_MIN_GPUS", PORTFOLIO_MIN_GPUS))
    return options.threads >= 2 and problem.instance.num_gpus >= smallest and _highs_available()


def _solve_milp(problem: Problem, options: SolveOptions, start: Plan, ends: float) -> Result:
    """The MILP from ``start`` until ``ends`` (``time.perf_counter()``: one clock across fork).

    Imported here, in the child: Pyomo's import costs the parent nothing, and
    the child's limit counts it.
    """
    from rlplan.solvers import milp

    return milp.solve_with_start(problem, options, start, max(0.0, ends - time.perf_counter()))


def _summary(result: Result | None, wall: float | None, missing: str = "") -> dict:
    """A backend's line in ``stats["portfolio"]``: status, wall time, bound (or why none)."""
    if result is None:
        return {"status": None, "wall_s": wall, "bound_s": None, "error": missing}
    return {"status": result.status.value, "wall_s": wall, "bound_s": result.bound}


def _highs_available() -> bool:
    """Whether highspy imports (the MILP's solver)."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True
