"""The plots and ``report.html`` of ``pareto`` and ``sweep``, written atomically together."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from rlplan.compare.csvlog import csv_text
from rlplan.compare.explore_plots import (
    bounds_figure,
    frontier_figure,
    save,
    sweep_figure,
    tornado_figure,
)
from rlplan.compare.sweep_parameters import SWEEP_COLUMNS, TORNADO_COLUMNS
from rlplan.outputs.files import OutputBundle
from rlplan.outputs.html_page import HtmlReport

if TYPE_CHECKING:
    from rlplan.compare.sweep_parameters import Parameter

_PROOF_NOTE = (
    "Every number comes from the exact simulator. OPTIMAL means the simulated step time is "
    "within the formulation's rounding tolerance of a proven lower bound over the plan space "
    "(the instance's blocks, as placement.node_blocks says, its strategies, microbatch counts "
    "and staleness candidates): such a frontier point is a proven frontier point. Other "
    "points carry their bound and gap."
)


def _label(row: dict[str, Any]) -> str:
    return f"{row['gpu_type']} @ {row['gpus']} GPUs"


def _pareto_table(report: HtmlReport, rows: list[dict[str, Any]]) -> None:
    report.table(
        (
            "GPU type",
            "GPUs",
            "shape R×N×G",
            "status",
            "step time (s)",
            "bound (s/step)",
            "gap",
            "cost per step",
            "samples/s per GPU",
            "frontier",
            "note",
        ),
        [
            [
                row["gpu_type"],
                row["gpus"],
                f"{row['racks']}×{row['nodes_per_rack']}×{row['gpus_per_node']}",
                row["status"],
                row.get("step_time_s"),
                row.get("bound_step_s"),
                None if row.get("gap") is None else f"{100 * row['gap']:.3f}%",
                row.get("cost_per_step"),
                row.get("samples_per_s_per_gpu"),
                "no plan"
                if row.get("dominated") is None
                else (f"dominated by {row['dominated_by']}" if row["dominated"] else "yes"),
                row.get("message") or "",
            ]
            for row in rows
        ],
        muted=[row.get("dominated") is not False for row in rows],
    )


def write_pareto_outputs(out: str, instance: str, rows: list[dict[str, Any]]) -> list[str]:
    """Write ``frontier.png``, ``bounds.png`` and ``report.html`` into ``out``.

    Parameters
    ----------
    out
        The output folder (``pareto.csv`` is already there).
    instance
        The instance file, named in the report.
    rows
        Parsed ``pareto.csv`` rows with dominance marked.

    Returns
    -------
    list[str]
        The paths written.
    """
    name = os.path.splitext(os.path.basename(instance))[0]
    with OutputBundle(out) as bundle:
        bundle.write_with("frontier.png", lambda p: save(frontier_figure(rows), p))
        labelled = [{**row, "label": _label(row)} for row in rows]
        bundle.write_with(
            "bounds.png",
            lambda p: save(bounds_figure(labelled, "Step time and proven bound per point"), p),
        )
        report = HtmlReport(f"Pareto frontier: {name}")
        front = [r for r in rows if r.get("dominated") is False]
        proven = [r for r in front if r["status"] == "OPTIMAL"]
        no_plan = [r for r in rows if r.get("step_time_s") is None]
        report.paragraph(
            f"{len(rows)} points (GPU type × cluster size) solved with auto; "
            f"{len(front)} on the frontier over (GPUs ↓, step time ↓, cost per step ↓), "
            f"{len(proven)} of them proven optimal; {len(no_plan)} without a plan."
        )
        report.paragraph(
            "Cost per step = GPUs × price per GPU-hour × step time (s) / 3600, in the currency "
            "of the prices. Cluster shapes keep the instance's node width.",
            note=True,
        )
        report.paragraph(_PROOF_NOTE, note=True)
        report.heading("Points")
        _pareto_table(report, rows)
        report.heading("Frontier")
        report.figure_file(
            bundle.path("frontier.png"),
            "Step time and cost per step against GPUs; filled markers are proven optimal, "
            "hollow ones are not, grey ones are dominated.",
        )
        report.heading("Bounds")
        report.figure_file(
            bundle.path("bounds.png"),
            "Simulated step time (light) and proven lower bound (dark) of every point.",
        )
        bundle.write_text("report.html", report.render())
        return bundle.commit()


def write_sweep_outputs(
    out: str,
    instance: str,
    parameter: Parameter | None,
    rows: list[dict[str, Any]],
    entries: list[dict[str, Any]],
    base_step: float | None,
    skipped: list[str],
) -> list[str]:
    """Write ``sweep.csv``, ``sweep.png``, ``bounds.png``, ``tornado.csv``, ``tornado.png``
    and ``report.html`` (the sweep's files only with ``--param``, the tornado's
    only with ``--tornado``).

    Returns
    -------
    list[str]
        The paths written.
    """

    name = os.path.splitext(os.path.basename(instance))[0]
    with OutputBundle(out) as bundle:
        report = HtmlReport(f"Sensitivity: {name}")
        report.paragraph(_PROOF_NOTE, note=True)
        if parameter is not None:
            bundle.write_text("sweep.csv", csv_text(SWEEP_COLUMNS, rows))
            bundle.write_with("sweep.png", lambda p: save(sweep_figure(rows, parameter.path), p))
            labelled = [{**row, "label": f"{parameter.path}={row['value']:g}"} for row in rows]
            title = f"Step time and bound: {parameter.path}"
            bundle.write_with("bounds.png", lambda p: save(bounds_figure(labelled, title), p))
            report.heading(f"Sweep of {parameter.path}")
            report.table(
                (
                    "value",
                    "status",
                    "step time (s)",
                    "bound (s/step)",
                    "gap",
                    "change (s)",
                    "plan change from the previous value",
                ),
                [
                    [
                        row["value"],
                        row["status"],
                        row.get("step_time_s"),
                        row.get("bound_step_s"),
                        None if row.get("gap") is None else f"{100 * row['gap']:.3f}%",
                        row.get("step_change_s"),
                        row["plan_change"] + (f" ({row['message']})" if row.get("message") else ""),
                    ]
                    for row in rows
                ],
            )
            report.figure_file(bundle.path("sweep.png"), f"Step time against {parameter.path}.")
            report.figure_file(bundle.path("bounds.png"), "Step time and proven bound per value.")
        if entries and base_step is not None:
            bundle.write_text("tornado.csv", csv_text(TORNADO_COLUMNS, entries))
            bundle.write_with("tornado.png", lambda p: save(tornado_figure(entries, base_step), p))
            report.heading("Tornado: hardware fields at ×0.5 and ×1.5")
            report.paragraph(f"Base step time {base_step:.4f} s.")
            report.table(
                (
                    "rank",
                    "field",
                    "unit",
                    "base",
                    "×0.5 value",
                    "×1.5 value",
                    "step at ×0.5 (s)",
                    "step at ×1.5 (s)",
                    "change at ×0.5 (s)",
                    "change at ×1.5 (s)",
                ),
                [
                    [
                        e["rank"],
                        e["field"],
                        e["unit"],
                        e["base_value"],
                        e["low_value"],
                        e["high_value"],
                        e["step_low_s"] if e["step_low_s"] is not None else e["status_low"],
                        e["step_high_s"] if e["step_high_s"] is not None else e["status_high"],
                        e["change_low_s"],
                        e["change_high_s"],
                    ]
                    for e in entries
                ],
            )
            if skipped:
                report.paragraph(f"Not varied (value 0): {', '.join(skipped)}.", note=True)
            report.figure_file(
                bundle.path("tornado.png"), "Step-time change per hardware field, ranked."
            )
        bundle.write_text("report.html", report.render())
        return bundle.commit()
