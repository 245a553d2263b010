"""Gap tables, the Dolan–Moré performance profile and the gap-over-time plot."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

#: Two step times within this relative difference count as a tie (a shared win).
TIE = 1e-9


def best_bounds(records: list[dict]) -> dict[str, float]:
    """Best (largest) proven makespan bound per instance over every solver and repeat."""
    bounds: dict[str, float] = {}
    for record in records:
        if record.get("bound") is not None:
            bounds[record["instance"]] = max(bounds.get(record["instance"], 0.0), record["bound"])
    return bounds


def fill_gaps(records: list[dict]) -> list[dict]:
    """Set ``gap_to_best_bound`` = (makespan - best bound) / makespan where there is a plan."""
    bounds = best_bounds(records)
    for record in records:
        makespan, bound = record.get("makespan"), bounds.get(record["instance"])
        record["gap_to_best_bound"] = (
            max(0.0, (makespan - bound) / makespan) if makespan and bound is not None else None
        )
    return records


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cell_table(records: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (instance, solver): median step time, median gap, proved optimal in any repeat."""
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records:
        grouped[(record["instance"], record["solver"])].append(record)
    table = {}
    for key, rows in grouped.items():
        steps = [r["step_time"] for r in rows if r.get("step_time") is not None]
        gaps = [r["gap_to_best_bound"] for r in rows if r.get("gap_to_best_bound") is not None]
        table[key] = {
            "step_time": _median(steps),
            "gap": _median(gaps),
            "optimal": any(r["status"] == "OPTIMAL" for r in rows),
            "wall": _median([r["wall_time_s"] for r in rows if r.get("wall_time_s") is not None]),
            "runs": len(rows),
            "with_plan": len(steps),
        }
    return table


def render_summary(records: list[dict], solvers: list[str], time_limit: float) -> str:
    """The ``summary.md`` document."""
    fill_gaps(records)
    table = cell_table(records)
    instances = sorted(
        {r["instance"] for r in records}, key=lambda n: [r["instance"] for r in records].index(n)
    )
    bounds = best_bounds(records)
    lines = [
        "# Benchmark summary",
        "",
        f"{len(instances)} instances, solvers {', '.join(solvers)}, {time_limit:g} s per cell. "
        "Step times are simulated; gaps are to the best lower bound any solver proved on the "
        "instance, `(makespan - bound) / makespan`, the median over repeats; `*` marks a "
        "proven optimum (over the plan space, within the bound shown); `—` no plan.",
        "",
        "## Per instance",
        "",
        "| instance | best step time (s) | best bound (s/step) | " + " | ".join(solvers) + " |",
        "|---|---|---|" + "---|" * len(solvers),
    ]
    for instance in instances:
        steps = [table[(instance, s)]["step_time"] for s in solvers if (instance, s) in table]
        steps = [s for s in steps if s is not None]
        best_step = min(steps) if steps else None
        k = next(
            (
                r["makespan"] / r["step_time"]
                for r in records
                if r["instance"] == instance and r.get("step_time")
            ),
            None,
        )
        bound = bounds.get(instance)
        cells = []
        for solver in solvers:
            cell = table.get((instance, solver))
            if cell is None or cell["gap"] is None:
                cells.append("—")
            else:
                cells.append(f"{cell['gap']:.3%}{'*' if cell['optimal'] else ''}")
        lines.append(
            f"| {instance} | {'—' if best_step is None else f'{best_step:.4f}'} | "
            f"{'—' if bound is None or k is None else f'{bound / k:.4f}'} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "## Per solver",
        "",
        "Geometric-mean gap: `exp(mean(log(1 + gap))) - 1` over the instances where the solver "
        "found a plan. Wins: instances where its step time is the best (ties shared).",
        "",
        "| solver | geometric-mean gap | instances with a plan | wins | proved optimal "
        "| median wall time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for solver in solvers:
        gaps, wins, optimal, walls, planned = [], 0, 0, [], 0
        for instance in instances:
            cell = table.get((instance, solver))
            if cell is None:
                continue
            if cell["wall"] is not None:
                walls.append(cell["wall"])
            optimal += cell["optimal"]
            if cell["step_time"] is None:
                continue
            planned += 1
            if cell["gap"] is not None:
                gaps.append(cell["gap"])
            best = min(
                table[(instance, s)]["step_time"]
                for s in solvers
                if (instance, s) in table and table[(instance, s)]["step_time"] is not None
            )
            wins += cell["step_time"] <= best * (1 + TIE)
        geomean = math.exp(statistics.fmean(math.log1p(g) for g in gaps)) - 1 if gaps else None
        shown = "—" if geomean is None else f"{geomean:.3%}"
        lines.append(
            f"| {solver} | {shown} | {planned}/{len(instances)} | "
            f"{wins} | {optimal} | {'—' if not walls else f'{statistics.median(walls):.2f}'} |"
        )
    return "\n".join(lines) + "\n"


def write_performance_profile(records: list[dict], solvers: list[str], path: str) -> None:
    """Dolan–Moré profile: fraction of instances a solver solves within τ of the best step time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = cell_table(records)
    instances = sorted({r["instance"] for r in records})
    ratios: dict[str, list[float]] = {s: [] for s in solvers}
    for instance in instances:
        steps = {s: table.get((instance, s), {}).get("step_time") for s in solvers}
        known = [v for v in steps.values() if v is not None]
        if not known:
            continue
        best = min(known)
        for solver, value in steps.items():
            ratios[solver].append(math.inf if value is None else value / best)
    finite = [r for values in ratios.values() for r in values if math.isfinite(r)]
    top = max([*finite, 1.0]) * 1.05 + 1e-6
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for solver in solvers:
        values = sorted(ratios[solver])
        if not values:
            continue
        taus = [1.0] + [v for v in values if math.isfinite(v)] + [top]
        fractions = [sum(1 for v in values if v <= tau) / len(values) for tau in taus]
        axes.step(taus, fractions, where="post", label=solver)
    axes.set_xlim(1.0, top)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("τ (step time / best step time)")
    axes.set_ylabel("fraction of instances within τ")
    axes.set_title("Performance profile (Dolan–Moré)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_gap_over_time(
    records: list[dict], solvers: list[str], time_limit: float, path: str
) -> None:
    """Mean gap to the best bound over time per solver (100% before a solver's first plan)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bounds = best_bounds(records)
    low = min(0.01, time_limit / 100)
    grid = [low * (time_limit / low) ** (i / 200) for i in range(201)]
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for solver in solvers:
        rows = [r for r in records if r["solver"] == solver and r["instance"] in bounds]
        if not rows:
            continue
        curve = []
        for t in grid:
            gaps = []
            for row in rows:
                seen = [best for when, best in row.get("history", []) if when <= t]
                if not seen:
                    gaps.append(1.0)
                else:
                    best = min(seen)
                    gaps.append(max(0.0, (best - bounds[row["instance"]]) / best))
            curve.append(statistics.fmean(gaps))
        axes.step(grid, curve, where="post", label=solver)
    axes.set_xscale("log")
    axes.set_xlabel("time (s, log scale)")
    axes.set_ylabel("mean gap to the best bound")
    axes.set_ylim(0, 1.02)
    axes.set_title("Gap over time (no plan yet counts as 100%)")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
