"""Plots of ``pareto`` and ``sweep``: the frontier, bound bars, the sweep curve, the tornado.

Every figure marks a point proven optimal (status OPTIMAL: its score, the
simulated step time times 1 + lambda_stale for an off-policy plan, is within
the rounding tolerance of the proven bound on the score) with a filled
marker and a point without that proof with a hollow one, so a reader sees
which frontier points are proven.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_DPI = 110
_PROVEN = "OPTIMAL"


def _figure(width: float, height: float, panels: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = [figure.add_subplot(1, panels, i + 1) for i in range(panels)]
    return figure, axes


def _colours(names: Sequence[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return {name: palette(index % 10) for index, name in enumerate(names)}


def _type_names(points: Sequence[dict]) -> list[str]:
    names: list[str] = []
    for point in points:
        if point["gpu_type"] not in names:
            names.append(point["gpu_type"])
    return names


def _gpu_axis(axes: Axes, counts: Sequence[int]) -> None:
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(set(counts)))
    axes.set_xticklabels([str(c) for c in sorted(set(counts))])
    axes.minorticks_off()
    axes.set_xlabel("GPUs")


def _frontier_panel(axes: Axes, points: Sequence[dict], field: str, label: str) -> None:
    colours = _colours(_type_names(points))
    plotted = [p for p in points if p.get(field) is not None]
    for name, colour in colours.items():
        mine = [p for p in plotted if p["gpu_type"] == name]
        front = sorted((p for p in mine if p.get("dominated") is False), key=lambda p: p["gpus"])
        if front:
            axes.plot(
                [p["gpus"] for p in front],
                [p[field] for p in front],
                color=colour,
                linewidth=1.6,
                zorder=2,
            )
        for point in mine:
            dominated = point.get("dominated") is True
            proven = point["status"] == _PROVEN
            axes.scatter(
                [point["gpus"]],
                [point[field]],
                s=36 if dominated else 70,
                marker="o",
                facecolors=colour if proven else "white",
                edgecolors="0.6" if dominated else colour,
                linewidths=1.6,
                alpha=0.55 if dominated else 1.0,
                zorder=3,
            )
    missing = [p for p in points if p.get("step_time_s") is None]
    if plotted:
        top = max(p[field] for p in plotted)
        for point in missing:
            axes.scatter([point["gpus"]], [top * 1.08], marker="x", color="#cc0000", s=60, zorder=3)
            axes.annotate(
                point["status"].lower(),
                (point["gpus"], top * 1.08),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                fontsize=7,
                color="#cc0000",
            )
    else:
        axes.text(0.5, 0.5, "no point has a plan", transform=axes.transAxes, ha="center")
    _gpu_axis(axes, [p["gpus"] for p in points])
    low, high = min(p["gpus"] for p in points), max(p["gpus"] for p in points)
    axes.set_xlim(low / 1.3, high * 1.3)
    axes.set_ylabel(label)
    axes.grid(True, alpha=0.3)


def frontier_figure(points: Sequence[dict]) -> Figure:
    """Step time against GPUs (left) and cost per step against GPUs (right).

    Parameters
    ----------
    points
        Pareto points (rows of ``pareto.csv`` with parsed values).

    Returns
    -------
    matplotlib.figure.Figure
        One colour per GPU type, frontier points joined by a line; filled
        markers are proven optimal, hollow ones are not, small grey ones are
        dominated, red crosses above the data are points without a plan
        (infeasible or none found). Without prices the right panel shows
        samples/s per GPU instead of the cost.
    """
    from matplotlib.lines import Line2D

    figure, (left, right) = _figure(13, 5, panels=2)
    _frontier_panel(left, points, "step_time_s", "step time (s, simulated)")
    left.set_title("Step time")
    if any(p.get("cost_per_step") is not None for p in points):
        _frontier_panel(right, points, "cost_per_step", "cost per step (currency units)")
        right.set_title("Cost per step = GPUs × price × step time / 3600")
    else:
        _frontier_panel(right, points, "samples_per_s_per_gpu", "samples/s per GPU")
        right.set_title("Samples/s per GPU (no prices given)")
    handles = [
        Line2D([], [], color=colour, linewidth=1.6, marker="o", label=f"{name} (line: frontier)")
        for name, colour in _colours(_type_names(points)).items()
    ]
    handles += [
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.2",
            markerfacecolor="0.2",
            label="proven optimal",
        ),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.2",
            markerfacecolor="white",
            label="not proven (gap > tolerance)",
        ),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.6",
            markerfacecolor="white",
            alpha=0.55,
            label="dominated",
        ),
        Line2D([], [], marker="x", linestyle="", color="#cc0000", label="no plan"),
    ]
    right.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    figure.suptitle("Pareto frontier over (GPUs, step time, cost per step)")
    return figure


def bounds_figure(points: Sequence[dict], title: str = "Step time and proven bound") -> Figure:
    """Bars of the simulated step time with the proven lower bound inside each.

    Parameters
    ----------
    points
        Rows with ``label``, ``status``, ``step_time_s``, ``bound_step_s`` and ``gap``.
    title
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        One horizontal bar per point: light = step time, dark = bound; the
        gap is written at the bar's end ("optimal" when proven).
    """
    height = 1.2 + 0.42 * max(1, len(points))
    figure, (axes,) = _figure(9, height)
    labels = [p["label"] for p in points]
    positions = list(range(len(points)))
    steps = [p.get("step_time_s") for p in points]
    bounds = [p.get("bound_step_s") for p in points]
    known = [v for v in steps if v is not None] or [1.0]
    axes.barh(positions, [v or 0 for v in steps], color="#9ec5e8", label="step time (simulated)")
    axes.barh(
        positions, [b or 0 for b in bounds], height=0.4, color="#204a87", label="proven lower bound"
    )
    for position, point in zip(positions, points, strict=True):
        step = point.get("step_time_s")
        if step is None:
            text, x = point["status"].lower(), 0.0
        elif point["status"] == _PROVEN:
            text, x = "optimal", step
        elif point.get("gap") is not None:
            text, x = f"gap {100 * point['gap']:.2f}%", step
        else:
            text, x = "no bound", step
        axes.annotate(
            text, (x, position), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8
        )
    axes.set_yticks(positions)
    axes.set_yticklabels(labels)
    axes.invert_yaxis()
    axes.set_xlim(0, max(known) * 1.22)
    axes.set_xlabel("seconds per step")
    axes.set_title(title)
    axes.legend(loc="lower right", fontsize=8)
    axes.grid(True, axis="x", alpha=0.3)
    return figure


def sweep_figure(rows: Sequence[dict], parameter: str) -> Figure:
    """Step time (and proven bound) at each swept value.

    Parameters
    ----------
    rows
        Rows of ``sweep.csv`` with parsed values.
    parameter
        The swept field's path, for the axis label.

    Returns
    -------
    matplotlib.figure.Figure
        Step time per value (filled markers proven optimal), the bound dashed,
        red crosses where there is no plan.
    """
    figure, (axes,) = _figure(8.5, 4.5)
    planned = [r for r in rows if r.get("step_time_s") is not None]
    axes.plot(
        [r["value"] for r in planned],
        [r["step_time_s"] for r in planned],
        color="#204a87",
        linewidth=1.4,
        label="step time (simulated)",
    )
    for row in planned:
        proven = row["status"] == _PROVEN
        axes.scatter(
            [row["value"]],
            [row["step_time_s"]],
            s=60,
            zorder=3,
            facecolors="#204a87" if proven else "white",
            edgecolors="#204a87",
        )
    bounded = [r for r in rows if r.get("bound_step_s") is not None]
    if bounded:
        axes.plot(
            [r["value"] for r in bounded],
            [r["bound_step_s"] for r in bounded],
            linestyle="--",
            color="0.4",
            label="proven lower bound",
        )
    top = max([r["step_time_s"] for r in planned] or [1.0])
    for row in rows:
        if row.get("step_time_s") is None:
            axes.scatter([row["value"]], [top * 1.05], marker="x", color="#cc0000", s=60)
            axes.annotate(
                row["status"].lower(),
                (row["value"], top * 1.05),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color="#cc0000",
            )
    values = [r["value"] for r in rows if r["value"] > 0]
    if len(values) == len(rows) and values and max(values) / min(values) >= 20:
        axes.set_xscale("log")
    axes.set_xlabel(parameter)
    axes.set_ylabel("step time (s)")
    axes.set_title(f"Sweep of {parameter} (filled: proven optimal)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return figure


def tornado_figure(entries: Sequence[dict], base_step: float) -> Figure:
    """Tornado chart: step-time change when each field moves by -50% and +50%.

    Parameters
    ----------
    entries
        Ranked rows of ``tornado.csv`` (most influential first) with
        ``field``, ``step_low_s``, ``step_high_s``, ``status_low``, ``status_high``.
    base_step
        Step time at the instance's own values (s).

    Returns
    -------
    matplotlib.figure.Figure
        Horizontal bars from the base step time to the step time at -50%
        (blue) and at +50% (orange); a side without a plan is a hatched red bar
        to the edge of the axes labelled with its status.
    """
    height = 1.4 + 0.34 * max(1, len(entries))
    figure, (axes,) = _figure(9, height)
    finite = [
        abs(e[key] - base_step)
        for e in entries
        for key in ("step_low_s", "step_high_s")
        if e.get(key) is not None
    ]
    reach = max([*finite, base_step * 0.05, 1e-9]) * 1.15
    positions = list(range(len(entries)))
    for position, entry in zip(positions, entries, strict=True):
        for key, status_key, colour, side in (
            ("step_low_s", "status_low", "#3465a4", -1),
            ("step_high_s", "status_high", "#f57900", 1),
        ):
            value = entry.get(key)
            if value is None:
                width = side * reach
                axes.barh(
                    position,
                    width,
                    left=base_step,
                    height=0.6,
                    color="white",
                    edgecolor="#cc0000",
                    hatch="///",
                )
                axes.annotate(
                    str(entry.get(status_key) or "no plan").lower(),
                    (base_step + width, position),
                    ha="right" if side < 0 else "left",
                    va="center",
                    fontsize=7,
                    color="#cc0000",
                )
            else:
                axes.barh(position, value - base_step, left=base_step, height=0.6, color=colour)
    axes.axvline(base_step, color="black", linewidth=1)
    axes.set_yticks(positions)
    axes.set_yticklabels([e["field"] for e in entries])
    axes.invert_yaxis()
    axes.set_xlim(base_step - reach * 1.25, base_step + reach * 1.25)
    axes.set_xlabel(f"step time (s); base {base_step:.4g} s")
    axes.set_title("Sensitivity of the step time to hardware fields (±50%)")
    from matplotlib.patches import Patch

    axes.legend(
        handles=[
            Patch(color="#3465a4", label="field × 0.5"),
            Patch(color="#f57900", label="field × 1.5"),
        ],
        loc="lower right",
        fontsize=8,
    )
    axes.grid(True, axis="x", alpha=0.3)
    if not entries:
        axes.text(0.5, 0.5, "no field to vary", transform=axes.transAxes, ha="center")
    return figure


def save(figure: Figure, path: str) -> None:
    """Save a figure as a PNG."""
    figure.savefig(path, dpi=_DPI, format="png")
