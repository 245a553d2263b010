"""compare summaries: plans within the rounding tolerance of the best share the win."""

from __future__ import annotations

from rlplan.compare.summary import TIE, render_summary
from rlplan.solvers.result import OPTIMALITY_TOLERANCE


def record(solver: str, makespan: float, status: str = "FEASIBLE") -> dict:
    return {
        "instance": "i",
        "solver": solver,
        "repeat": 0,
        "status": status,
        "makespan_s": makespan,
        "step_time_s": makespan / 2,
        "bound_makespan_s": 99.99,
        "wall_time_s": 1.0,
    }


def test_plans_within_the_tolerance_of_the_best_all_win():
    """Best 100.0; 100.005 is 0.005% above (within 0.01%) and wins too; 100.03 (0.03%) does not."""
    assert TIE == OPTIMALITY_TOLERANCE
    records = [
        record("exact", 100.0, "OPTIMAL"),
        record("auto", 100.005, "OPTIMAL"),
        record("local", 100.03),
    ]
    summary = render_summary(records, ["exact", "auto", "local"], 60)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in summary.splitlines()}
    wins = {solver: int(rows[solver].split(" | ")[3]) for solver in ("exact", "auto", "local")}
    assert wins == {"exact": 1, "auto": 1, "local": 0}
