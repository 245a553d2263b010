"""The plots and ``report.html`` of the pool-mix form of ``pareto``.

``frontier.png`` draws one marker per mix: step time against the mix's
hourly price (left) and against its cost per step (right). Circles are
homogeneous mixes (one GPU type), diamonds mixed ones (pools); filled
markers are proven optimal, hollow ones are not, small grey ones are
dominated; the frontier is joined by a line on the right; mixes without a
plan are red crosses above the data. ``bounds.png`` and the table give every
mix's status, bound and gap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlplan.compare.explore_plots import bounds_figure, save
from rlplan.outputs.files import OutputBundle
from rlplan.outputs.html_page import HtmlReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_KINDS = {"homogeneous": ("o", "#3465a4"), "mixed": ("D", "#f57900")}
_PROOF = (
    "Every number comes from the exact simulator. OPTIMAL means the simulated step time is "
    "within the formulation's rounding tolerance of a proven lower bound over the plan space "
    "of that mix: such a frontier point is a proven frontier point. Other points carry their "
    "bound and gap. The bound and the gap are about the score, the objective every solver "
    "minimises: the step time, times 1 + lambda_stale for an off-policy plan, so an "
    "off-policy point's bound may exceed its step time."
)


def _mix_panel(axes: Axes, rows: Sequence[dict], field: str, label: str) -> None:
    planned = [r for r in rows if r.get("step_time_s") is not None]
    front = sorted((r for r in planned if r.get("dominated") is False), key=lambda r: r[field])
    if len(front) > 1:
        axes.plot(
            [r[field] for r in front], [r["step_time_s"] for r in front], color="0.3", zorder=2
        )
    for row in planned:
        marker, colour = _KINDS[row["kind"]]
        dominated = row.get("dominated") is True
        axes.scatter(
            [row[field]],
            [row["step_time_s"]],
            marker=marker,
            s=36 if dominated else 80,
            facecolors=colour if row["status"] == "OPTIMAL" else "white",
            edgecolors="0.6" if dominated else colour,
            linewidths=1.6,
            alpha=0.55 if dominated else 1.0,
            zorder=3,
        )
        axes.annotate(
            row["mix"],
            (row[field], row["step_time_s"]),
            textcoords="offset points",
            xytext=(6, 4),
            fontsize=7,
            color="0.5" if dominated else "0.1",
        )
    if planned:
        top = max(r["step_time_s"] for r in planned) * 1.08
        for row in rows:
            if row.get("step_time_s") is None and row.get(field) is not None:
                axes.scatter([row[field]], [top], marker="x", color="#cc0000", s=60, zorder=3)
                axes.annotate(
                    f"{row['mix']}: {row['status'].lower()}",
                    (row[field], top),
                    textcoords="offset points",
                    xytext=(0, 7),
                    ha="center",
                    fontsize=7,
                    color="#cc0000",
                )
    else:
        axes.text(0.5, 0.5, "no mix has a plan", transform=axes.transAxes, ha="center")
    axes.margins(x=0.15, y=0.1)  # room for the mix labels
    axes.set_xlabel(label)
    axes.set_ylabel("step time (s, simulated)")
    axes.grid(True, alpha=0.3)


def mix_frontier_figure(rows: Sequence[dict]) -> Figure:
    """Step time against hourly price and against cost per step, one marker per mix.

    Parameters
    ----------
    rows
        Parsed rows of the mix form's ``pareto.csv``, dominance marked.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    figure = Figure(figsize=(13, 5), layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
    _mix_panel(left, rows, "price_per_hour", "price per hour (currency units)")
    left.set_title("Step time against the mix's hourly price")
    _mix_panel(right, rows, "cost_per_step", "cost per step (currency units)")
    right.set_title("Step time against cost per step (line: frontier)")
    handles = [
        Line2D([], [], marker=m, linestyle="", color=c, markerfacecolor=c, label=kind)
        for kind, (m, c) in _KINDS.items()
    ]
    handles += [
        Line2D([], [], marker="o", linestyle="", color="0.2", label="filled: proven optimal"),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color="0.2",
            markerfacecolor="white",
            label="hollow: not proven",
        ),
        Line2D([], [], marker="o", linestyle="", color="0.6", alpha=0.55, label="grey: dominated"),
        Line2D([], [], marker="x", linestyle="", color="#cc0000", label="no plan"),
    ]
    right.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    figure.suptitle("Pareto frontier by pool mix")
    return figure


def _mix_table(report: HtmlReport, rows: list[dict[str, Any]]) -> None:
    report.table(
        (
            "mix",
            "kind",
            "GPUs",
            "shapes R×N×G",
            "price per hour",
            "status",
            "step time (s)",
            "score (s/step)",
            "bound (s/step)",
            "gap",
            "cost per step",
            "frontier",
            "note",
        ),
        [
            [
                row["mix"],
                row["kind"],
                row["gpus"],
                row["shapes"].replace("x", "×"),
                row["price_per_hour"],
                row["status"],
                row.get("step_time_s"),
                row.get("score_step_s"),
                row.get("bound_step_s"),
                None if row.get("gap") is None else f"{100 * row['gap']:.3f}%",
                row.get("cost_per_step"),
                "no plan"
                if row.get("dominated") is None
                else (f"dominated by {row['dominated_by']}" if row["dominated"] else "yes"),
                row.get("message") or "",
            ]
            for row in rows
        ],
        muted=[row.get("dominated") is not False for row in rows],
    )


def write_mix_outputs(
    out: str, instance: str, rows: list[dict[str, Any]], budget: str
) -> list[str]:
    """Write ``frontier.png``, ``bounds.png`` and ``report.html`` of the mixes into ``out``.

    Parameters
    ----------
    out
        The output folder (``pareto.csv`` is already there).
    instance
        The instance file, named in the report.
    rows
        Parsed rows with dominance marked.
    budget
        The budget in words (:meth:`rlplan.compare.pareto_mix.MixBudget.words`).

    Returns
    -------
    list[str]
        The paths written.
    """
    name = os.path.splitext(os.path.basename(instance))[0]
    with OutputBundle(out) as bundle:
        bundle.write_with("frontier.png", lambda p: save(mix_frontier_figure(rows), p))
        labelled = [{**row, "label": row["mix"]} for row in rows]
        title = "Step time and proven bound per mix"
        bundle.write_with("bounds.png", lambda p: save(bounds_figure(labelled, title), p))
        report = HtmlReport(f"Pareto frontier by pool mix: {name}")
        front = [r for r in rows if r.get("dominated") is False]
        proven = [r for r in front if r["status"] == "OPTIMAL"]
        mixed = [r for r in rows if r["kind"] == "mixed"]
        report.paragraph(
            f"{len(rows)} maximal mixes at {budget} ({len(rows) - len(mixed)} homogeneous, "
            f"{len(mixed)} mixed) solved with auto; {len(front)} on the frontier, "
            f"{len(proven)} of them proven optimal."
        )
        report.paragraph(
            "A mix is whole nodes of each of its GPU types; it fits the budget and no type of it "
            "could grow by its next node count. Cost per step = price per hour × step time (s) / "
            "3600, in the currency of the prices. Several types are pools joined by the "
            "inter-pool link.",
            note=True,
        )
        report.paragraph(_PROOF, note=True)
        report.heading("Frontier by mix")
        report.figure_file(
            bundle.path("frontier.png"),
            "Step time against hourly price and against cost per step; circles homogeneous, "
            "diamonds mixed; filled markers proven optimal, hollow ones not, grey dominated.",
        )
        report.heading("Mixes")
        _mix_table(report, rows)
        report.heading("Bounds")
        report.figure_file(
            bundle.path("bounds.png"),
            "Simulated step time (light) and proven lower bound (dark) of every mix.",
        )
        bundle.write_text("report.html", report.render())
        return bundle.commit()
