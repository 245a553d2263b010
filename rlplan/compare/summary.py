"""Gap tables, the Dolan–Moré performance profile and the gap-over-time plot."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import TYPE_CHECKING

from rlplan.compare.speedup import speedup_section
from rlplan.solvers.result import OPTIMALITY_TOLERANCE

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Two step times within this relative difference count as a tie (a shared win):
#: the rounding tolerance under which a plan is reported OPTIMAL, so every
#: solver whose plan is that close to the best shares the win.
TIE = OPTIMALITY_TOLERANCE


def best_bounds(records: list[dict]) -> dict[str, float]:
    """Best (largest) proven makespan bound per instance over every solver and repeat."""
    bounds: dict[str, float] = {}
    for record in records:
        bound = record.get("bound_makespan_s")
        if bound is not None:
            bounds[record["instance"]] = max(bounds.get(record["instance"], 0.0), bound)
    return bounds


def fill_gaps(records: list[dict]) -> list[dict]:
    """Set ``gap_to_best_bound`` = (makespan - best bound) / makespan where there is a plan."""
    bounds = best_bounds(records)
    for record in records:
        makespan, bound = record.get("makespan_s"), bounds.get(record["instance"])
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
        steps = [r["step_time_s"] for r in rows if r.get("step_time_s") is not None]
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
                r["makespan_s"] / r["step_time_s"]
                for r in records
                if r["instance"] == instance and r.get("step_time_s")
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
        f"found a plan. Wins: instances where its step time is the best, or within the "
        f"rounding tolerance ({TIE:.2%}) of it (ties shared).",
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
    lines += speedup_section(table, instances, solvers)
    return "\n".join(lines) + "\n"


#: Marker and line style of the i-th solver in the plots (cycled).
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_LINESTYLES = ("-", "--", "-.", ":")

#: Gaps below this many percent are drawn on a linear scale (symlog's linthresh).
GAP_LINEAR_BELOW_PERCENT = 1e-3


def _solver_styles(solvers: list[str]) -> dict[str, dict]:
    """Line and marker style per solver so that coinciding curves stay visible.

    Earlier solvers get wider lines and larger hollow markers and sit below
    later ones: where two curves coincide, the later curve is drawn inside the
    earlier one and both remain visible.
    """
    count = len(solvers)
    return {
        solver: {
            "marker": _MARKERS[index % len(_MARKERS)],
            "linestyle": _LINESTYLES[index % len(_LINESTYLES)],
            "linewidth": 1.2 + 1.2 * (count - 1 - index),
            "markersize": 5.0 + 3.0 * (count - 1 - index),
            "markerfacecolor": "none",
            "markeredgewidth": 1.3,
            "zorder": 2 + index,
        }
        for index, solver in enumerate(solvers)
    }


def _new_figure() -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8.5, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _outside_legend(axes: Axes) -> None:
    """The legend to the right of the axes, clear of every curve."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def performance_profile_figure(records: list[dict], solvers: list[str]) -> Figure:
    """Dolan–Moré profile: fraction of instances a solver solves within τ of the best step time.

    Parameters
    ----------
    records
        Benchmark records (one per cell and repeat).
    solvers
        Solvers to draw, in legend order.

    Returns
    -------
    matplotlib.figure.Figure
        One step curve per solver with markers at its breakpoints; solvers
        whose curves coincide stay visible (see :func:`_solver_styles`); the
        legend sits outside the axes.
    """
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
    styles = _solver_styles(solvers)
    figure, axes = _new_figure()
    for solver in solvers:
        values = sorted(ratios[solver])
        if not values:
            continue
        taus = [1.0] + [v for v in values if math.isfinite(v)] + [top]
        fractions = [sum(1 for v in values if v <= tau) / len(values) for tau in taus]
        axes.step(taus, fractions, where="post", label=solver, clip_on=False, **styles[solver])
    axes.set_xlim(1.0, top)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("τ (step time / best step time)")
    axes.set_ylabel("fraction of instances within τ")
    axes.set_title("Performance profile (Dolan–Moré)")
    _outside_legend(axes)
    return figure


def write_performance_profile(records: list[dict], solvers: list[str], path: str) -> None:
    """Save :func:`performance_profile_figure` as a PNG to ``path``."""
    performance_profile_figure(records, solvers).savefig(path, dpi=110, format="png")


def gap_over_time_figure(records: list[dict], solvers: list[str], time_limit: float) -> Figure:
    """Mean gap to the best bound over time per solver (100% before a solver's first plan).

    Parameters
    ----------
    records
        Benchmark records with their incumbent ``history``.
    solvers
        Solvers to draw, in legend order.
    time_limit
        Right end of the (logarithmic) time axis, seconds.

    Returns
    -------
    matplotlib.figure.Figure
        The gap in percent on a symmetric-log axis: linear below
        :data:`GAP_LINEAR_BELOW_PERCENT` (so 0 is on the axis), logarithmic
        above, which keeps a gap of 0.002% clear of 0; the legend sits
        outside the axes.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    bounds = best_bounds(records)
    low = min(0.01, time_limit / 100)
    grid = [low * (time_limit / low) ** (i / 200) for i in range(201)]
    styles = _solver_styles(solvers)
    figure, axes = _new_figure()
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
            curve.append(100.0 * statistics.fmean(gaps))
        axes.step(
            grid, curve, where="post", label=solver, markevery=20, clip_on=False, **styles[solver]
        )
    axes.set_xscale("log")
    axes.set_yscale("symlog", linthresh=GAP_LINEAR_BELOW_PERCENT, linscale=0.5)
    ticks = [0.0] + [10.0**e for e in range(-3, 3)]
    axes.set_yticks(ticks)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}%"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.set_ylim(0, 100 * 1.3)
    axes.set_xlabel("time (s, log scale)")
    axes.set_ylabel("mean gap to the best bound (symlog)")
    axes.set_title("Gap over time (no plan yet counts as 100%)")
    _outside_legend(axes)
    return figure


def write_gap_over_time(
    records: list[dict], solvers: list[str], time_limit: float, path: str
) -> None:
    """Save :func:`gap_over_time_figure` as a PNG to ``path``."""
    gap_over_time_figure(records, solvers, time_limit).savefig(path, dpi=110, format="png")
