"""Deciding the template of an AC-share instance with a backend that solves one template.

A PPO instance with ``optimizer.staleness_candidates.ac_share`` has two
templates (:mod:`rlplan.rpeg.templates`): separate actor and critic, and the fused
actor-critic ``ac`` whose objective is the step time x (1 + ``lambda_ac``).
:func:`each_template` decorates a backend's ``solve(problem, options)`` (the
exhaustive oracle, CP-SAT, the MILP): it runs
the backend on the problem restricted to each template in turn (the fused
restriction has its own directory, simulator and formulation, so the exact
models are built unchanged from the fused template), and keeps the plan of
the smaller score. The reported bound is the smaller of the two templates'
score bounds, so the result is OPTIMAL only when both templates are closed.

Instances without AC-share go straight to the backend. Within a template whose
plan space has on- and off-policy plans, the staleness switch
(:func:`rlplan.solvers.staleness.solve_staleness`) runs the backend once or
twice under the off-policy penalty ``lambda_stale``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.templates import FUSED, SEPARATE
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status, verdict
from rlplan.solvers.resume import needs_resume, resume_open
from rlplan.solvers.staleness import solve_staleness

Backend = Callable[[Problem, SolveOptions], Result]


def each_template(name: str) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Decorator: the backend ``solve(problem, options, **kwargs)`` decides the template.

    On a problem with both templates the decorated function runs once per
    template through :func:`solve_templates`; otherwise it runs as is.
    ``name`` names the combined result when neither template gave one.
    """

    def decorate(solve_one: Callable[..., Result]) -> Callable[..., Result]:
        @functools.wraps(solve_one)
        def solve(problem: Problem, options: SolveOptions, *args, **kwargs) -> Result:
            def backend(variant: Problem, sub_options: SolveOptions) -> Result:
                return solve_one(variant, sub_options, *args, **kwargs)

            switched = with_staleness_switch(backend)
            if len(problem.templates) == 1:
                return switched(problem, options)
            return solve_templates(problem, options, switched, name)

        return solve

    return decorate


def with_staleness_switch(solve_one: Backend, off_policy_first: bool = False) -> Backend:
    """``solve_one`` on a one-template problem, through the staleness switch when it applies.

    The switch (:func:`rlplan.solvers.staleness.solve_staleness`) runs when
    the template's plan space has on- and off-policy plans and
    ``lambda_stale`` is above 0; otherwise ``solve_one`` runs as is.
    ``off_policy_first`` solves the full space first.
    """

    def solve(problem: Problem, options: SolveOptions) -> Result:
        if problem.staleness_switch:
            return solve_staleness(problem, options, solve_one, off_policy_first)
        return solve_one(problem, options)

    return solve


def solve_templates(
    problem: Problem, options: SolveOptions, solve_one: Backend, name: str
) -> Result:
    """Run ``solve_one`` on each template of ``problem`` and combine the two results.

    The separate template gets half the time limit, the fused one the rest
    (what the first leaves unused included), cut off at the separate plan's
    score (``SolveOptions.cutoff``): a fused plan matters only below it.
    Time the fused solve leaves goes back to the separate template when its
    gap is still open (:func:`rlplan.solvers.resume.resume_open`).

    Returns
    -------
    Result
        The plan of the smaller score (ties keep the separate plan: no
        penalty is worth nothing), the smaller of the two templates' score
        bounds (a template proven infeasible bounds nothing), its verdict,
        the winner's statistics with per-template ones under
        ``stats["templates"]``, and :attr:`Result.templates`. An ERROR of
        either template (a solver/simulator disagreement) is returned as is.
    """
    started = time.perf_counter()
    results: dict[str, Result] = {}
    for position, template in enumerate((SEPARATE, FUSED)):
        remaining = options.time_limit - (time.perf_counter() - started)
        share = remaining / 2 if position == 0 else remaining
        sub_options = dataclasses.replace(options, time_limit=max(share, 0.05))
        first = results.get(SEPARATE)
        if first is not None and first.plan is not None and first.status.has_plan:
            # The fused template matters only below the separate plan's score.
            sub_options = sub_options.with_cutoff(first.score)
        results[template] = solve_one(problem.variant(template), sub_options)
    remaining = options.time_limit - (time.perf_counter() - started)
    separate = results[SEPARATE]
    if needs_resume(separate, options, remaining):
        # Time the cut fused solve left goes to the open separate template
        # (docs/solvers.md#resuming-an-open-first-solve).
        results[SEPARATE] = resume_open(
            problem.variant(SEPARATE), separate, options, remaining, solve_one, results[FUSED]
        )
    for template, result in results.items():
        if result.status is Status.ERROR:
            result.message = f"{template} template: {result.message}"
            result.wall_time = time.perf_counter() - started
            result.lambda_ac = problem.instance.lambda_ac
            result.templates = _summaries(results)
            return result
    with_plan = [r for r in results.values() if r.status.has_plan and r.plan is not None]
    bounds = [_score_bound(r) for r in results.values()]
    bound = min(bounds) if all(b is not None for b in bounds) else None
    # The smaller bound is the one reported: the method that proved it is named.
    weakest = min(results.values(), key=lambda r: _score_bound(r) or 0.0)
    bound_source = None if bound is None else weakest.bound_source
    summaries = _summaries(results)
    per_template_stats = {
        template: {
            "status": r.status.value,
            "wall_time_s": r.wall_time,
            "message": r.message,
            **r.stats,
        }
        for template, r in results.items()
    }
    wall = time.perf_counter() - started
    if not with_plan:
        infeasible = all(r.status is Status.INFEASIBLE for r in results.values())
        messages = "; ".join(f"{t}: {r.message}" for t, r in results.items() if r.message)
        return Result(
            Status.INFEASIBLE if infeasible else Status.UNKNOWN,
            name,
            k_eval=problem.instance.k_eval,
            bound=None if infeasible or bound is None or math.isinf(bound) else bound,
            bound_source=None if infeasible or bound is None or math.isinf(bound) else bound_source,
            wall_time=wall,
            stats={"templates": per_template_stats},
            message=messages or "no plan found within the limits",
            requested_gap=options.gap,
            templates=summaries,
            lambda_ac=problem.instance.lambda_ac,
        )
    best = min(with_plan, key=lambda r: (r.score, r.plan.fused))
    name = best.solver
    if bound is not None:
        bound = min(bound, best.score)
    message = best.message
    other_name = FUSED if best.template == SEPARATE else SEPARATE
    other = results[other_name]
    if other.message:
        parts = (message, f"{other_name} template: {other.message}")
        message = "; ".join(part for part in parts if part)
    return Result(
        verdict(best.score, bound, options.gap),
        name,
        plan=best.plan,
        makespan=best.makespan,
        k_eval=best.k_eval,
        bound=bound,
        bound_source=bound_source,
        wall_time=wall,
        stats={**best.stats, "templates": per_template_stats},
        message=message,
        requested_gap=options.gap,
        score_factor=best.score_factor,
        templates=summaries,
        lambda_ac=problem.instance.lambda_ac,
        policy=best.policy,
    )


def _score_bound(result: Result) -> float | None:
    """A result's bound on its template's score; a proven-infeasible template: +inf."""
    if result.status is Status.INFEASIBLE:
        return math.inf
    return result.bound


def _summaries(results: dict[str, Result]) -> dict[str, dict]:
    """:attr:`Result.templates` entries of per-template results."""
    summaries = {}
    for template, result in results.items():
        bound = _score_bound(result)
        summaries[template] = {
            "status": result.status.value,
            "makespan_s": result.makespan,
            "score_s": result.score,
            "bound_s": None if bound is None or math.isinf(bound) else bound,
        }
    return summaries
