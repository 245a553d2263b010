"""The Gantt chart: legend outside, steps told apart, node and rack lines, clear labels, title."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest

from rlplan.outputs.gantt import (
    NODE_BOUNDARY,
    RACK_BOUNDARY,
    STEP_HATCHES,
    gantt_figure,
    write_gantt,
)
from rlplan.rpeg.evaluation.simulator import Event, Trace
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.instance import load_instance

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


@pytest.fixture(scope="module")
def hardware() -> Hardware:
    """2 racks x 2 nodes x 2 GPUs: node boundaries at GPUs 2 and 6, a rack boundary at 4."""
    base = load_instance(INSTANCES / "tiny_ppo_2gpu.yaml").hardware
    return dataclasses.replace(base, racks=2, nodes_per_rack=2, gpus_per_node=2)


def make_trace(events: list[Event], k_eval: int = 2) -> Trace:
    makespan = max(event.end for event in events)
    return Trace(
        makespan=makespan,
        k_eval=k_eval,
        step_time=makespan / k_eval,
        samples_per_s=1.0,
        generated_tokens_per_s=1.0,
        events=tuple(events),
        peak_memory_bytes=(1e9,) * 8,
        capacity_bytes=2e9,
        violation_bytes=0.0,
    )


def two_steps() -> Trace:
    """Two steps of a long rollout on all GPUs, then a train run and a crowd of tiny runs."""
    events = []
    for step in range(2):
        base = 10.0 * step
        events.append(Event("actor.generate", step, "compute", base, base + 6, tuple(range(8))))
        events.append(Event("actor.train", step, "compute", base + 6, base + 9, tuple(range(4))))
        # 12 short runs of 0.25 s on GPUs 4-7: too narrow for most labels, never overlapping
        for index in range(12):
            start = base + 6 + 0.25 * index
            events.append(Event("reward.infer", step, "compute", start, start + 0.25, (4, 5, 6, 7)))
    events.append(Event("actor.generate", 0, "transfer", 5.0, 5.5, (0, 1)))
    return make_trace(events)


def drawn(figure):
    figure.canvas.draw()
    return figure.canvas.get_renderer()


def test_legend_sits_outside_the_axes_and_inside_the_figure(hardware):
    figure = gantt_figure(two_steps(), hardware, instance_name="toy", status="FEASIBLE")
    renderer = drawn(figure)
    axes = figure.axes[0]
    legend = axes.get_legend()
    box, frame = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
    assert box.x0 >= frame.x1
    assert box.x1 <= figure.bbox.x1 and box.y0 >= figure.bbox.y0


def test_steps_are_hatched_apart_and_explained(hardware):
    figure = gantt_figure(two_steps(), hardware)
    axes = figure.axes[0]
    hatches = {}
    for patch in axes.patches:
        hatches.setdefault(patch.get_hatch() or "", set()).add(patch.get_facecolor())
    assert set(hatches) == {STEP_HATCHES[0], STEP_HATCHES[1]}
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert {"actor.generate", "actor.train", "reward.infer", "step 0", "step 1"} <= set(labels)
    handles = dict(zip(labels, axes.get_legend().legend_handles, strict=True))
    assert (handles["step 0"].get_hatch() or "") != (handles["step 1"].get_hatch() or "")


def test_node_and_rack_boundaries_are_drawn_and_explained(hardware):
    figure = gantt_figure(two_steps(), hardware)
    axes = figure.axes[0]
    levels = {NODE_BOUNDARY: set(), RACK_BOUNDARY: set()}
    for line in axes.get_lines():
        if line.get_gid() in levels:
            levels[line.get_gid()].add(line.get_ydata()[0])
    assert levels == {NODE_BOUNDARY: {2, 6}, RACK_BOUNDARY: {4}}
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "node boundary (2 GPUs)" in labels and "rack boundary (4 GPUs)" in labels


def test_one_node_has_no_boundary_lines():
    hardware = load_instance(INSTANCES / "tiny_ppo_2gpu.yaml").hardware
    events = [Event("actor.train", 0, "compute", 0.0, 1.0, (0, 1))]
    axes = gantt_figure(make_trace(events, 1), hardware).axes[0]
    assert not [line for line in axes.get_lines() if line.get_gid()]


def test_title_carries_status_and_step_time(hardware):
    figure = gantt_figure(
        two_steps(), hardware, instance_name="toy", status="OPTIMAL", step_time=7.25
    )
    title = figure.axes[0].get_title()
    assert title.startswith("toy: OPTIMAL, step time 7.2500 s")
    assert "over 2 steps" in title
    # without a status the trace's memory feasibility is shown
    default = gantt_figure(two_steps(), hardware).axes[0].get_title()
    assert "memory-feasible, step time 9.5000 s" in default


def test_labels_fit_their_runs_and_never_overlap(hardware):
    figure = gantt_figure(two_steps(), hardware)
    renderer = drawn(figure)
    axes = figure.axes[0]
    labels = [text for text in axes.texts if text.get_text()]
    assert len(labels) >= 4  # both rollouts and both train runs at least
    boxes = [text.get_window_extent(renderer) for text in labels]
    for first, second in itertools.combinations(boxes, 2):
        assert not first.overlaps(second)
    runs = [patch.get_window_extent(renderer) for patch in axes.patches]
    for box in boxes:
        assert any(
            run.x0 <= box.x0 and box.x1 <= run.x1 and run.y0 <= box.y0 and box.y1 <= run.y1
            for run in runs
        )
    assert sum("reward.infer" in text.get_text() for text in labels) < 24


def test_write_gantt_saves_a_png(tmp_path, hardware):
    path = tmp_path / "gantt.png"
    write_gantt(two_steps(), hardware, str(path), instance_name="toy", status="FEASIBLE")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
