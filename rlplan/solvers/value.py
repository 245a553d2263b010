"""What a solve's best plan gains over the baselines and over a known configuration.

A solve's value lines (docs/outputs.md#against-the-baselines) set the best
plan's step time against each baseline (:data:`BASELINES`: greedy,
concurrent, split), against the framework's default plan under
``--framework`` (:mod:`rlplan.rpeg.search.framework_defaults`) and against
a given plan (``--against PLAN``, or a published run's plan next to its
instance). The baselines the backend already built for its warm start
(``result.stats["baselines"]``, :func:`plan_steps`) are not built again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.search.baselines import concurrent_plan, greedy_plan
from rlplan.rpeg.search.framework_defaults import DEFAULT_PLANS
from rlplan.rpeg.search.split import split_plan
from rlplan.solvers.common import best_over_templates
from rlplan.solvers.result import Result

Build = Callable[[CandidateDirectory, Simulator], Plan | None]

#: The baselines every solve is set against, by name.
BASELINES: dict[str, Build] = {
    "greedy": greedy_plan,
    "concurrent": concurrent_plan,
    "split": split_plan,
}


def step_of(problem: Problem, plan: Plan | None) -> float | None:
    """The simulated step time (s) of ``plan``; None without a plan or when it overflows."""
    if plan is None:
        return None
    evaluation = problem.simulator.evaluate(plan)
    return evaluation.makespan / problem.instance.k_eval if evaluation.feasible else None


def plan_steps(problem: Problem, plans: dict[str, Plan | None]) -> dict[str, float | None]:
    """Each named baseline plan's step time, for ``result.stats["baselines"]``."""
    return {name: step_of(problem, plan) for name, plan in plans.items()}


def baseline_steps(
    problem: Problem, result: Result, deadline: float = math.inf
) -> dict[str, float | None]:
    """The step time of each of :data:`BASELINES` on ``problem`` (None: no plan fits).

    Taken from ``result.stats["baselines"]`` or, for a baseline backend, from
    the result itself when there; the others are built (the concurrent one
    tries no further partition past ``deadline``).
    """
    known = dict(result.stats.get("baselines") or {})
    steps = {}
    for name, build in BASELINES.items():
        if name in known:
            steps[name] = known[name]
        elif result.solver == name:
            steps[name] = result.step_time
        else:
            if build is concurrent_plan:
                build = functools.partial(concurrent_plan, deadline=deadline)
            steps[name] = step_of(problem, best_over_templates(problem, build)[0])
    return steps


def framework_default_step(problem: Problem) -> dict[str, Any] | None:
    """The framework's default plan's entry under ``engine.framework`` (else None)."""
    framework = problem.directory.framework
    if framework is None or framework.unsupported(problem.instance) is not None:
        return None
    plan, _ = best_over_templates(problem, DEFAULT_PLANS[framework.name])
    return {"name": f"{framework.display} default", "step_time": step_of(problem, plan)}


def value_stats(
    problem: Problem,
    result: Result,
    against: list[dict[str, Any]] | None = None,
    deadline: float = math.inf,
) -> dict[str, Any]:
    """``result.stats["value"]``: the baselines' step times and the other configurations'.

    ``against`` holds entries (``name``, ``step_time``, optional ``note``)
    already priced by the caller (a given plan); the framework default comes
    first when there is one.
    """
    others = []
    default = framework_default_step(problem)
    if default is not None:
        others.append(default)
    others.extend(against or [])
    return {"baselines": baseline_steps(problem, result, deadline), "against": others}


def compared(reference: float | None, best: float | None) -> str:
    """``78.1900 s -> 77.7200 s, 0.6 % faster (1.01x)``, or why there is no figure."""
    if reference is None:
        return "no plan fits"
    if best is None:
        return f"{reference:.4f} s -> no plan"
    change = (reference - best) / reference * 100
    if abs(change) < 0.05:
        words = "as fast"
    elif change > 0:
        words = f"{change:.1f} % faster"
    else:
        words = f"{-change:.1f} % slower"
    return f"{reference:.4f} s -> {best:.4f} s, {words} ({reference / best:.2f}x)"


def value_rows(stats: dict[str, Any], best: float | None) -> list[tuple[str, float | None, str]]:
    """(what, its step time, :func:`compared` words) per baseline and configuration."""
    value = stats.get("value")
    if not value:
        return []
    rows = [
        (f"{name} baseline", step, compared(step, best))
        for name, step in value["baselines"].items()
    ]
    for entry in value["against"]:
        name = entry["name"] + (f" ({entry['note']})" if entry.get("note") else "")
        rows.append((name, entry["step_time"], compared(entry["step_time"], best)))
    return rows


def value_lines(stats: dict[str, Any], best: float | None) -> list[str]:
    """The summary's lines: ``greedy baseline 78.1900 s -> 77.7200 s, 0.6 % faster (1.01x)``."""
    return [f"{name} {words}" for name, _, words in value_rows(stats, best)]
