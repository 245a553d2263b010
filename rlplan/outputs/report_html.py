"""The self-contained ``report.html`` of a solve: summary, placement, memory, Gantt, bound."""

from __future__ import annotations

from typing import Any

from rlplan.outputs.cost import cost_rows
from rlplan.outputs.framework_section import framework_section
from rlplan.outputs.framework_space import framework_space_section
from rlplan.outputs.html_page import HtmlReport
from rlplan.outputs.pool_groups import PoolSpan, pool_memory, pool_spans
from rlplan.outputs.report_md import colocation_seconds, steady_rows
from rlplan.outputs.time_parts_section import time_parts_html, time_parts_section
from rlplan.outputs.value_section import COLUMNS, HEADING, INTRO, value_table
from rlplan.outputs.vocabulary import framework_view, reward_rule_view
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.schema.geometry import plan_space_note
from rlplan.rpeg.schema.pools import cluster_words
from rlplan.rpeg.strategy import DIMENSIONS, Dimension, shown_dimensions
from rlplan.solvers.result import Result
from rlplan.solvers.staleness import describe_staleness


def memory_groups(peaks: tuple[float, ...] | list[float], first: int = 0) -> list[tuple[str, str]]:
    """Consecutive GPUs with the same shown peak merged: ``("GPUs 0-7", "61.20 GB")``.

    Parameters
    ----------
    peaks
        Peak memory per GPU in bytes, by flat GPU index from ``first``.
    first
        Flat index of the first GPU of ``peaks`` (a pool's first GPU).
    """
    groups: list[tuple[str, str]] = []
    shown = [f"{peak / 1e9:.2f} GB" for peak in peaks]
    start = 0
    for gpu in range(1, len(shown) + 1):
        if gpu < len(shown) and shown[gpu] == shown[start]:
            continue
        low, high = first + start, first + gpu - 1
        groups.append((f"GPU {low}" if high == low else f"GPUs {low}-{high}", shown[start]))
        start = gpu
    return groups


def render_html_report(
    problem: Problem, result: Result, trace: Trace | None, gantt_png: bytes | None = None
) -> str:
    """The report of a solve as one HTML document (no external references).

    Parameters
    ----------
    problem
        The solved instance.
    result
        The solve's result.
    trace
        The simulated trace of the result's plan (None without a plan).
    gantt_png
        The Gantt chart PNG to embed (None: no figure).

    Returns
    -------
    str
        Sections: summary, bound, placement, staleness, where the time goes,
        framework settings (as report.md has them), memory per GPU,
        colocation, Gantt chart.
    """
    instance = problem.instance
    k = instance.k_eval
    bound_step = None if result.bound is None else result.bound / k
    report = HtmlReport(f"{instance.name}: {result.status.value}")
    report.paragraph(
        f"{instance.algorithm.upper()} on {cluster_words(instance.pools, '×')}, k_eval = {k}."
    )
    report.heading("Summary")
    times = steady_rows(result, k) or [
        ("step time (simulated)", _seconds(result.step_time)),
        (f"makespan of {k} steps", _seconds(result.makespan)),
    ]
    summary = [("status", result.status.value), ("solver", result.solver), *times]
    if trace is not None:
        summary += [
            ("samples/s", f"{trace.samples_per_s:.3f}"),
            ("generated tokens/s", f"{trace.generated_tokens_per_s:.1f}"),
        ]
        summary += cost_rows(instance.pools, result.step_time, instance.workload.sequences)
    summary += result.template_rows()
    staleness = describe_staleness(result)
    if staleness is not None:
        summary.append(("staleness", staleness))
    scored = result.lambda_ac is not None or result.policy is not None
    bounded = "score per step" if scored else "step time"
    summary += [
        (f"lower bound on the {bounded}", _seconds(bound_step)),
        ("bound proven by", result.bound_proven_by or "—"),
        ("why the bound holds", result.bound_reason or "—"),
        ("gap", "—" if result.gap is None else f"{result.gap:.4%}"),
        ("wall time", f"{result.wall_time:.2f} s"),
    ]
    if result.message:
        summary.append(("note", result.message))
    report.pairs(summary)
    _framework_space(report, result)
    _value(report, result)
    report.heading("Bound")
    rows = []
    for template in problem.templates:
        variant = problem.variant(template)
        bounds, factor = variant.bounds, variant.score_factor
        suffix = ""
        if len(problem.templates) > 1:
            suffix = f", {template}" + (f" (score: x {factor:g})" if factor != 1 else "")
        rows += [
            [
                f"compute (all FLOPs at peak on every GPU){suffix}",
                bounds.compute * factor,
                bounds.compute * factor / k,
            ],
            [
                f"critical path (fastest candidates){suffix}",
                bounds.critical_path * factor,
                bounds.critical_path * factor / k,
            ],
            [
                f"area and path (one candidate per vertex: its path and GPU-seconds){suffix}",
                bounds.area_path * factor,
                bounds.area_path * factor / k,
            ],
        ]
    rows.append(["best proven (reported)", result.bound, bound_step])
    report.table(("lower bound", "makespan (s)", "per step (s)"), rows)
    placement = problem.instance.placement
    space = plan_space_note(placement.node_blocks, placement.sliced_blocks)
    report.paragraph(
        "OPTIMAL means the gap (step time − bound) / step time is within the rounding "
        "tolerance of the exact formulation (see the README). Optimality, bound and gap are "
        f"over the plan space: {space}.",
        note=True,
    )
    if result.plan is not None and trace is not None:
        _placement(report, problem, result)
        time_parts_html(report, time_parts_section(problem, result.plan))
        _framework(report, framework_view(problem, result.plan, trace))
        _memory(report, trace, pool_spans(problem.instance.pools))
        _colocation(report, trace)
    if gantt_png is not None:
        report.heading("Gantt chart")
        report.figure(gantt_png, "Runs over GPUs and time (colour: vertex; hatching: step).")
    return report.render()


def _framework(report: HtmlReport, view: dict[str, Any]) -> None:
    """The "Framework settings" section as report.md has it (from the shared builder)."""
    section = framework_section(view)
    report.heading("Framework settings")
    if section.fused:
        report.paragraph(f"Template: fused actor-critic (AC-share): {section.fused}.")
    report.paragraph(section.intro)
    report.table(section.columns, section.rows)
    if section.pin_note:
        report.paragraph(section.pin_note, note=True)
    if section.reward:
        report.paragraph(f"Reward: {section.reward}.")
    for title, entries in section.lists:
        report.paragraph(title)
        report.items(entries)
    report.paragraph("Where to set it:")
    report.table(section.where_columns, section.where_rows, code=True)


def _framework_space(report: HtmlReport, result: Result) -> None:
    """The "Framework plan space" section as report.md has it (from the shared builder)."""
    section = framework_space_section(result)
    if section is None:
        return
    report.heading("Framework plan space")
    report.paragraph(section.intro)
    report.table(section.columns, section.rows)
    if section.ratio:
        report.paragraph(section.ratio)
    if section.needs:
        report.paragraph(f"To run the full-space plan, {section.rows[0][0]} would need:")
        report.items(section.needs)
        report.paragraph("The rules it breaks:")
        report.items(section.broken)


def _value(report: HtmlReport, result: Result) -> None:
    """The "Against the baselines" section as report.md has it (from the shared builder)."""
    rows = value_table(result)
    if not rows:
        return
    report.heading(HEADING)
    report.paragraph(INTRO)
    report.table(COLUMNS, rows)


def _pools(report: HtmlReport, spans: tuple[PoolSpan, ...]) -> None:
    """The table of the pools: GPUs, shape, GPU type and price (docs/outputs.md#gpu-pools)."""
    report.table(
        ("pool", "GPUs", "shape", "GPU type", "price"),
        [
            [span.name, f"{span.first}-{span.end - 1}", span.shape(), span.gpu_type, span.price]
            for span in spans
        ],
    )


def _memory(report: HtmlReport, trace: Trace, spans: tuple[PoolSpan, ...]) -> None:
    """The "Memory per GPU" section: one capacity and table, or one of each per pool."""
    report.heading("Memory per GPU")
    if not spans:
        report.paragraph(f"Usable capacity {trace.capacity_bytes / 1e9:.2f} GB per GPU.")
        report.table(("GPUs", "peak"), [list(g) for g in memory_groups(trace.peak_memory_bytes)])
        return
    for span in spans:
        peak, capacity = pool_memory(trace, span)
        report.heading(f"Pool {span.name}", level=3)
        report.paragraph(
            f"Usable capacity {capacity / 1e9:.2f} GB per GPU, peak {peak / 1e9:.2f} GB."
        )
        peaks = trace.peak_memory_bytes[span.first : span.end]
        report.table(("GPUs", "peak"), [list(g) for g in memory_groups(peaks, span.first)])


def _colocation(report: HtmlReport, trace: Trace) -> None:
    """The "Colocation" section: per-step seconds of each switch and the host memory peak."""
    switches = colocation_seconds(trace)
    host = max(trace.host_memory_bytes, default=0.0)
    if not switches and host <= 0:
        return
    report.heading("Colocation")
    if switches:
        report.table(
            ("vertex", "event", "seconds per step"),
            [[vertex, kind, f"{seconds:.4f} s"] for vertex, kind, seconds in switches],
        )
    report.paragraph(
        f"Host memory: peak {host / 1e9:.2f} GB of {trace.host_capacity_bytes / 1e9:.2f} GB "
        "per node (offloaded states and sleeping engines)."
    )


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} s"


#: Numeric dimensions (counts and fractions) have a column of their own (empty
#: when 0); the others share one: each enum's value, each flag's tag when it is set.
_CHOSEN = tuple(declared for declared in DIMENSIONS if not declared.numeric)


def _counted(plan) -> tuple[Dimension, ...]:
    """The numeric dimensions with a column: those plans always set, and those used here."""
    shown = shown_dimensions(placement.strategy for placement in plan.placements)
    return tuple(declared for declared in shown if declared.numeric)


def _choice_text(declared: Dimension, value: Any) -> str:
    """A dimension's part of the shared column (empty for an unset flag)."""
    if declared.values is bool:
        return declared.tag(value) if value else ""
    return str(value)


def _placement(report: HtmlReport, problem: Problem, result: Result) -> None:
    assert result.plan is not None
    plan, directory = result.plan, problem.directory.for_plan(result.plan)
    pins = problem.instance.placement.pin
    spans = pool_spans(problem.instance.pools)
    counted = _counted(plan)
    rows = []
    for index, (vertex, placement) in enumerate(
        zip(directory.template.vertices, plan.placements, strict=True)
    ):
        strategy = placement.strategy
        candidate = directory.candidate(index, placement.block.extent, strategy)
        pool = [spans[placement.block.pool].name] if spans else []
        rows.append(
            [
                *pool,
                vertex.name,
                placement.block.label(),
                strategy.dp,
                strategy.pp,
                strategy.tp,
                strategy.microbatches,
                *(getattr(strategy, declared.name) or None for declared in counted),
                ", ".join(
                    text
                    for declared in _CHOSEN
                    if (text := _choice_text(declared, getattr(strategy, declared.name)))
                ),
                f"{candidate.time:.4f} s",
                f"{candidate.memory / 1e9:.2f} GB",
                ", ".join(sorted(pins.pinned_fields(vertex.name))) or None,
            ]
        )
    rule = reward_rule_view(problem.for_plan(plan))
    if rule is not None:
        # A CPU stage: no block, strategy or memory; its time per step.
        blank = [None] * (len(counted) + 1)
        where = f"CPU, {rule['workers']} worker{'s' if rule['workers'] > 1 else ''}"
        run_time = f"{rule['seconds_per_step']:.4f} s"
        pool = [None] if spans else []
        rows.append([*pool, rule["stage"], where, None, None, None, None, *blank, run_time])
        rows[-1] += [None, None]
    report.heading("Placement")
    if spans:
        _pools(report, spans)
        # Rows by pool (stable: template order inside a pool), the CPU stage last.
        names = [span.name for span in spans]
        rows.sort(key=lambda row: len(names) if row[0] is None else names.index(row[0]))
    report.table(
        (
            *(["pool"] if spans else []),
            "vertex",
            "block",
            "dp",
            "pp",
            "tp",
            "microbatches",
            *(declared.name for declared in counted),
            ", ".join(declared.name for declared in _CHOSEN if declared.values is not bool),
            "run time",
            "memory per GPU (alone)",
            "pinned",
        ),
        rows,
    )
    report.heading("Staleness")
    report.table(
        ("model", "staleness", "pinned"),
        [[model, value, pins.staleness_of(model) is not None] for model, value in plan.staleness],
    )
