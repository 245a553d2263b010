"""Backend ``local``: simulated annealing from the better baseline, then polish."""

from __future__ import annotations

import functools
import math
import random
import time

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks.conform import framework_problems
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.search.annealing import SimulatedAnnealing
from rlplan.rpeg.search.baselines import concurrent_plan, greedy_plan, repair_memory
from rlplan.rpeg.search.sampling import random_plan
from rlplan.rpeg.search.split import split_plan
from rlplan.rpeg.search.stopping import StoppingCriterion
from rlplan.rpeg.templates import FUSED
from rlplan.solvers.common import (
    best_over_templates,
    plan_result,
    template_summary,
    unplaceable_result,
    within_space,
)
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result
from rlplan.solvers.value import plan_steps

#: Seeded random plans tried (each repaired for memory) when neither baseline fits.
SAMPLED_STARTS = 200

#: Share of the search's time the starts race over, in equal parts, before the
#: leading start goes on alone (:func:`improve_from_starts`).
RACE_SHARE = 0.4

#: Share of a solve's time limit after which the concurrent baseline tries no
#: further partition (:func:`best_baseline`); the first one is always tried.
BASELINE_SHARE = 0.15


def sampled_plan(problem: Problem, tries: int = SAMPLED_STARTS, seed: int = 0) -> Plan | None:
    """The first of ``tries`` seeded random plans that fits in memory, once repaired.

    The baselines put generation and training on shared GPUs; where memory
    forbids that (a rollout workspace too large to sit beside the training
    state), a random plan of the space often fits.
    """
    rng = random.Random(seed)
    for _ in range(tries):
        plan = repair_memory(random_plan(problem.directory, rng), problem.simulator)
        if plan is not None:
            return plan
    return None


def baseline_deadline(time_limit: float) -> float:
    """The moment the baselines of a solve of ``time_limit`` seconds starting now stop trying."""
    return time.perf_counter() + BASELINE_SHARE * time_limit


def best_baseline(
    problem: Problem, deadline: float = math.inf, found: dict[str, Plan | None] | None = None
) -> Plan | None:
    """The better (by simulated score) of the greedy and concurrent baselines.

    On an AC-share problem both baselines are built for each template. When
    neither fits in memory, the first seeded random plan that fits
    (:func:`sampled_plan`), or ``None``. The concurrent baseline tries no
    further partition once ``time.perf_counter()`` passes ``deadline``
    (:func:`~rlplan.rpeg.search.baselines.concurrent_plan`), so a solve's
    time limit holds on instances whose memory repair is slow. ``found``, when
    given, receives both baselines' plans by name (None: no plan), for the
    solve's value lines (:mod:`rlplan.solvers.value`).
    """
    concurrent = functools.partial(concurrent_plan, deadline=deadline)
    built = {
        name: best_over_templates(problem, build)[0]
        for name, build in (("greedy", greedy_plan), ("concurrent", concurrent))
    }
    if found is not None:
        found.update(built)
    plans = [plan for plan in built.values() if plan is not None]
    if not plans:
        return sampled_plan(problem)
    return min(plans, key=lambda plan: problem.simulator.evaluate(plan).score)


def improve(
    problem: Problem,
    start: Plan,
    options: SolveOptions,
    time_limit: float,
    max_evaluations: int | None = None,
) -> tuple[Plan, dict]:
    """Run the local search from ``start``; returns the best plan and statistics.

    On an AC-share problem the search switches templates, and
    ``stats["templates"]`` holds :attr:`Result.templates` entries of the best
    plan it saw of each.
    """
    # the stop's clock starts before the search is built, so building counts against
    # the limit (ranking the depth groups' partitions takes 0.7 s on 1,024 GPUs)
    stop = StoppingCriterion(max_evaluations or problem.instance.optimizer.e_max, time_limit)
    switch = len(problem.templates) > 1
    search = SimulatedAnnealing(
        problem.simulator,
        seed=options.seed,
        progress=lambda best, evaluations: options.progress.update(
            best=best, evaluations=evaluations
        ),
        switch_templates=switch,
    )
    outcome = search.run(start, stop)
    stats = outcome.statistics
    templates = {}
    if switch:
        for template in problem.templates:
            state = search.best_by_template.get(template == FUSED)
            templates[template] = template_summary(problem, None if state is None else state.plan)
        # The returned plan is its template's best.
        templates[outcome.plan.template] = template_summary(problem, outcome.plan)
    return outcome.plan, {
        **({"templates": templates} if switch else {}),
        "evaluations": stats.evaluations,
        "polish_evaluations": stats.polish_evaluations,
        "accepted": stats.accepted,
        "improvements": stats.improvements,
        "restarts": stats.restarts,
        "stop_reason": stats.stop_reason,
        "evaluations_per_s": stats.evaluations / max(stop.elapsed, 1e-9),
        "interrupted": stop.interrupted,
    }


def improve_from_starts(
    problem: Problem, starts: list[Plan], options: SolveOptions, time_limit: float
) -> tuple[Plan, dict]:
    """:func:`improve` from each start, then more time for the leader; the best plan.

    A race: each start has an equal part of :data:`RACE_SHARE` of
    ``time_limit``, then the search goes on from the best plan of the start
    that leads (the best by score) with what is left. The statistics are
    those of the run that found the plan, with the evaluations of all runs
    and ``start``, the index of the winning start.
    """
    started = time.perf_counter()
    best: tuple[float, Plan, dict] | None = None
    evaluations = 0
    heat = time_limit * (RACE_SHARE if len(starts) > 1 else 1.0) / len(starts)
    for index, start in enumerate(starts):
        plan, stats = improve(problem, start, options, max(0.0, heat))
        evaluations += stats["evaluations"]
        score = problem.simulator.evaluate(plan).score
        if best is None or score < best[0]:
            best = (score, plan, {**stats, "start": index})
        if stats["interrupted"]:
            break
    assert best is not None
    score, plan, stats = best
    left = time_limit - (time.perf_counter() - started)
    if len(starts) > 1 and not stats["interrupted"] and left > 0:
        more, more_stats = improve(problem, plan, options, left)
        evaluations += more_stats["evaluations"]
        if problem.simulator.evaluate(more).score < score:
            plan, stats = more, {**more_stats, "start": stats["start"]}
    return plan, {**stats, "evaluations": evaluations}


def search_starts(problem: Problem, start: Plan, found: dict[str, Plan | None]) -> list[Plan]:
    """The starts of the search: ``start``, then the split baseline when it fits and differs.

    The baselines put generation and training on shared GPUs; the optimum
    of some instances keeps them apart, a basin the search rarely reaches
    from a shared start (docs/solvers.md#local). ``found`` receives the
    split baseline's plan for the solve's value lines.
    """
    split, _ = best_over_templates(problem, split_plan)
    found["split"] = split
    if split is None or split == start or not fits(problem, split):
        return [start]
    return [start, split]


def fits(problem: Problem, plan: Plan) -> bool:
    """Whether ``plan`` fits in memory and keeps to the framework's rules (if any)."""
    directory = problem.directory.variant(plan.fused)
    if directory.framework is not None and framework_problems(directory, plan):
        return False
    return problem.simulator.evaluate(plan).feasible


def solve(problem: Problem, options: SolveOptions) -> Result:
    """Local search from the better baseline and from the split baseline within
    ``options.time_limit``."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "local", started)
    if infeasible is not None:
        return infeasible
    found: dict[str, Plan | None] = {}
    start = best_baseline(problem, baseline_deadline(options.time_limit), found)
    if start is None:
        return plan_result(
            problem,
            "local",
            None,
            started,
            message="no baseline plan fits in memory to start from" + within_space(problem),
        )
    options.progress.update(best=problem.simulator.evaluate(start).score, bound=problem.score_bound)
    starts = search_starts(problem, start, found)
    remaining = max(0.0, options.time_limit - (time.perf_counter() - started))
    plan, stats = improve_from_starts(problem, starts, options, remaining)
    stats["baselines"] = plan_steps(problem, found)
    message = "interrupted: best plan so far" if stats["interrupted"] else ""
    return plan_result(
        problem,
        "local",
        plan,
        started,
        requested_gap=options.gap,
        stats=stats,
        message=message,
        templates=stats.pop("templates", None),
    )


#: Evaluation budget of the local search that warm-starts the exact backends.
WARM_START_EVALUATIONS = 20_000

#: Largest share of the solve's time limit the warm-start search may take.
WARM_START_SHARE = 0.25


def warm_start_plan(
    problem: Problem, options: SolveOptions, time_limit: float | None = None
) -> Plan | None:
    """The exact backends' start: the better baseline improved by a short local search.

    The search is bounded by :data:`WARM_START_EVALUATIONS` evaluations, so for
    a given seed the exact models built from it are the same from run to run
    whatever the load of the machine, and by ``time_limit`` seconds (default
    :data:`WARM_START_SHARE` of ``options.time_limit``), a safety net that
    leaves the exact backend most of the limit on a large instance.
    """
    start = best_baseline(problem, baseline_deadline(options.time_limit))
    if start is None:
        return None
    budget = min(problem.instance.optimizer.e_max, WARM_START_EVALUATIONS)
    if time_limit is None:
        time_limit = WARM_START_SHARE * options.time_limit
    plan, _ = improve(problem, start, options, time_limit, budget)
    return plan
