"""The speed-up section of ``compare``'s summary: the best plans over each baseline.

Per instance, the best plan is the smallest median step time of the suite's
non-baseline solvers (docs/benchmarks.md); its speed-up over a baseline is
the baseline's median step time over it (> 1: the best plan is faster). The
geometric mean runs over the instances where both have a plan.
"""

from __future__ import annotations

import math
import statistics

#: The baseline solvers, in the order the section's columns take them.
BASELINE_SOLVERS = ("greedy", "concurrent", "split")


def geometric_mean(values: list[float]) -> float | None:
    """``exp(mean(log v))``, or None for no values."""
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def best_steps(
    table: dict[tuple[str, str], dict], instances: list[str], solvers: list[str]
) -> dict[str, float]:
    """Per instance, the smallest median step time of ``solvers`` (instances with a plan)."""
    best = {}
    for instance in instances:
        steps = [
            table[(instance, s)]["step_time"]
            for s in solvers
            if (instance, s) in table and table[(instance, s)]["step_time"] is not None
        ]
        if steps:
            best[instance] = min(steps)
    return best


def speedups(
    table: dict[tuple[str, str], dict], instances: list[str], solvers: list[str]
) -> dict[str, dict[str, float]]:
    """``{baseline: {instance: baseline step / best step}}`` over the suite's baselines."""
    baselines = [b for b in BASELINE_SOLVERS if b in solvers]
    others = [s for s in solvers if s not in BASELINE_SOLVERS] or solvers
    best = best_steps(table, instances, others)
    result: dict[str, dict[str, float]] = {}
    for baseline in baselines:
        own = best_steps(table, instances, [baseline])
        result[baseline] = {i: own[i] / best[i] for i in instances if i in own and i in best}
    return result


def speedup_section(
    table: dict[tuple[str, str], dict], instances: list[str], solvers: list[str]
) -> list[str]:
    """The summary's "Speed-up over the baselines" lines (none without a baseline solver)."""
    found = speedups(table, instances, solvers)
    if not found:
        return []
    baselines = list(found)
    lines = [
        "",
        "## Speed-up over the baselines",
        "",
        "The best plan (smallest median step time of the solvers other than "
        f"{', '.join(BASELINE_SOLVERS)}) against each baseline's: its step time over the best "
        "plan's (1.25x: the baseline takes 1.25 times the best plan's step time), and, in the "
        "last row, "
        "the geometric mean over the instances where both have a plan (their count in "
        "brackets).",
        "",
        "| instance | " + " | ".join(baselines) + " |",
        "|---|" + "---|" * len(baselines),
    ]
    for instance in instances:
        cells = [found[b].get(instance) for b in baselines]
        lines.append(
            f"| {instance} | " + " | ".join("—" if c is None else f"{c:.3f}x" for c in cells) + " |"
        )
    means = [geometric_mean(list(found[b].values())) for b in baselines]
    lines.append(
        "| **geometric mean** | "
        + " | ".join(
            "—" if m is None else f"**{m:.3f}x** ({len(found[b])})"
            for m, b in zip(means, baselines, strict=True)
        )
        + " |"
    )
    return lines
