"""Backend ``auto`` (the default): the portfolio of the specification.

greedy → local search (short; under the off-policy penalty a second one with
the penalty off) → CP-SAT warm-started from the local plan, cut off at its score →
simulator check → local refinement of the best plan → one result with the
best simulated plan and the best bound any part proved, its status given by
the one rule (:func:`rlplan.solvers.result.verdict`). Every phase's plan is a
candidate judged by its simulated score alone: a CP-SAT plan rejected for
disagreeing with the simulator still counts by its simulated score (its bound
does not), and when CP-SAT fails or finds nothing better in time the better
earlier plan stands; the result's message says why.
"""

from __future__ import annotations

import dataclasses
import time

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers import portfolio
from rlplan.solvers.common import plan_result, unplaceable_result, within_space
from rlplan.solvers.local import baseline_deadline, best_baseline, improve
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.progress import SilentProgress
from rlplan.solvers.result import PROVEN, Result, Status, verdict
from rlplan.solvers.staleness import off_policy
from rlplan.solvers.templates import solve_templates, with_staleness_switch
from rlplan.solvers.value import plan_steps

#: The first local search: at most this share of the time limit, and it ends
#: once it has converged past :func:`local_evaluations` evaluations: CP-SAT
#: needs a good start, not the search's last 0.1 %, and the refinement after
#: CP-SAT gets the time CP-SAT leaves.
LOCAL_SHARE = 0.15
#: Evaluations of each of ``auto``'s local searches from
#: :data:`LOCAL_LARGE_GPUS` GPUs on, and below. On the dense frontier
#: (benchmarks/portfoliobench.py, docs/solvers.md#auto-the-default) 5,000
#: rather than 20,000 takes 8 GPUs from 4.0-4.6 s to 2.3-3.2 s and 32 GPUs
#: from 14.3-16.5 s to 11.2-14.2 s, where CP-SAT proves soon after its start,
#: and 64 GPUs from 36-46 s to 66 s, where CP-SAT's own search for better
#: plans is slow; 100,000 took every point longer.
LOCAL_EVALUATIONS = 20_000
LOCAL_EVALUATIONS_SMALL = 5_000
#: The smallest cluster (GPUs) whose local searches get :data:`LOCAL_EVALUATIONS`.
LOCAL_LARGE_GPUS = 64
#: Share of the time limit kept for refining after CP-SAT; CP-SAT gets the rest.
REFINE_SHARE = 0.15


def local_evaluations(problem: Problem) -> int:
    """Evaluations of ``auto``'s local searches on ``problem`` (at most its ``e_max``).

    :data:`LOCAL_EVALUATIONS_SMALL` below :data:`LOCAL_LARGE_GPUS` GPUs (every
    pool's counted), :data:`LOCAL_EVALUATIONS` from there.
    """
    instance = problem.instance
    large = instance.num_gpus >= LOCAL_LARGE_GPUS
    return min(instance.optimizer.e_max, LOCAL_EVALUATIONS if large else LOCAL_EVALUATIONS_SMALL)


@dataclasses.dataclass
class _Best:
    """The best simulated plan of the phases so far (the simulator is the only judge)."""

    simulator: Simulator
    plan: Plan
    score: float

    def offer(self, plan: Plan | None, on_tie: bool = False) -> bool:
        """Keep ``plan`` when it fits in memory and scores lower (or as low, ``on_tie``).

        Returns whether it was kept.
        """
        if plan is None:
            return False
        evaluation = self.simulator.evaluate(plan)
        if not evaluation.feasible or evaluation.score > self.score:
            return False
        if evaluation.score == self.score and not on_tie:
            return False
        self.plan, self.score = plan, evaluation.score
        return True


@dataclasses.dataclass
class _ExactPhase:
    """What the CP-SAT phase adds: a proven bound (or none) and a note."""

    bound: float | None = None
    bound_source: str | None = None
    message: str = ""
    templates: dict | None = None
    #: The exact result's plan and what it knows of the other kind of plan
    #: (the staleness switch's :attr:`Result.policy`).
    plan: Plan | None = None
    policy: dict | None = None


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Run the portfolio within ``options.time_limit``.

    Every phase's plan (greedy, local search, CP-SAT, refinement) is a
    candidate judged by its simulated score; the result is the best of them,
    with the best bound proven on the way.
    """
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "auto", started)
    if infeasible is not None:
        return infeasible
    found: dict[str, Plan | None] = {}
    start = best_baseline(problem, baseline_deadline(options.time_limit), found)
    if start is None:
        return plan_result(
            problem,
            "auto",
            None,
            started,
            requested_gap=options.gap,
            message="no baseline plan fits in memory" + within_space(problem),
        )
    simulator = problem.simulator
    stats: dict = {
        "baseline_makespan": simulator.evaluate(start).makespan,
        "baselines": plan_steps(problem, found),
    }
    # Plans are compared by score: the makespan, x (1 + lambda_ac) for a fused plan,
    # x (1 + lambda_stale) for an off-policy one.
    best = _Best(simulator, start, simulator.evaluate(start).score)
    local_limit = min(LOCAL_SHARE * options.time_limit, _remaining(options, started))
    local_plan, local_stats = improve(
        problem,
        start,
        options,
        local_limit,
        local_evaluations(problem),
    )
    templates = local_stats.pop("templates", None)
    stats["local"] = local_stats
    stats["local_makespan"] = simulator.evaluate(local_plan).makespan
    best.offer(local_plan, on_tie=True)
    if problem.staleness_switch and not local_stats["interrupted"]:
        unpenalised_plan = _unpenalised_local(problem, best.plan, options, started)
        if best.offer(unpenalised_plan):
            stats["unpenalised_local_makespan"] = simulator.evaluate(unpenalised_plan).makespan
    exact = _ExactPhase()
    if local_stats["interrupted"]:
        exact.message = "interrupted during the local search: best plan so far"
    elif verdict(best.score, problem.score_bound, options.gap) in PROVEN:
        # The plan-independent bound already proves the local plan: nothing to search.
        exact.message = "the plan-independent bound proves the local plan; CP-SAT not run"
    else:
        exact_limit = max(0.0, _remaining(options, started) - REFINE_SHARE * options.time_limit)
        exact = _exact_phase(problem, options, best, exact_limit, stats)
        templates = merge_templates(templates, exact.templates)
        # The one rule decides whether the bound already proves the best plan.
        proven = exact.bound is not None and verdict(best.score, exact.bound, options.gap) in PROVEN
        remaining = _remaining(options, started)
        if not proven and remaining > 0.5 and not exact.message.startswith("interrupted"):
            refined, refine_stats = improve(problem, best.plan, options, remaining)
            refined_templates = refine_stats.pop("templates", None)
            if refined_templates is not None:
                templates = merge_templates(templates, refined_templates)
            stats["refine"] = refine_stats
            best.offer(refined)
    # exact.bound bounds the score; plan_result takes a makespan bound for one template.
    bound = None if exact.bound is None else exact.bound / problem.score_factor
    result = plan_result(
        problem,
        "auto",
        best.plan,
        started,
        bound=bound,
        requested_gap=options.gap,
        stats=stats,
        message=exact.message,
        templates=templates,
        bound_source=exact.bound_source,
    )
    if exact.policy is not None and exact.plan is not None and exact.plan == best.plan:
        # The switch's summary of the same plan: the other kind's best plan or proven bound.
        result.policy = exact.policy
    return result


def _exact_phase(
    problem: Problem, options: SolveOptions, best: _Best, time_limit: float, stats: dict
) -> _ExactPhase:
    """CP-SAT warm-started from the best plan; its plan is offered to ``best``.

    A CP-SAT result rejected for disagreeing with the simulator
    (:func:`rlplan.solvers.common.judge_objective`) still offers its plan,
    judged by simulation alone, but its bound is not used: a model that
    prices a plan otherwise than the simulator proves nothing about the
    simulator's optimum.
    """
    phase = _ExactPhase()
    try:
        exact = _exact(problem, options, best.plan, time_limit)
    except KeyboardInterrupt:
        phase.message = "interrupted during CP-SAT: local plan kept"
        return phase
    except (MemoryError, RuntimeError, ValueError) as exc:
        # The portfolio's promise: an exact backend failing never loses the local plan.
        phase.message = f"CP-SAT failed ({type(exc).__name__}: {exc}); local plan kept"
        return phase
    stats["cpsat"] = dict(exact.stats)
    stats["cpsat_status"] = exact.status.value
    if "portfolio" in exact.stats:  # the MILP ran beside CP-SAT (two threads or more)
        stats["portfolio"] = stats["cpsat"].pop("portfolio")
    phase.templates = exact.templates
    if exact.status is Status.ERROR:
        kept = best.offer(exact.plan, on_tie=True)
        outcome = "its plan, judged by simulation alone, is kept" if kept else "local plan kept"
        phase.message = f"CP-SAT result rejected ({exact.message}); {outcome}"
        return phase
    phase.bound, phase.bound_source = exact.bound, exact.bound_source
    phase.plan, phase.policy = exact.plan, exact.policy
    if exact.plan is None or exact.stats.get("returned_start"):
        # CP-SAT handed back the local plan: its bound (if any) still counts.
        phase.message = f"CP-SAT did not improve on the local plan ({exact.message})"
    else:
        best.offer(exact.plan, on_tie=True)
    return phase


def _exact(problem: Problem, options: SolveOptions, hint: Plan, time_limit: float) -> Result:
    """CP-SAT (and the MILP beside it) warm-started from ``hint``; once per template if AC-share.

    With two threads or more the MILP runs beside CP-SAT and the first proof
    ends the other (:mod:`rlplan.solvers.portfolio`).

    Each template is hinted with ``hint`` when it is of that template, else
    with the template's better baseline; the result keeps the better plan
    and the smaller of the two score bounds (:mod:`rlplan.solvers.templates`).
    Under the off-policy penalty each template goes through the staleness
    switch (:mod:`rlplan.solvers.staleness`); its on-policy solve is hinted
    with the hint's placement at staleness 0.
    """

    def solve_one(variant: Problem, sub_options: SolveOptions) -> Result:
        start = hint
        if hint.fused != variant.directory.fused:
            start = best_baseline(variant, baseline_deadline(sub_options.time_limit))
        if start is None:
            return plan_result(
                variant, "cpsat", None, time.perf_counter(), message="no baseline plan fits"
            )
        began = time.perf_counter()
        start = _below_cutoff(variant, _within(variant, start), sub_options)
        left = max(0.05, sub_options.time_limit - (time.perf_counter() - began))
        return portfolio.solve_with_hint(variant, sub_options, start, left)

    # Only a plan scoring below the hint's matters (docs/solvers.md#cutoffs-between-solves).
    sub_options = dataclasses.replace(options, time_limit=time_limit).with_cutoff(
        problem.simulator.evaluate(hint).score
    )
    # An off-policy hint says off-policy likely wins: the switch then proves the
    # on-policy side only below it (docs/solvers.md#staleness-on-policy-and-off-policy).
    switched = with_staleness_switch(solve_one, off_policy_first=off_policy(hint))
    if len(problem.templates) == 1:
        return switched(problem, sub_options)
    return solve_templates(problem, sub_options, switched, "cpsat")


def _unpenalised_local(
    problem: Problem, start: Plan, options: SolveOptions, started: float
) -> Plan:
    """A local search from ``start`` with staleness free (``lambda_stale`` 0).

    The search under the penalty rarely leaves the on-policy plans, whose
    moves one at a time cost the penalty before staleness can pay; without
    it, the search finds the off-policy plans that may still win after the
    penalty. At most :data:`LOCAL_SHARE` of the limit and
    :func:`local_evaluations` evaluations; its plan is judged by its score
    under the penalty.
    """
    limit = min(LOCAL_SHARE * options.time_limit, _remaining(options, started))
    return _quiet_search(problem.without_stale_penalty(), start, options, limit)


def _below_cutoff(problem: Problem, start: Plan, options: SolveOptions) -> Plan:
    """A warm start for a solve cut off at ``options.cutoff``.

    A start above the cutoff is no plan of the cut model (the full
    space of the staleness switch, hinted with an on-policy plan, or the
    fused template): a short local search on ``problem`` itself (at most
    :data:`LOCAL_SHARE` of the solve's limit and :func:`local_evaluations`
    evaluations) looks for one below it, which CP-SAT then starts from.
    """
    if options.cutoff is None or problem.simulator.evaluate(start).score <= options.cutoff:
        return start
    return _quiet_search(problem, start, options, LOCAL_SHARE * options.time_limit)


def _quiet_search(space: Problem, start: Plan, options: SolveOptions, time_limit: float) -> Plan:
    """A short local search on ``space`` (at most :func:`local_evaluations` evaluations).

    Its progress is not shown: its scores are ``space``'s, not the solve's.
    """
    quiet = dataclasses.replace(options, progress=SilentProgress())
    evaluations = local_evaluations(space)
    plan, _ = improve(space, start, quiet, time_limit, evaluations)
    return plan


def _within(problem: Problem, plan: Plan) -> Plan:
    """``plan``, or its placement at staleness 0 when its staleness is outside ``problem``'s."""
    candidates = problem.instance.optimizer.staleness_candidates
    if all(value in candidates[model] for model, value in plan.staleness):
        return plan
    return Plan(plan.placements, tuple((model, 0) for model, _ in plan.staleness))


def merge_templates(first: dict | None, second: dict | None) -> dict | None:
    """Per template, the better plan (smaller score) and the larger bound of two summaries."""
    if first is None or second is None:
        return first if second is None else second
    merged = {}
    for template in {**first, **second}:
        a, b = first.get(template), second.get(template)
        if a is None or b is None:
            merged[template] = dict(a or b)
            continue
        better = (
            a
            if b["score_s"] is None or (a["score_s"] is not None and a["score_s"] <= b["score_s"])
            else b
        )
        bounds = [x["bound_s"] for x in (a, b) if x["bound_s"] is not None]
        merged[template] = {**better, "bound_s": max(bounds) if bounds else None}
    return merged


def _remaining(options: SolveOptions, started: float) -> float:
    """Seconds left of the solve's time limit (at least 0)."""
    return max(0.0, options.time_limit - (time.perf_counter() - started))
