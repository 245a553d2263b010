"""A framework's best plan beside the full-space optimum, and what the framework would need.

With ``engine.framework`` (or ``--framework``) a solve runs twice on one time
limit, half each (docs/solvers.md#framework-plan-spaces): over the
framework's plan space (the plan written) and over the full plan space (the
reference). The result records both step times, their ratio and the rules the
full-space plan breaks, each with what the framework would need to drop it
(``result.stats["framework"]``), so the summary and the reports can say
"NeMo RL: 93.4 s now; 80.1 s (1.17x) if log-probs could run on other GPUs".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from rlplan.rpeg import interrupts
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks.conform import framework_problems
from rlplan.rpeg.model.frameworks.rules import Framework, Rule, plan_breaks, pool_sizes
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

#: Share of the time limit the framework's own solve gets; the full space gets the rest.
FRAMEWORK_SHARE = 0.5
#: The full-space solve's time limit when the framework's solve left less (the
#: smallest limit a solve takes): it then returns its first plan at once.
MIN_S = 0.001

Solve = Callable[[Problem, SolveOptions], Result]


def full_space(problem: Problem) -> Problem:
    """The problem without its framework's rules (the full plan space)."""
    return problem.with_framework(None)


def unsupported_result(problem: Problem, solver: str) -> Result | None:
    """INFEASIBLE at once when the framework cannot run the instance at all; else None."""
    framework = problem.directory.framework
    rule = None if framework is None else framework.unsupported(problem.instance)
    if rule is None:
        return None
    return Result(
        Status.INFEASIBLE,
        solver,
        k_eval=problem.instance.k_eval,
        message=f"{framework.display} cannot run this instance: {rule.line()}",
        stats={"framework": {"name": framework.name, "unsupported": rule.name}},
    )


def solve_in_framework(solve: Solve, problem: Problem, options: SolveOptions) -> Result:
    """Solve over the framework's plan space and over the full one; the framework's result.

    Without a framework this is ``solve(problem, options)``. Otherwise the
    framework's solve gets :data:`FRAMEWORK_SHARE` of the time limit and the
    full-space solve what is left once its problem is built (at least
    :data:`MIN_S`); the framework's result carries the comparison in
    ``stats["framework"]`` (:func:`comparison`, with ``wall_time_s``: both
    solves together, what the time limit covers).
    """
    framework = problem.directory.framework
    if framework is None:
        return solve(problem, options)
    refused = unsupported_result(problem, "framework")
    if refused is not None:
        return refused
    started = time.perf_counter()
    first = dataclasses.replace(options, time_limit=options.time_limit * FRAMEWORK_SHARE)
    result = solve(problem, first)
    if result.plan is not None and framework_problems(problem.directory, result.plan):
        raise AssertionError("a solver returned a plan outside the framework's plan space")
    if interrupts.requested():
        return result  # a signal ended the search: no second solve
    full = full_space(problem)  # inside the limit: it may build a candidate directory
    remaining = options.time_limit - (time.perf_counter() - started)
    reference = solve(full, dataclasses.replace(options, time_limit=max(MIN_S, remaining)))
    result.stats["framework"] = comparison(framework, full, result, reference)
    # Both solves and the full space's build: what the time limit covers.
    result.stats["framework"]["wall_time_s"] = time.perf_counter() - started
    return result


def comparison(
    framework: Framework, full: Problem, result: Result, reference: Result
) -> dict[str, Any]:
    """What ``result.stats["framework"]`` records: both plans' times and the rules in the way.

    ``speedup`` is the framework plan's step time over the full-space plan's
    (> 1: the framework loses that much); ``needs`` lists, once each, what the
    framework would need to run the full-space plan (the ``need`` of every
    rule it breaks), ``broken`` the rule lines themselves.
    """
    broken: list[Rule] = []
    lines: list[str] = []
    if reference.plan is not None:
        template = full.directory.for_plan(reference.plan).template
        gpus = pool_sizes(full.directory.cluster)
        for rule, line in plan_breaks(framework, template, reference.plan, gpus):
            lines.append(line)
            if rule not in broken:
                broken.append(rule)
    own, best = result.step_time, reference.step_time
    return {
        "name": framework.name,
        "display": framework.display,
        "release": framework.release,
        "rules": len(framework.rules),
        "step_time": own,
        "status": result.status.value,
        "bound_step": result.bound_step,
        "full_space_step_time": best,
        "full_space_status": reference.status.value,
        "full_space_bound_step": reference.bound_step,
        "speedup": own / best if own and best else None,
        "needs": [rule.need for rule in broken],
        "broken": lines,
    }


def framework_words(stats: dict[str, Any]) -> list[str]:
    """The summary lines of a framework comparison (empty when there is none)."""
    facts = stats.get("framework")
    if not facts or "step_time" not in facts:
        return []
    name = facts["display"]
    own, best = facts["step_time"], facts["full_space_step_time"]
    if own is None:
        return [f"{name}: no plan in its plan space"]
    lines = [f"{name} ({facts['release']}): {own:.4f} s per step, best plan it can run"]
    if best is None:
        return lines
    if not facts["needs"]:
        lines.append(f"full space: {best:.4f} s; {name} runs the full-space plan as found")
        return lines
    ratio = facts["speedup"]
    if ratio is not None and ratio < 1.0:
        lines.append(
            f"full space: {best:.4f} s, slower: {name} sets some fields itself (fixed rules), "
            "to values the instance's placement lists leave out"
        )
        return lines
    needs = "; ".join(facts["needs"])
    lines.append(f"full space: {best:.4f} s ({ratio:.2f}x faster) if {needs}")
    return lines
