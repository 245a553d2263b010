"""The benchmark plots: coinciding solvers stay visible, legends outside, a percent gap axis."""

from __future__ import annotations

import pytest

from rlplan.compare.summary import (
    fill_gaps,
    gap_over_time_figure,
    performance_profile_figure,
    write_gap_over_time,
    write_performance_profile,
)

SOLVERS = ["greedy", "local", "cpsat"]


def record(instance: str, solver: str, makespan: float, bound: float, history) -> dict:
    return {
        "instance": instance,
        "solver": solver,
        "repeat": 0,
        "status": "FEASIBLE",
        "makespan_s": makespan,
        "step_time_s": makespan / 2,
        "bound_makespan_s": bound,
        "wall_time_s": 1.0,
        "history": history,
    }


@pytest.fixture
def records() -> list[dict]:
    """local and cpsat coincide everywhere; cpsat ends 0.002% above the best bound on ``a``."""
    bound = 100.0
    above = bound / (1 - 0.00002)  # gap (makespan - bound) / makespan = 0.002%
    rows = [
        record("a", "greedy", 120.0, bound, [(0.01, 120.0)]),
        record("a", "local", above, bound, [(0.01, 110.0), (0.5, above)]),
        record("a", "cpsat", above, bound, [(0.01, 110.0), (0.5, above)]),
        record("b", "greedy", 50.0, 50.0, [(0.01, 50.0)]),
        record("b", "local", 50.0, 50.0, [(0.01, 50.0)]),
        record("b", "cpsat", 50.0, 50.0, [(0.01, 50.0)]),
    ]
    return fill_gaps(rows)


def legend_outside(figure) -> None:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    box = axes.get_legend().get_window_extent(renderer)
    frame = axes.get_window_extent(renderer)
    assert box.x0 >= frame.x1
    assert box.x1 <= figure.bbox.x1


def test_performance_profile_keeps_coinciding_solvers_visible(records):
    figure = performance_profile_figure(records, SOLVERS)
    axes = figure.axes[0]
    lines = {line.get_label(): line for line in axes.get_lines()}
    assert set(lines) == set(SOLVERS)
    # local and cpsat have the same curve ...
    assert list(lines["local"].get_xdata()) == list(lines["cpsat"].get_xdata())
    assert list(lines["local"].get_ydata()) == list(lines["cpsat"].get_ydata())
    # ... yet differ in marker and dash, and the one drawn on top is the thinner
    styles = {(line.get_marker(), line.get_linestyle()) for line in lines.values()}
    assert len(styles) == len(SOLVERS)
    assert all(line.get_marker() not in (None, "None", "") for line in lines.values())
    below, above = sorted((lines["local"], lines["cpsat"]), key=lambda line: line.get_zorder())
    assert above.get_linewidth() < below.get_linewidth()
    assert above.get_markersize() < below.get_markersize()
    assert above.get_markerfacecolor() == "none"
    legend_outside(figure)


def test_gap_over_time_shows_a_gap_of_0_002_percent(records):
    figure = gap_over_time_figure(records, SOLVERS, 10.0)
    axes = figure.axes[0]
    cpsat = next(line for line in axes.get_lines() if line.get_label() == "cpsat")
    # the mean over a (0.002%) and b (0%) is 0.001%, in percent units
    assert cpsat.get_ydata()[-1] == pytest.approx(0.001, rel=1e-6)
    assert axes.get_yscale() in ("symlog", "log")
    figure.canvas.draw()
    height = axes.get_window_extent().height
    x = cpsat.get_xdata()[-1]
    zero = axes.transData.transform((x, 0.0))[1]
    small = axes.transData.transform((x, 0.002))[1]
    full = axes.transData.transform((x, 100.0))[1]
    # 0.002% stands clear of 0 (at least a tenth of the axis), and 100% is still on the axis
    assert small - zero > 0.1 * height
    assert axes.get_ylim()[1] >= 100.0 and full > small
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert "0.001%" in labels and "100%" in labels
    legend_outside(figure)


def test_plots_are_written_as_png(records, tmp_path):
    write_performance_profile(records, SOLVERS, str(tmp_path / "p.png"))
    write_gap_over_time(records, SOLVERS, 10.0, str(tmp_path / "g.png"))
    for name in ("p.png", "g.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
