"""The "Against the baselines" section both reports render (docs/outputs.md#against-the-baselines).

Built from ``result.stats["value"]`` (:mod:`rlplan.solvers.value`): one row
per baseline (greedy, concurrent, split) and per other configuration (the
framework's default plan, a given or published plan), its simulated step
time and the best plan's against it.
"""

from __future__ import annotations

from rlplan.solvers.result import Result
from rlplan.solvers.value import value_rows

#: The section's heading in both reports.
HEADING = "Against the baselines"
#: The table's columns.
COLUMNS = ("against", "its step time", "this plan")
#: The sentence under the heading.
INTRO = (
    "Step times simulated on this instance; the baselines are built by the rules of "
    "docs/solvers.md#baselines."
)


def value_table(result: Result) -> list[list[str]]:
    """The section's rows (empty when the solve set the plan against nothing)."""
    rows = []
    for name, step, words in value_rows(result.stats, result.step_time):
        rows.append([name, "—" if step is None else f"{step:.4f} s", words])
    return rows


def value_markdown(result: Result) -> list[str]:
    """report.md's lines of the section (none without rows)."""
    rows = value_table(result)
    if not rows:
        return []
    lines = ["", f"## {HEADING}", "", INTRO, ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
