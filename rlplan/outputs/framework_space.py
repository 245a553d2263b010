"""The "Framework plan space" section both reports render: the framework's plan beside the full one.

Built from ``result.stats["framework"]`` (:mod:`rlplan.solvers.framework_gap`);
report.md and report.html each render the same text and table
(docs/plan-space.md#framework-plan-spaces).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.solvers.result import Result


@dataclass(frozen=True)
class FrameworkSpaceSection:
    """The section's parts: an introduction, a table, a ratio line and two lists."""

    intro: str
    columns: tuple[str, ...]
    rows: list[list[str]]
    ratio: str
    needs: list[str]
    broken: list[str]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} s"


def framework_space_section(result: Result) -> FrameworkSpaceSection | None:
    """The section of a solve under ``engine.framework`` (None without one)."""
    facts: dict[str, Any] | None = result.stats.get("framework")
    if not facts or "step_time" not in facts:
        return None
    name = facts["display"]
    intro = (
        f"The plan lies in what {name} {facts['release']} can run ({facts['rules']} rules, "
        "docs/plan-space.md#framework-plan-spaces); the full plan space was solved beside it."
    )
    rows = [
        [name, _seconds(facts["step_time"]), facts["status"], _seconds(facts["bound_step"])],
        [
            "full",
            _seconds(facts["full_space_step_time"]),
            facts["full_space_status"],
            _seconds(facts["full_space_bound_step"]),
        ],
    ]
    ratio = ""
    if facts["speedup"] is not None:
        ratio = f"{name}'s best plan takes {facts['speedup']:.3f}x the full-space plan's step."
    return FrameworkSpaceSection(
        intro,
        ("plan space", "step time", "status", "lower bound per step"),
        rows,
        ratio,
        list(facts["needs"]),
        list(facts["broken"]),
    )
