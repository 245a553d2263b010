"""compare's speed-up over the baselines: per instance and the geometric mean."""

from __future__ import annotations

from rlplan.compare.summary import render_summary


def record(instance: str, solver: str, step: float | None, repeat: int = 0) -> dict:
    """One results.csv row with a step time (k_eval 2)."""
    return {
        "instance": instance,
        "solver": solver,
        "repeat": repeat,
        "status": "FEASIBLE" if step is not None else "UNKNOWN",
        "makespan_s": None if step is None else 2 * step,
        "step_time_s": step,
        "bound_makespan_s": None,
        "wall_time_s": 1.0,
    }


def test_speedup_per_instance_and_geometric_mean():
    records = [
        record("a", "greedy", 10.0),
        record("a", "split", 6.0),
        record("a", "local", 5.0),
        record("a", "auto", 4.0),
        record("b", "greedy", 9.0),
        record("b", "split", None),
        record("b", "local", 3.0),
        # two repeats: the median 3.5 is auto's step time on b
        record("b", "auto", 3.0),
        record("b", "auto", 4.0, repeat=1),
        # c: a baseline faster than every other solver counts against them, not as the best
        record("c", "greedy", 2.0),
        record("c", "auto", 4.0),
    ]
    summary = render_summary(records, ["greedy", "split", "local", "auto"], 10)
    section = summary[summary.index("## Speed-up over the baselines") :]
    # a: best of local and auto = 4.0: greedy 10 / 4 = 2.5x, split 6 / 4 = 1.5x.
    assert "| a | 2.500x | 1.500x |" in section
    # b: best = min(3.0, median(3, 4) = 3.5) = 3.0: greedy 9 / 3 = 3.0x; split has no plan.
    assert "| b | 3.000x | — |" in section
    # c: greedy 2 / auto 4 = 0.5x (the best plan is slower there); split did not run.
    assert "| c | 0.500x | — |" in section
    # geometric mean over a, b and c: (2.5 x 3.0 x 0.5)^(1/3) = 1.554; split over a: 1.5.
    mean = (2.5 * 3.0 * 0.5) ** (1 / 3)
    assert f"| **geometric mean** | **{mean:.3f}x** (3) | **1.500x** (1) |" in section


def test_no_section_without_a_baseline_solver():
    records = [record("a", "local", 5.0), record("a", "auto", 4.0)]
    assert "Speed-up" not in render_summary(records, ["local", "auto"], 10)
