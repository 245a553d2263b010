"""Steps shared by the backends: infeasibility screening, bounds, packaging results."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from rlplan.formulation import Formulation
from rlplan.formulation.schedule import earliest_ends, earliest_period
from rlplan.rpeg import interrupts
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator, Trace
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.result import Result, Status, verdict
from rlplan.solvers.staleness import staleness_summary


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

        A stop request (:mod:`rlplan.rpeg.interrupts`) ends the build as the deadline does.
        """
        if phase:
            self.phase = phase
        if time.perf_counter() >= self.at or interrupts.requested():
            raise BuildTimeout(self.phase)


def within_space(problem: Problem) -> str:
    """`` within <framework>'s plan space`` under ``engine.framework``, else ``""`` (messages)."""
    framework = problem.directory.framework
    return "" if framework is None else f" within {framework.display}'s plan space"


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
    templates: dict | None = None,
    bound_source: str | None = None,
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
        A proven lower bound on the makespan (s) over ``problem``'s plan space
        from the backend (for a problem restricted to the fused AC-share
        template, a raw makespan bound: it is multiplied by ``1 + lambda_ac``
        here; for a problem with both templates, already a score bound). The
        result's bound is the larger of it and the plan-independent bound
        :attr:`Problem.score_bound`, and at most the plan's score.
    requested_gap
        The gap the user allowed (``--gap``).
    stats, message
        Backend statistics and a one-line note.
    templates
        What the backend knows of each template of an AC-share problem
        (:attr:`Result.templates`).
    bound_source
        The method that proved ``bound`` (default: ``solver``). The result's
        :attr:`Result.bound_source` names it only when its bound is the one
        reported; otherwise the plan-independent bound's name
        (``critical_path`` or ``compute``).

    Returns
    -------
    Result
        For a plan that fits in memory, the status is
        :func:`rlplan.solvers.result.verdict` of its simulated score (the makespan,
        x (1 + lambda_ac) for a fused plan, x (1 + lambda_stale) for an
        off-policy one) and the bound: the one rule, whatever the backend;
        `Result.policy` says what the other kind of plan would give.
    """
    best_bound, source = _reported_bound(problem, solver, bound, bound_source)
    shared: dict[str, Any] = {
        "k_eval": problem.instance.k_eval,
        "bound_source": source,
        "stats": dict(stats or {}),
        **_ac_fields(problem, templates),
    }
    if plan is None:
        return Result(
            Status.UNKNOWN,
            solver,
            bound=best_bound,
            wall_time=time.perf_counter() - started,
            message=message or "no plan found within the limits",
            requested_gap=requested_gap,
            **shared,
        )
    return _simulated_result(
        problem, solver, plan, started, best_bound, requested_gap, message, shared
    )


def _reported_bound(
    problem: Problem, solver: str, bound: float | None, bound_source: str | None
) -> tuple[float, str]:
    """The score bound a result reports, and the method that proved it.

    Parameters
    ----------
    problem
        The instance.
    solver
        Backend name.
    bound
        The backend's proven makespan bound, or None (see :func:`plan_result`).
    bound_source
        The method that proved ``bound`` (default: ``solver``).

    Returns
    -------
    tuple[float, str]
        The larger of ``bound`` x :attr:`Problem.score_factor` and the
        plan-independent :attr:`Problem.score_bound`, with ``bound_source``
        (or ``solver``) when the backend's bound is the larger, else the
        plan-independent bound's name (``critical_path`` or ``compute``).
    """
    if bound is not None and bound * problem.score_factor > problem.score_bound:
        return bound * problem.score_factor, bound_source or solver
    return problem.score_bound, problem.score_bound_source


def _simulated_result(
    problem: Problem,
    solver: str,
    plan: Plan,
    started: float,
    bound: float,
    requested_gap: float,
    message: str,
    shared: dict[str, Any],
) -> Result:
    """Simulate ``plan``: ERROR when it overflows memory, else the verdict of its score.

    ``shared`` holds the :class:`Result` fields that do not depend on the
    simulation (``k_eval``, ``bound_source``, ``stats`` and the AC-share fields).
    """
    trace = problem.simulator.simulate(plan)
    # x (1 + lambda_ac) when fused, x (1 + lambda_stale) when off-policy.
    factor = trace.factor
    if not trace.feasible:
        return Result(
            Status.ERROR,
            solver,
            plan=plan,
            makespan=trace.makespan,
            bound=bound,
            wall_time=time.perf_counter() - started,
            message=f"the plan {trace.overflow_words(3)} in simulation",
            requested_gap=requested_gap,
            score_factor=factor,
            **shared,
        )
    makespan = trace.makespan
    if trace.period is not None:
        # The steady-state step is the step time; the fill shows beside it.
        shared = {**shared, "stats": {**shared.get("stats", {}), **steady_stats(trace)}}
    # A valid bound never exceeds a feasible plan's score; a solver's float
    # tolerance can put it a hair above.
    bound = min(bound, makespan * factor)
    return Result(
        verdict(makespan * factor, bound, requested_gap),
        solver,
        plan=plan,
        makespan=makespan,
        bound=bound,
        wall_time=time.perf_counter() - started,
        message=message,
        requested_gap=requested_gap,
        score_factor=factor,
        policy=staleness_summary(problem, plan, makespan),
        **shared,
    )


def steady_stats(trace: Trace) -> dict:
    """The period and the unrolled step of a steady-state trace, for a result's stats."""
    return {"period_s": trace.period, "unrolled_step_s": trace.unrolled_step}


def _ac_fields(problem: Problem, templates: dict | None) -> dict:
    """``lambda_ac`` and ``templates`` of a result on an AC-share instance ({} otherwise)."""
    if not problem.instance.ac_share:
        return {}
    return {"lambda_ac": problem.instance.lambda_ac, "templates": templates}


def template_summary(problem: Problem, plan: Plan | None, bound: float | None = None) -> dict:
    """One entry of :attr:`Result.templates`: a template's best plan (or none) and bound.

    Parameters
    ----------
    problem
        The problem (any template; the plan picks its own simulator).
    plan
        The template's best plan known, or None.
    bound
        A proven lower bound on the template's score (s), or None.
    """
    entry: dict = {"status": None, "makespan_s": None, "score_s": None, "bound_s": bound}
    if plan is not None:
        evaluation = problem.simulator.evaluate(plan)
        entry.update(
            status="FEASIBLE" if evaluation.feasible else "ERROR",
            makespan_s=evaluation.makespan,
            score_s=evaluation.score,
        )
    return entry


def baseline_result(
    problem: Problem,
    solver: str,
    build: Callable[[CandidateDirectory, Simulator], Plan | None],
    requested_gap: float = 0.0,
) -> Result:
    """Screen for unplaceable vertices, build a baseline plan and simulate it.

    On an AC-share instance the baseline is built for each template and the
    plan of the smaller score is kept (:func:`best_over_templates`).
    """
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, solver, started)
    if infeasible is not None:
        return infeasible
    plan, templates = best_over_templates(problem, build)
    return plan_result(
        problem, solver, plan, started, requested_gap=requested_gap, templates=templates
    )


def best_over_templates(
    problem: Problem, build: Callable[[CandidateDirectory, Simulator], Plan | None]
) -> tuple[Plan | None, dict | None]:
    """``build``'s plan for each template of ``problem``, and the one of the smaller score.

    Returns the best plan (None if no template gave one) and, for a problem
    with both templates, the :attr:`Result.templates` entries (else None).
    """
    plans = {}
    for template in problem.templates:
        variant = problem.variant(template)
        if variant.unplaceable():
            plans[template] = None
            continue
        plans[template] = build(variant.directory, variant.simulator)
    found = [plan for plan in plans.values() if plan is not None]
    best = min(found, key=lambda plan: problem.simulator.evaluate(plan).score) if found else None
    if len(plans) == 1:
        return best, None
    return best, {name: template_summary(problem, plan) for name, plan in plans.items()}


def warm_start_result(
    problem: Problem,
    solver: str,
    start: Plan,
    started: float,
    stats: dict,
    requested_gap: float,
    bound: float | None,
    message: str,
) -> Result:
    """An exact backend's result that hands back its warm-start plan (with the bound it has).

    Marks ``stats["returned_start"]``; used when building runs out of time or
    the solver returns no plan, or a worse one.
    """
    stats["returned_start"] = True
    return plan_result(
        problem,
        solver,
        start,
        started,
        bound=bound,
        requested_gap=requested_gap,
        stats=stats,
        message=message,
    )


def infeasible_despite_start(
    problem: Problem, solver: str, started: float, stats: dict, requested_gap: float
) -> Result:
    """ERROR: an exact backend calls its model infeasible although its warm start is a plan.

    The warm start is a simulated, memory-feasible plan of the same plan
    space, so this can only be a modelling error, and it is reported as one.
    """
    return Result(
        Status.ERROR,
        solver,
        k_eval=problem.instance.k_eval,
        wall_time=time.perf_counter() - started,
        stats=stats,
        message=f"{solver} reports the model infeasible although its warm start is a feasible plan",
        requested_gap=requested_gap,
    )


def judge_objective(
    problem: Problem,
    result: Result,
    formulation: Formulation,
    solution: tuple[list[int], dict[str, int], list[float]],
    objective: float,
    solver: str,
) -> bool:
    """Mark ``result`` ERROR when the backend's model and the simulator disagree on its plan.

    The simulator starts every run as early as the plan's order allows; a
    backend's feasible (not yet optimal) solution may leave idle time, so its
    objective can lie above the simulated makespan by more than rounding.
    The model's own value of the plan is therefore the makespan of the
    earliest schedule of the decoded plan under the formulation's rows
    (:func:`rlplan.formulation.schedule.earliest_ends`, computed only when
    the objective itself is not within the tolerance): the simulated
    makespan must lie within the time-unit tolerance of it, and the
    objective must not lie below it.

    Parameters
    ----------
    problem
        The instance (its plan-independent bound replaces the backend's on a
        disagreement).
    result
        The backend's plan, simulated (:func:`plan_result`).
    formulation
        The formulation the backend solved.
    solution
        The backend's solution (assignment indices, staleness, run starts in units).
    objective
        The backend's objective value for that solution (s).
    solver
        Backend name, for the message.

    Returns
    -------
    bool
        Whether the two agree (the result is left unchanged then, with the
        idle time removed in ``stats["solver_idle_s"]`` when there was some).
        On a disagreement the formulation does not price the plan as the
        simulator does, so its proven bound is no bound on the simulator's
        plan space: the result keeps only the plan-independent bound, its
        plan stays (``stats["objective_mismatch"]``) for a caller that judges
        plans by simulation alone.
    """
    if result.makespan is None:
        return True
    tolerance = formulation.simulation_tolerance(objective)
    if abs(result.makespan - objective) <= tolerance:
        return True
    if formulation.steady:  # k_eval periods, as the simulated makespan
        periods = problem.instance.k_eval * earliest_period(formulation, *solution)
        earliest = periods * formulation.unit
    else:
        earliest = max(earliest_ends(formulation, *solution)) * formulation.unit
    result.stats["model_earliest_makespan_s"] = earliest
    within = abs(result.makespan - earliest) <= formulation.simulation_tolerance(earliest)
    if within and earliest <= objective + tolerance:
        result.stats["solver_idle_s"] = objective - earliest
        return True
    result.status = Status.ERROR
    result.stats["objective_mismatch"] = True
    result.bound = min(problem.score_bound, result.makespan * result.score_factor)
    result.bound_source = problem.score_bound_source
    result.message = (
        f"{solver} objective {objective:.6f} s (earliest schedule of its plan {earliest:.6f} s) "
        f"differs from its simulated plan {result.makespan:.6f} s by more than the time-unit "
        f"tolerance {tolerance:.2e} s"
    )
    return False
