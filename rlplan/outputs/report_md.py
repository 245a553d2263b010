"""The human-readable ``report.md`` of a solve."""

from __future__ import annotations

from rlplan.outputs.cost import cost_rows
from rlplan.outputs.framework_space import framework_space_section
from rlplan.outputs.pool_groups import PoolSpan, pool_memory, pool_spans, span_of
from rlplan.outputs.time_parts_section import time_parts_markdown, time_parts_section
from rlplan.outputs.value_section import value_markdown
from rlplan.outputs.vocabulary import framework_markdown, framework_view, reward_rule_view
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.schema.geometry import plan_space_note
from rlplan.rpeg.schema.pools import cluster_words
from rlplan.solvers.result import Result
from rlplan.solvers.staleness import describe_staleness


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} s"


def summary_line(problem: Problem, result: Result) -> str:
    """The report's first line: instance, status, step time, bound, gap and GPU count.

    Returns
    -------
    str
        A level-1 Markdown heading, e.g. ``# tiny_ppo_2gpu — OPTIMAL: step time
        1.2345 s, bound 1.2345 s/step, gap 0.0000%, 2 GPUs (exhaustive)``.
    """
    instance = problem.instance
    parts = [
        "no plan" if result.step_time is None else f"step time {result.step_time:.4f} s",
        "no bound"
        if result.bound is None
        else f"bound {result.bound / instance.k_eval:.4f} s/step",
    ]
    if result.template is not None and result.lambda_ac is not None:
        parts.insert(1, f"{result.template} score {result.score_step:.4f} s")
    elif result.score_step is not None and result.score_factor != 1:
        parts.insert(1, f"score {result.score_step:.4f} s")
    if result.gap is not None:
        parts.append(f"gap {result.gap:.4%}")
    parts.append(f"{instance.num_gpus} GPUs")
    return f"# {instance.name} — {result.status.value}: {', '.join(parts)} ({result.solver})"


#: Trace event kinds a colocated plan pays between and around its computes.
COLOCATION_KINDS = ("wake", "sleep", "onload", "offload", "refit")


def colocation_seconds(trace: Trace) -> list[tuple[str, str, float]]:
    """(vertex, kind, seconds per step) of the wake, sleep, onload, offload and refit events.

    In template order of first appearance, then in the order of
    :data:`COLOCATION_KINDS`; empty when the plan pays none of them.
    """
    totals: dict[tuple[str, str], float] = {}
    for event in trace.events:
        if event.kind in COLOCATION_KINDS:
            key = (event.vertex, event.kind)
            totals[key] = totals.get(key, 0.0) + event.end - event.start
    order = {kind: index for index, kind in enumerate(COLOCATION_KINDS)}
    vertices = list(dict.fromkeys(event.vertex for event in trace.events))
    keys = sorted(totals, key=lambda key: (vertices.index(key[0]), order[key[1]]))
    return [(vertex, kind, totals[(vertex, kind)] / trace.k_eval) for vertex, kind in keys]


def memory_rows(peaks: tuple[float, ...] | list[float], first: int = 0) -> list[str]:
    """Rows of the per-GPU memory table, consecutive GPUs with the same shown peak merged.

    Parameters
    ----------
    peaks
        Peak memory per GPU in bytes, by flat GPU index from ``first``.
    first
        Flat index of the first GPU of ``peaks`` (a pool's first GPU).

    Returns
    -------
    list[str]
        Markdown rows such as ``| GPUs 0-127 | 61.20 GB |`` or ``| GPU 5 | 3.10 GB |``.
    """
    rows: list[str] = []
    start = 0
    shown = [f"{peak / 1e9:.2f} GB" for peak in peaks]
    for gpu in range(1, len(shown) + 1):
        if gpu < len(shown) and shown[gpu] == shown[start]:
            continue
        low, high = first + start, first + gpu - 1
        gpus = f"GPU {low}" if high == low else f"GPUs {low}-{high}"
        rows.append(f"| {gpus} | {shown[start]} |")
        start = gpu
    return rows


def _rule_rows(problem: Problem) -> list[str]:
    """The placement row of a rule reward's CPU stage (none when the reward is a model)."""
    rule = reward_rule_view(problem)
    if rule is None:
        return []
    workers = f"{rule['workers']} worker{'s' if rule['workers'] > 1 else ''}"
    return [
        f"| {rule['stage']} | none (CPU) | {workers} | — | — | — | — | "
        f"{rule['seconds_per_step']:.4f} s | — | — |"
    ]


def render_report(problem: Problem, result: Result, trace: Trace | None) -> str:
    """Markdown summary of a result: status, figures, placement and framework settings."""
    instance = problem.instance
    lines = [
        summary_line(problem, result),
        "",
        f"{instance.algorithm.upper()} on {cluster_words(instance.pools)}, "
        f"k_eval = {instance.k_eval}.",
        "",
        "| | |",
        "|---|---|",
        f"| status | {result.status.value} |",
        f"| solver | {result.solver} |",
        *_time_lines(result, instance.k_eval),
    ]
    if trace is not None:
        lines += [
            f"| samples/s | {trace.samples_per_s:.3f} |",
            f"| generated tokens/s | {trace.generated_tokens_per_s:.1f} |",
        ]
        costs = cost_rows(instance.pools, result.step_time, instance.workload.sequences)
        lines += [f"| {label} | {value} |" for label, value in costs]
    lines += [f"| {label} | {value} |" for label, value in result.template_rows()]
    staleness = describe_staleness(result)
    if staleness is not None:
        lines.append(f"| staleness | {staleness} |")
    bound = None if result.bound is None else result.bound / instance.k_eval
    gap = "—" if result.gap is None else f"{result.gap:.4%}"
    scored = result.lambda_ac is not None or result.policy is not None
    bounded = "score per step" if scored else "step time"
    lines += [
        f"| lower bound on the {bounded} | {_seconds(bound)} |",
        f"| bound proven by | {result.bound_proven_by or '—'} |",
        f"| why the bound holds | {result.bound_reason or '—'} |",
        f"| gap | {gap} |",
        f"| wall time | {result.wall_time:.2f} s |",
    ]
    if result.message:
        lines += [f"| note | {result.message} |"]
    placement = instance.placement
    lines += [
        "",
        "Optimality, bound and gap are over the plan space: "
        f"{plan_space_note(placement.node_blocks, placement.sliced_blocks)}.",
    ]
    lines += framework_space_markdown(result)
    lines += value_markdown(result)
    if result.plan is None or trace is None:
        return "\n".join(lines) + "\n"
    plan = result.plan
    spans = pool_spans(instance.pools)
    lines += ["", "## Placement", ""]
    if spans:
        lines += [*pool_table(spans), ""]
    lines += placement_rows(problem, plan, spans)
    pins = instance.placement.pin
    lines += ["", "## Staleness", ""]
    lines += [
        f"- {model}: {value}" + (" (pinned)" if pins.staleness_of(model) is not None else "")
        for model, value in plan.staleness
    ]
    lines += time_parts_markdown(time_parts_section(problem, plan))
    lines += ["", *framework_markdown(framework_view(problem, plan, trace))]
    lines += [
        "",
        "## Memory per GPU",
        "",
        *memory_markdown(trace, spans),
    ]
    lines += colocation_markdown(trace)
    return "\n".join(lines) + "\n"


def pool_table(spans: tuple[PoolSpan, ...]) -> list[str]:
    """The table of the pools: GPUs, shape, GPU type and price (docs/outputs.md#gpu-pools)."""
    lines = ["| pool | GPUs | shape | GPU type | price |", "|---|---|---|---|---|"]
    for span in spans:
        gpus = f"gpus {span.first}-{span.end - 1}" if len(span.gpus) > 1 else f"gpu {span.first}"
        lines.append(f"| {span.name} | {gpus} | {span.shape()} | {span.gpu_type} | {span.price} |")
    return lines


def placement_rows(problem: Problem, plan: Plan, spans: tuple[PoolSpan, ...]) -> list[str]:
    """The placement table; with pools a ``pool`` column first and the rows by pool."""
    directory, pins = problem.directory.for_plan(plan), problem.instance.placement.pin
    head = "| pool " if spans else ""
    lines = [
        f"{head}| vertex | block | GPUs | dp | pp | tp | microbatches | run time "
        "| memory per GPU (alone) | pinned |",
        "|---" * (11 if spans else 10) + "|",
    ]
    rows = []
    for index, (vertex, placement) in enumerate(
        zip(directory.template.vertices, plan.placements, strict=True)
    ):
        strategy, block = placement.strategy, placement.block
        candidate = directory.candidate(index, block.extent, strategy)
        pool = f"| {span_of(spans, block.start).name} " if spans else ""
        rows.append(
            (
                block.pool if spans else 0,
                f"{pool}| {vertex.name} | origin {list(block.origin)} extent "
                f"{list(block.extent)} | {block.label()} | {strategy.dp} | {strategy.pp} | "
                f"{strategy.tp} | {strategy.microbatches} | {candidate.time:.4f} s | "
                f"{candidate.memory / 1e9:.2f} GB | "
                f"{', '.join(sorted(pins.pinned_fields(vertex.name))) or '—'} |",
            )
        )
    lines += [row for _, row in sorted(rows, key=lambda item: item[0])]
    cpu = "| — " if spans else ""
    return lines + [cpu + row for row in _rule_rows(problem.for_plan(plan))]


def memory_markdown(trace: Trace, spans: tuple[PoolSpan, ...]) -> list[str]:
    """The memory section's body: one capacity and table, or one of each per pool."""
    if not spans:
        return [
            f"Usable capacity {trace.capacity_bytes / 1e9:.2f} GB per GPU.",
            "",
            "| GPUs | peak |",
            "|---|---|",
            *memory_rows(trace.peak_memory_bytes),
        ]
    lines = []
    for span in spans:
        peak, capacity = pool_memory(trace, span)
        lines += [
            f"### Pool {span.name}",
            "",
            f"Usable capacity {capacity / 1e9:.2f} GB per GPU, peak {peak / 1e9:.2f} GB.",
            "",
            "| GPUs | peak |",
            "|---|---|",
            *memory_rows(trace.peak_memory_bytes[span.first : span.end], span.first),
            "",
        ]
    return lines[:-1]


def framework_space_markdown(result: Result) -> list[str]:
    """The "Framework plan space" section: the framework's best plan beside the full-space one."""
    section = framework_space_section(result)
    if section is None:
        return []
    name = section.rows[0][0]
    lines = ["", "## Framework plan space", "", section.intro, ""]
    lines += ["| " + " | ".join(section.columns) + " |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in section.rows]
    if section.ratio:
        lines += ["", section.ratio]
    if section.needs:
        lines += ["", f"To run the full-space plan, {name} would need:", ""]
        lines += [f"- {need}" for need in section.needs]
        lines += ["", "The rules it breaks:", ""]
        lines += [f"- {line}" for line in section.broken]
    return lines


def colocation_markdown(trace: Trace) -> list[str]:
    """The "Colocation" section: per-step seconds of each switch and the host memory peak."""
    switches = colocation_seconds(trace)
    host = max(trace.host_memory_bytes, default=0.0)
    if not switches and host <= 0:
        return []
    lines = ["", "## Colocation", ""]
    if switches:
        lines += ["| vertex | event | seconds per step |", "|---|---|---|"]
        lines += [f"| {vertex} | {kind} | {seconds:.4f} s |" for vertex, kind, seconds in switches]
        lines.append("")
    lines.append(
        f"Host memory: peak {host / 1e9:.2f} GB of {trace.host_capacity_bytes / 1e9:.2f} GB "
        "per node (offloaded states and sleeping engines)."
    )
    return lines


def _time_lines(result: Result, k: int) -> list[str]:
    """The step time and makespan rows; a steady-state result's period and unrolled step."""
    rows = steady_rows(result, k)
    if rows is None:
        rows = [
            ("step time (simulated)", _seconds(result.step_time)),
            (f"makespan of {k} steps", _seconds(result.makespan)),
        ]
    return [f"| {name} | {value} |" for name, value in rows]


def steady_rows(result: Result, k: int) -> list[tuple[str, str]] | None:
    """A steady-state result's step rows: the period, and makespan(k)/k beside it (else None)."""
    unrolled = result.stats.get("unrolled_step_s")
    if unrolled is None:
        return None
    return [
        ("steady-state step (simulated period)", _seconds(result.step_time)),
        (f"makespan of {k} steps / {k} (with the fill)", _seconds(unrolled)),
    ]
