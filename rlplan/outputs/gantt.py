"""Gantt chart of a trace: runs over GPUs (rows) and time (columns).

Colour tells the vertex, hatching the step; a run's wake, sleep, onload and
offload (docs/simulator.md) are drawn lighter beside its compute; dotted and
dashed lines mark node and rack boundaries on the GPU axis; with GPU pools a
solid line marks each pool boundary and each pool's name labels its rows
(docs/outputs.md#gpu-pools). The legend sits outside the axes and the
title carries the plan's status and step time. A run is labelled only where its
label fits inside its rectangle without touching another label. CPU stages
(a rule reward, ``reward.rule``) are drawn on a row of their own, ``CPU``,
below the GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlplan.outputs.pool_groups import PoolSpan, pool_spans
from rlplan.rpeg.evaluation.simulator import RUN_KINDS, Trace
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.pools import Pool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    from rlplan.rpeg.evaluation.simulator import Event

#: Hatch of step ``s`` is ``STEP_HATCHES[s % len(STEP_HATCHES)]`` (step 0 plain).
STEP_HATCHES = ("", "///", "\\\\\\", "xxx", "...", "+++", "ooo", "---")

#: Artist ids of the boundary lines (for callers and tests that look for them).
NODE_BOUNDARY, RACK_BOUNDARY = "node-boundary", "rack-boundary"
#: Artist ids of the line between two GPU pools and of a pool's name on the GPU axis.
POOL_BOUNDARY, POOL_LABEL = "pool-boundary", "pool-label"
#: Artist id of the line above the CPU row, and the row's tick label.
CPU_ROW, CPU_LABEL = "cpu-row", "CPU"

#: Opacity of a run's compute and of its wake, sleep, onload and offload parts.
RUN_ALPHA, SWITCH_ALPHA = 0.85, 0.35

#: Most per-GPU ticks on the GPU axis before ticks move to node or rack starts.
_MAX_TICKS = 16

#: Line styles of the node and rack boundaries (on the axes and in the legend).
_NODE_STYLE = {"color": "0.35", "linewidth": 0.6, "linestyle": ":"}
_RACK_STYLE = {"color": "black", "linewidth": 1.4, "linestyle": "--"}
_POOL_STYLE = {"color": "tab:red", "linewidth": 2.0, "linestyle": "-"}


def _boundaries(hardware: Hardware) -> tuple[list[int], list[int]]:
    """Flat GPU indices where a new node (not a new rack) and a new rack begin."""
    num_gpus, per_node, per_rack = (
        hardware.num_gpus,
        hardware.gpus_per_node,
        hardware.gpus_per_rack,
    )
    racks = list(range(per_rack, num_gpus, per_rack))
    nodes = [g for g in range(per_node, num_gpus, per_node) if g % per_rack]
    return nodes, racks


def _spans(event: Event, num_gpus: int) -> list[tuple[int, int]]:
    """Rows ``[low, high)`` of an event: each range of its GPUs (one per node of a sliced
    block), or the CPU row after the last GPU."""
    if event.kind == "cpu":
        return [(num_gpus, num_gpus + 1)]
    spans: list[tuple[int, int]] = []
    for gpu in sorted(event.gpus):
        if spans and spans[-1][1] == gpu:
            spans[-1] = (spans[-1][0], gpu + 1)
        else:
            spans.append((gpu, gpu + 1))
    return spans


def _gpu_ticks(hardware: Hardware) -> tuple[list[float], list[str]]:
    """Ticks of the GPU axis: every GPU, node starts or rack starts, whichever is few enough."""
    num_gpus = hardware.num_gpus
    if num_gpus <= _MAX_TICKS:
        return [g + 0.5 for g in range(num_gpus)], [str(g) for g in range(num_gpus)]
    step = hardware.gpus_per_node
    if num_gpus // step > _MAX_TICKS:
        step = hardware.gpus_per_rack
    starts = list(range(0, num_gpus, step))
    return [float(g) for g in starts], [str(g) for g in starts]


def _title(trace: Trace, instance_name: str, status: str | None, step_time: float | None) -> str:
    if status is None:
        status = "memory-feasible" if trace.feasible else "INFEASIBLE (memory overflow)"
    step = trace.step_time if step_time is None else step_time
    head = f"{instance_name}: " if instance_name else ""
    if trace.period is not None:
        return (
            f"{head}{status}, steady-state step {step:.4f} s\n"
            f"makespan {trace.unrolled_makespan:.4f} s over {trace.k_eval} steps (with the fill)"
        )
    return (
        f"{head}{status}, step time {step:.4f} s\n"
        f"makespan {trace.makespan:.4f} s over {trace.k_eval} steps"
    )


def gantt_figure(
    trace: Trace,
    hardware: Hardware,
    *,
    instance_name: str = "",
    status: str | None = None,
    step_time: float | None = None,
    pools: Sequence[Pool] = (),
) -> Figure:
    """Draw the compute runs of ``trace`` over the GPUs of ``hardware``.

    Parameters
    ----------
    trace
        A simulated trace.
    hardware
        The cluster the trace ran on (GPU count, node and rack sizes).
    instance_name
        Shown at the start of the title.
    status
        The plan's status for the title (e.g. ``"OPTIMAL"``); by default the
        trace's memory feasibility.
    step_time
        Step time in seconds for the title; by default the trace's.
    pools
        The instance's pools; with more than one, their boundaries are drawn
        and their names label their rows.

    Returns
    -------
    matplotlib.figure.Figure
        The drawn figure (Agg canvas, not registered with pyplot).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = [e for e in trace.events if (e.kind in RUN_KINDS and e.gpus) or e.kind == "cpu"]
    cpu_row = any(event.kind == "cpu" for event in runs)
    names = sorted({event.vertex for event in runs})
    colour = _vertex_colours(names)
    nodes, racks = _boundaries(hardware)
    handles = _legend_handles(names, colour, sorted({event.step for event in runs}), hardware)
    spans = pool_spans(pools)
    if spans:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], **_POOL_STYLE, label="pool boundary"))
    switches = sorted(
        {e.kind for e in runs if e.kind not in ("compute", "cpu")}, key=RUN_KINDS.index
    )
    if switches:
        from matplotlib.patches import Patch

        handles.append(
            Patch(
                facecolor="0.6",
                alpha=SWITCH_ALPHA,
                edgecolor="black",
                linewidth=0.4,
                label="lighter: " + ", ".join(switches),
            )
        )
    height = max(3.5, min(10.0, 1.5 + 0.25 * hardware.num_gpus), 1.2 + 0.26 * len(handles))
    figure = Figure(figsize=(12, height), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rectangles = _draw_runs(axes, runs, colour, hardware.num_gpus)
    for position in nodes:
        axes.axhline(position, **_NODE_STYLE, gid=NODE_BOUNDARY, zorder=3)
    for position in racks:
        axes.axhline(position, **_RACK_STYLE, gid=RACK_BOUNDARY, zorder=3)
    if cpu_row:
        axes.axhline(hardware.num_gpus, color="black", linewidth=1.0, gid=CPU_ROW, zorder=3)
    _draw_pools(axes, spans)
    _set_axes(axes, trace, hardware, _title(trace, instance_name, status, step_time), cpu_row)
    axes.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        borderaxespad=0.0,
        fontsize=8,
        title="colour: vertex, hatch: step",
        title_fontsize=8,
    )
    _label_runs(figure, axes, rectangles)
    return figure


def _draw_pools(axes: Axes, spans: tuple[PoolSpan, ...]) -> None:
    """A line at each pool boundary and each pool's name at the left of its rows."""
    for span in spans[1:]:
        axes.axhline(span.first, **_POOL_STYLE, gid=POOL_BOUNDARY, zorder=3)
    transform = axes.get_yaxis_transform()  # x in axes fractions, y in GPU rows
    for span in spans:
        label = axes.text(
            0.005,
            span.first + 0.1,
            f"pool {span.name}",
            transform=transform,
            ha="left",
            va="top",
            fontsize=8,
            color=_POOL_STYLE["color"],
            zorder=5,
            gid=POOL_LABEL,
            bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0, "pad": 1.0},
        )
        label.set_in_layout(False)


def _vertex_colours(names: list[str]) -> dict[str, Any]:
    """The colour of each vertex name: the tab10 palette in name order, cycled."""
    from matplotlib import colormaps

    palette = colormaps["tab10"]
    return {name: palette(index % 10) for index, name in enumerate(names)}


def _legend_handles(
    names: list[str], colour: dict[str, Any], steps: list[int], hardware: Hardware
) -> list[Patch | Line2D]:
    """Legend entries: one per vertex colour, step hatch and boundary kind drawn.

    Parameters
    ----------
    names
        The vertex names drawn, in legend order.
    colour
        Each vertex name's colour.
    steps
        The steps drawn, in increasing order; steps sharing a hatch share an entry.
    hardware
        The cluster (a boundary entry appears only when it has such boundaries).
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    nodes, racks = _boundaries(hardware)
    handles: list[Patch | Line2D] = [
        Patch(facecolor=colour[name], edgecolor="black", linewidth=0.4, label=name)
        for name in names
    ]
    hatches: dict[str, list[int]] = {}
    for step in steps:
        hatches.setdefault(STEP_HATCHES[step % len(STEP_HATCHES)], []).append(step)
    for hatch, members in hatches.items():
        label = ("step " if len(members) == 1 else "steps ") + ", ".join(map(str, members))
        handles.append(
            Patch(facecolor="white", edgecolor="black", linewidth=0.4, hatch=hatch, label=label)
        )
    if nodes:
        handles.append(
            Line2D([], [], **_NODE_STYLE, label=f"node boundary ({hardware.gpus_per_node} GPUs)")
        )
    if racks:
        handles.append(
            Line2D([], [], **_RACK_STYLE, label=f"rack boundary ({hardware.gpus_per_rack} GPUs)")
        )
    return handles


def _draw_runs(
    axes: Axes, runs: list[Event], colour: dict[str, Any], num_gpus: int
) -> list[tuple[Event, Rectangle]]:
    """Add one rectangle per run part and GPU range (its GPUs, or the CPU row, over its time).

    Returns the compute parts and CPU stages, the ones that are labelled.
    """
    from matplotlib.patches import Rectangle

    rectangles = []
    for event in runs:
        for piece, (low, high) in enumerate(_spans(event, num_gpus)):
            rectangle = Rectangle(
                (event.start, low + 0.05),
                event.end - event.start,
                high - low - 0.1,
                facecolor=colour[event.vertex],
                edgecolor="black",
                linewidth=0.4,
                alpha=RUN_ALPHA if event.kind in ("compute", "cpu") else SWITCH_ALPHA,
                hatch=STEP_HATCHES[event.step % len(STEP_HATCHES)],
            )
            axes.add_patch(rectangle)
            # Switch parts are not labelled; a sliced block's run on its first node's piece.
            if event.kind in ("compute", "cpu") and piece == 0:
                rectangles.append((event, rectangle))
    return rectangles


def _set_axes(
    axes: Axes, trace: Trace, hardware: Hardware, title: str, cpu_row: bool = False
) -> None:
    """Limits, GPU ticks (and the CPU row's), axis labels and the title."""
    shown = trace.makespan if trace.unrolled_makespan is None else trace.unrolled_makespan
    axes.set_xlim(0, shown * 1.01 if shown > 0 else 1.0)
    axes.set_ylim(hardware.num_gpus + (1 if cpu_row else 0), 0)
    ticks, labels = _gpu_ticks(hardware)
    if cpu_row:
        ticks, labels = [*ticks, hardware.num_gpus + 0.5], [*labels, CPU_LABEL]
    axes.set_yticks(ticks, labels)
    axes.set_xlabel("time (s)")
    axes.set_ylabel("GPU (flat index)")
    axes.set_title(title)


def _label_runs(figure: Figure, axes: Axes, rectangles: list[tuple[Event, Rectangle]]) -> None:
    """Label each run whose label fits inside its rectangle and clear of the others.

    The layout is fixed first (one draw); labels do not take part in it, so
    the saved figure keeps the positions measured here. Longer runs are
    labelled first.
    """
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    placed = []
    order = sorted(rectangles, key=lambda item: -(item[0].end - item[0].start) * len(item[0].gpus))
    for event, rectangle in order:
        box = rectangle.get_window_extent(renderer)
        if box.width < 8 or box.height < 6:
            continue
        x = (event.start + event.end) / 2
        y = (rectangle.get_y() * 2 + rectangle.get_height()) / 2
        candidates = (
            (f"{event.vertex}\nstep {event.step}", 0),
            (f"{event.vertex} s{event.step}", 0),
            (f"{event.vertex} s{event.step}", 90),
        )
        for text, rotation in candidates:
            label = axes.text(
                x,
                y,
                text,
                ha="center",
                va="center",
                rotation=rotation,
                fontsize=7,
                zorder=4,
                clip_on=True,
                bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0, "pad": 1.0},
            )
            label.set_in_layout(False)
            extent = label.get_window_extent(renderer).padded(3)
            inside = (
                extent.x0 >= box.x0
                and extent.x1 <= box.x1
                and extent.y0 >= box.y0
                and extent.y1 <= box.y1
            )
            if inside and not any(extent.overlaps(other) for other in placed):
                placed.append(extent)
                break
            label.remove()


def write_gantt(
    trace: Trace,
    hardware: Hardware,
    path: str,
    *,
    instance_name: str = "",
    status: str | None = None,
    step_time: float | None = None,
    pools: Sequence[Pool] = (),
) -> None:
    """Draw the compute runs of ``trace`` (see :func:`gantt_figure`) and save a PNG to ``path``."""
    figure = gantt_figure(
        trace,
        hardware,
        instance_name=instance_name,
        status=status,
        step_time=step_time,
        pools=pools,
    )
    figure.savefig(path, dpi=110, format="png")
