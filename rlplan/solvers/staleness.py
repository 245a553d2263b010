"""The staleness switch: exact backends under the off-policy penalty ``lambda_stale``.

An off-policy plan (some trained model at staleness > 0) scores its step time
x (1 + ``lambda_stale``) (:meth:`rlplan.rpeg.schema.instance.Instance.score_factor`),
while the exact models minimise the makespan. :func:`solve_staleness` solves
a problem whose plan space has both on- and off-policy plans twice, as
:mod:`rlplan.solvers.templates` solves the two AC-share templates:

1. over the on-policy plans (every trained model at staleness 0): its plan
   scores S_on, its bound is ``B_on``;
2. over the full plan space with the penalty off (``lambda_stale`` 0, so
   its bound ``B_full`` bounds every plan's unpenalised score), cut off at
   S_on / (1 + ``lambda_stale``): an off-policy plan beats the on-policy one
   only below that unpenalised score, so the search may stop once it proves
   that no plan is below it (``SolveOptions.cutoff``; docs/solvers.md#cutoffs-between-solves).

The plan of the smaller score is kept (a tie keeps the on-policy plan), and
the bound is ``min(B_on, (1 + lambda_stale) B_full)``: an on-policy plan
scores at least ``B_on``, an off-policy one at least ``(1 + lambda_stale)``
times its unpenalised score, itself at least ``B_full``. When the on-policy
plan is optimal and the penalty outweighs what staleness gains, the cut
second solve proves it by finding no plan below the cutoff, which takes a
fraction of a full proof (docs/solvers.md).

:func:`staleness_summary` and :func:`describe_staleness` say, for any
backend's plan, what the other side would cost or gain
(:attr:`rlplan.solvers.result.Result.policy`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status, verdict
from rlplan.solvers.resume import needs_resume, resume_open

Backend = Callable[[Problem, SolveOptions], Result]


def off_policy(plan: Plan) -> bool:
    """Whether some trained model of ``plan`` has a staleness above 0."""
    return any(value > 0 for _, value in plan.staleness)


def solve_staleness(
    problem: Problem, options: SolveOptions, solve_one: Backend, off_policy_first: bool = False
) -> Result:
    """Run ``solve_one`` on the on-policy plans, then on the full plan space cut off below them.

    With ``off_policy_first`` (a heuristic plan says off-policy wins) the
    order is the other way round (:func:`_solve_off_policy_first`).

    The first solve gets half the time limit, the full one the rest;
    building each space's problem counts against the limit. When the full
    solve leaves time and the on-policy gap is still open, that time goes to
    the on-policy space again
    (:func:`rlplan.solvers.resume.resume_open`).

    Returns
    -------
    Result
        The plan of the smaller score (ties keep the on-policy plan) with
        the switch's bound (module docstring), its verdict, the statistics of
        each solve under ``stats["staleness_switch"]`` and
        :attr:`Result.policy`. An ERROR of either solve is returned as is; a
        full solve after an on-policy one without a plan runs uncut.
    """
    started = time.perf_counter()
    if off_policy_first:
        return _solve_off_policy_first(problem, options, solve_one, started)
    # Each space's problem is built (its candidate directory: about a second at 1,024
    # GPUs) before its share of the limit is measured, so the build counts against it.
    on_policy = problem.on_policy()
    on = _solve_first(problem, on_policy, options, solve_one, started, "on-policy solve")
    if on.status is Status.ERROR:
        return on
    unpenalised = problem.without_stale_penalty()
    # Only an unpenalised score below S_on / (1 + lambda_stale) beats the on-policy plan.
    cutoff = _score_of(on)
    if cutoff is not None:
        cutoff /= 1.0 + problem.instance.lambda_stale
    full = _solve_cut(problem, unpenalised, options, solve_one, started, cutoff, on)
    if full.status is Status.ERROR or all(r.plan is None for r in (on, full)):
        full.wall_time = time.perf_counter() - started
        return full
    remaining = options.time_limit - (time.perf_counter() - started)
    if needs_resume(on, options, remaining):
        # Time the cut full solve left goes to the open on-policy solve
        # (docs/solvers.md#resuming-an-open-first-solve).
        on = resume_open(on_policy, on, options, remaining, solve_one, full)
        _reprice(problem, on)
    return _combine(problem, full, on, options, started)


def _solve_off_policy_first(
    problem: Problem, options: SolveOptions, solve_one: Backend, started: float
) -> Result:
    """The switch in the other order: the full space, then the on-policy plans cut off below it.

    The full solve (penalty off, half the limit) bounds every plan's
    unpenalised score; its plan, priced under the penalty at S, cuts off the
    on-policy solve at S: an on-policy plan scores its makespan and matters
    only below S. Where off-policy wins, the on-policy space then has only to
    be shown empty below S instead of solved to optimality. The bound and the
    result are those of the usual order (:func:`_combine`); time the
    on-policy solve leaves is not given back to an open full solve.
    """
    unpenalised = problem.without_stale_penalty()
    on_policy = problem.on_policy()
    full = _solve_first(problem, unpenalised, options, solve_one, started, "full plan space solve")
    if full.status is Status.ERROR:
        return full
    on = _solve_cut(problem, on_policy, options, solve_one, started, _score_of(full), full)
    if on.status is Status.ERROR or all(r.plan is None for r in (on, full)):
        on.wall_time = time.perf_counter() - started
        return on
    return _combine(problem, full, on, options, started)


def _solve_first(
    problem: Problem,
    space: Problem,
    options: SolveOptions,
    solve_one: Backend,
    started: float,
    label: str,
) -> Result:
    """The first solve of the switch: ``space`` in half the time left, priced under ``problem``.

    An ERROR comes back with ``label`` in its message and the switch's wall time.
    """
    half = (options.time_limit - (time.perf_counter() - started)) / 2
    first = solve_one(space, dataclasses.replace(options, time_limit=max(half, 0.05)))
    _reprice(problem, first)
    if first.status is Status.ERROR:
        first.message = f"{label}: {first.message}"
        first.wall_time = time.perf_counter() - started
    return first


def _solve_cut(
    problem: Problem,
    space: Problem,
    options: SolveOptions,
    solve_one: Backend,
    started: float,
    cutoff: float | None,
    first: Result,
) -> Result:
    """The second solve: ``space`` in the time left, cut off at ``cutoff`` (None: uncut).

    Not run when the space's plan-independent bound already reaches the
    cutoff (:func:`_bound_proves_cutoff`). Priced under ``problem``.
    """
    remaining = options.time_limit - (time.perf_counter() - started)
    second = dataclasses.replace(options, time_limit=max(remaining, 0.05))
    result = None
    if cutoff is not None:
        second = second.with_cutoff(cutoff)
        if space.score_bound >= cutoff:
            result = _bound_proves_cutoff(space, cutoff, first)
    if result is None:
        result = solve_one(space, second)
    _reprice(problem, result)
    return result


def _score_of(result: Result) -> float | None:
    """``result``'s score when it has a plan, else None."""
    return result.score if result.plan is not None and result.status.has_plan else None


def _bound_proves_cutoff(space: Problem, cutoff: float, first: Result) -> Result:
    """The cut second solve's result when ``space``'s plan-independent bound reaches its cutoff.

    No plan of ``space`` scores below ``space.score_bound``
    (docs/cost-model.md#lower-bounds), so none beats the first solve's plan
    and the exact solve would only prove that again.
    """
    bound = space.score_bound
    return Result(
        Status.UNKNOWN,
        first.solver,
        k_eval=space.instance.k_eval,
        bound=bound,
        bound_source=space.score_bound_source,
        wall_time=0.0,
        stats={"cutoff_proved": True, "skipped": True},
        message=(
            f"not solved: the plan-independent bound {bound:.4f} s is at or above "
            f"the cutoff {cutoff:.4f} s"
        ),
    )


def _reprice(problem: Problem, result: Result) -> None:
    """Give ``result`` its plan's objective factor under ``problem``'s own penalty."""
    if result.plan is not None:
        result.score_factor = problem.simulator.plan_factor(result.plan)


def _switch_bound(problem: Problem, full: Result, on: Result) -> tuple[float, str | None]:
    """``min(B_on, (1 + lambda_stale) B_full)``, at least the plan-independent score bound."""
    penalty = 1.0 + problem.instance.lambda_stale
    on_bound = math.inf if on.status is Status.INFEASIBLE else on.bound
    if full.bound is None or on_bound is None:
        return problem.score_bound, problem.score_bound_source
    bound, source = min((on_bound, on.bound_source), (penalty * full.bound, full.bound_source))
    if bound < problem.score_bound:
        return problem.score_bound, problem.score_bound_source
    return bound, source


def _combine(
    problem: Problem, full: Result, on: Result, options: SolveOptions, started: float
) -> Result:
    """One result of the two solves (see :func:`solve_staleness`)."""
    wall = time.perf_counter() - started
    solves = {
        "full_unpenalised": full,
        "on_policy": on,
    }
    stats = {
        name: {
            "status": r.status.value,
            "wall_time_s": r.wall_time,
            "makespan_s": r.makespan,
            "score_s": r.score,
            "bound_s": r.bound,
            "message": r.message,
        }
        for name, r in solves.items()
    }
    with_plan = [r for r in (on, full) if r.status.has_plan and r.plan is not None]
    best = min(with_plan, key=lambda r: (r.score, off_policy(r.plan)))
    other = full if best is on else on
    bound, source = _switch_bound(problem, full, on)
    bound = min(bound, best.score)
    message = best.message
    if other.message and not other.stats.get("cutoff_proved"):
        label = "full plan space" if other is full else "on-policy"
        message = "; ".join(part for part in (message, f"{label}: {other.message}") if part)
    summary = staleness_summary(problem, best.plan, best.makespan)
    if other.stats.get("cutoff_proved"):
        # The other solve proved only that no plan is below its cutoff: that is what is known.
        summary["off_policy_bound_s" if other is full else "on_policy_bound_s"] = other.bound
    elif other.plan is not None and other.status.has_plan:
        summary.update(
            alternative="best on-policy plan" if other is on else "best off-policy plan",
            alternative_makespan_s=other.makespan,
            alternative_score_s=other.score,
        )
    return dataclasses.replace(
        best,
        status=verdict(best.score, bound, options.gap),
        bound=bound,
        bound_source=source,
        wall_time=wall,
        stats={**best.stats, "staleness_switch": stats},
        message=message,
        requested_gap=options.gap,
        policy=summary,
    )


def staleness_summary(problem: Problem, plan: Plan, makespan: float | None) -> dict | None:
    """What the other side of the penalty would give ``plan``, by the same placement.

    For an off-policy plan: the same placement with every trained model at
    staleness 0 (when each may take it); for an on-policy one: with every
    trained model at its largest staleness candidate. None when the plan's
    template has only one kind of plan.

    Returns
    -------
    dict | None
        ``lambda_stale``, ``off_policy`` (the plan's kind), ``alternative``
        (how the other plan was made), ``alternative_makespan_s`` and
        ``alternative_score_s`` (None when that plan cannot be formed).
    """
    instance = problem.for_plan(plan).instance
    if not all(instance.policy_kinds):
        return None
    candidates = instance.optimizer.staleness_candidates
    stale = off_policy(plan)
    staleness = tuple((m, 0 if stale else max(candidates[m])) for m, _ in plan.staleness)
    summary = {
        "lambda_stale": instance.lambda_stale,
        "off_policy": stale,
        "alternative": "same placement, staleness " + ", ".join(f"{m} {s}" for m, s in staleness),
        "alternative_makespan_s": None,
        "alternative_score_s": None,
    }
    evaluation = problem.simulator.evaluate(Plan(plan.placements, staleness))
    summary.update(alternative_makespan_s=evaluation.makespan, alternative_score_s=evaluation.score)
    return summary


def describe_staleness(result: Result) -> str | None:
    """One sentence on what on-policy costs or off-policy would gain, in s/step and %.

    E.g. ``off-policy (score = step time x 1.05); on-policy would cost
    +0.0123 s/step (+1.23 %), best on-policy plan 1.0123 s/step`` or
    ``on-policy; the best off-policy plan would gain 0.0006 s/step (0.06 %),
    less than its lambda_stale 0.05 penalty (score 1.0500 s/step)``. None
    without a summary.
    """
    summary = result.policy
    if summary is None or result.makespan is None:
        return None
    proven = summary.get("off_policy_bound_s")
    if proven is not None and not summary["off_policy"]:
        step = proven / result.k_eval
        return (
            f"on-policy; no off-policy plan is under {step:.4f} s/step, so none beats it "
            f"after its lambda_stale {summary['lambda_stale']:g} penalty (proven)"
        )
    k = result.k_eval
    penalty = summary["lambda_stale"]
    words = "off-policy" if summary["off_policy"] else "on-policy"
    if summary["off_policy"] and penalty > 0:
        words += f" (score = step time x {1 + penalty:g}, lambda_stale {penalty:g})"
    on_proven = summary.get("on_policy_bound_s")
    if on_proven is not None and summary["off_policy"]:
        return words + f"; no on-policy plan is under {on_proven / k:.4f} s/step (proven)"
    other = summary["alternative_makespan_s"]
    where = summary["alternative"]
    if other is None:
        return words + f"; no on-policy plan of this placement ({where})"
    delta = (other - result.makespan) / k
    percent = 100 * (other - result.makespan) / result.makespan
    if summary["off_policy"]:
        return (
            words + f"; on-policy would cost {delta:+.4f} s/step ({percent:+.2f} %), "
            f"{where} {other / k:.4f} s/step"
        )
    if delta >= 0:
        return words + f"; off-policy would not be faster ({where} {other / k:.4f} s/step)"
    score = summary["alternative_score_s"] / k
    verdict_words = (
        f"less than its lambda_stale {penalty:g} penalty"
        if result.score_step is not None and score >= result.score_step
        else "and would score lower"
    )
    return (
        words + f"; off-policy would gain {-delta:.4f} s/step ({-percent:.2f} %) of step time "
        f"({where}), {verdict_words} (score {score:.4f} s/step)"
    )
