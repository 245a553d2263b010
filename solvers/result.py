"""The one result type every backend returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rpeg.plan import Plan


class Status(Enum):
    """Outcome of a solve.

    OPTIMAL: the plan is proven optimal over the plan space (gap within the
    requested tolerance). FEASIBLE: a plan, no optimality proof. INFEASIBLE:
    proven that no plan exists. UNKNOWN: no plan found within the limits.
    ERROR: the backend failed (including a solver/simulator disagreement).
    """

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"


@dataclass
class Result:
    """What a backend returns.

    Attributes
    ----------
    status
        See :class:`Status`.
    solver
        Backend name.
    plan
        The best plan found (None without one).
    makespan
        The plan's *simulated* makespan of ``k_eval`` steps (s).
    k_eval
        Steps in the makespan.
    bound
        Best proven lower bound on the makespan over the plan space (s).
    wall_time
        Seconds spent.
    stats
        Backend statistics (evaluations, model sizes, ...).
    message
        One line on why the status is what it is (e.g. which vertex fits nowhere).
    """

    status: Status
    solver: str
    plan: Plan | None = None
    makespan: float | None = None
    k_eval: int = 1
    bound: float | None = None
    wall_time: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""

    @property
    def step_time(self) -> float | None:
        """Simulated makespan per step."""
        return None if self.makespan is None else self.makespan / self.k_eval

    @property
    def gap(self) -> float | None:
        """Relative gap ``(objective - bound) / objective``."""
        if self.makespan is None or self.bound is None or self.makespan <= 0:
            return None
        return max(0.0, (self.makespan - self.bound) / self.makespan)

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document."""
        return {
            "status": self.status.value,
            "solver": self.solver,
            "makespan": self.makespan,
            "k_eval": self.k_eval,
            "step_time": self.step_time,
            "bound": self.bound,
            "gap": self.gap,
            "wall_time_s": self.wall_time,
            "message": self.message,
            "stats": self.stats,
        }
