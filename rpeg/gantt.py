"""Gantt chart of a trace: runs over GPUs (rows) and time (columns)."""

from __future__ import annotations

from rpeg.simulator import Trace


def write_gantt(trace: Trace, num_gpus: int, path: str, title: str = "") -> None:
    """Draw the compute events of ``trace`` and save a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = sorted({event.vertex for event in trace.events if event.kind == "compute"})
    palette = plt.get_cmap("tab10")
    colour = {name: palette(index % 10) for index, name in enumerate(names)}
    height = min(12.0, 1.5 + 0.25 * num_gpus)
    figure, axes = plt.subplots(figsize=(12, height))
    for event in trace.events:
        if event.kind != "compute" or not event.gpus:
            continue
        low, high = min(event.gpus), max(event.gpus) + 1
        axes.add_patch(
            plt.Rectangle(
                (event.start, low + 0.05),
                event.end - event.start,
                high - low - 0.1,
                facecolor=colour[event.vertex],
                edgecolor="black",
                linewidth=0.4,
                alpha=0.55 + 0.35 * (event.step % 2),
            )
        )
        if event.end - event.start > trace.makespan * 0.04:
            axes.text(
                (event.start + event.end) / 2,
                (low + high) / 2,
                f"{event.vertex}\nstep {event.step}",
                ha="center",
                va="center",
                fontsize=7,
            )
    axes.set_xlim(0, trace.makespan * 1.01)
    axes.set_ylim(num_gpus, 0)
    axes.set_xlabel("time (s)")
    axes.set_ylabel("GPU (flat index)")
    axes.set_title(title or f"makespan {trace.makespan:.3f} s over {trace.k_eval} steps")
    axes.legend(
        handles=[Patch(facecolor=colour[name], label=name) for name in names],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12),
        ncol=min(len(names), 6),
        fontsize=8,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110, format="png")
    plt.close(figure)
