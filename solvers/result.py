"""The one result type every backend returns, and the one rule that names its verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from formulation.model import REL_ROUNDING
from rpeg.plan import Plan

#: Relative gap ``(makespan - bound) / makespan`` within which a plan is reported
#: OPTIMAL: the rounding tolerance of the exact backends' formulation, which
#: floors durations and lags to a time unit losing at most this fraction of
#: the makespan along any path (``formulation.model.REL_ROUNDING``). A proof
#: of the rounded model's optimum therefore leaves a gap within it.
OPTIMALITY_TOLERANCE = REL_ROUNDING


class Status(Enum):
    """Outcome of a solve.

    OPTIMAL: the gap to the proven bound is within :data:`OPTIMALITY_TOLERANCE`
    (see :func:`verdict`). OPTIMAL_WITHIN_GAP: the gap is within the gap the
    user asked for (``--gap``), not within the tolerance. FEASIBLE: a plan, no
    such proof. INFEASIBLE: proven that no plan exists. UNKNOWN: no plan found
    within the limits. ERROR: the backend failed (including a
    solver/simulator disagreement).
    """

    OPTIMAL = "OPTIMAL"
    OPTIMAL_WITHIN_GAP = "OPTIMAL_WITHIN_GAP"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"

    @property
    def has_plan(self) -> bool:
        """Whether a result with this status carries a usable plan."""
        return self in (Status.OPTIMAL, Status.OPTIMAL_WITHIN_GAP, Status.FEASIBLE)


def relative_gap(makespan: float | None, bound: float | None) -> float | None:
    """``(makespan - bound) / makespan``, at least 0; None without a plan or a bound."""
    if makespan is None or bound is None or makespan <= 0:
        return None
    return max(0.0, (makespan - bound) / makespan)


def verdict(makespan: float, bound: float | None, requested_gap: float = 0.0) -> Status:
    """The status of a plan of simulated ``makespan`` given a proven lower ``bound``.

    The one rule every backend and ``auto`` apply:

    * OPTIMAL iff the relative gap ``(makespan - bound) / makespan`` is at most
      :data:`OPTIMALITY_TOLERANCE` (the formulation's rounding tolerance);
    * otherwise OPTIMAL_WITHIN_GAP iff the user asked for a gap
      (``requested_gap > 0``) and the gap is within it;
    * otherwise FEASIBLE.

    Parameters
    ----------
    makespan
        Simulated makespan of the plan (s).
    bound
        Best proven lower bound on the makespan over the plan space (s), or None.
    requested_gap
        Relative gap at which the user allowed the search to stop (0: exact).

    Returns
    -------
    Status
        OPTIMAL, OPTIMAL_WITHIN_GAP or FEASIBLE.
    """
    gap = relative_gap(makespan, bound)
    if gap is None:
        return Status.FEASIBLE
    # A tiny absolute slack absorbs float noise in equal makespan and bound.
    if gap <= OPTIMALITY_TOLERANCE + 1e-12:
        return Status.OPTIMAL
    if requested_gap > 0 and gap <= requested_gap + 1e-12:
        return Status.OPTIMAL_WITHIN_GAP
    return Status.FEASIBLE


@dataclass
class Result:
    """What a backend returns.

    Attributes
    ----------
    status
        See :class:`Status`; for a plan, :func:`verdict` of its makespan and bound.
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
    requested_gap
        The relative gap the user allowed (``--gap``; 0 = exact).
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
    requested_gap: float = 0.0

    @property
    def step_time(self) -> float | None:
        """Simulated makespan per step (s)."""
        return None if self.makespan is None else self.makespan / self.k_eval

    @property
    def bound_step(self) -> float | None:
        """Proven lower bound on the step time (s): the makespan bound per step."""
        return None if self.bound is None else self.bound / self.k_eval

    @property
    def gap(self) -> float | None:
        """Relative gap ``(makespan - bound) / makespan`` (see :func:`relative_gap`)."""
        return relative_gap(self.makespan, self.bound)

    def describe_status(self) -> str:
        """The status for people: its name, and for OPTIMAL_WITHIN_GAP the gap it is within.

        E.g. ``OPTIMAL_WITHIN_GAP: optimal within the requested 1% gap, not
        proven optimal``.
        """
        if self.status is Status.OPTIMAL_WITHIN_GAP:
            return (
                f"{self.status.value}: optimal within the requested "
                f"{100 * self.requested_gap:.4g}% gap, not proven optimal"
            )
        return self.status.value

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document: every time in seconds, named with its unit.

        ``makespan_s`` and ``bound_makespan_s`` cover the ``k_eval`` steps;
        ``step_time_s`` and ``bound_step_s`` are per step. Bounds are proven
        lower bounds over the plan space (null without one); ``gap`` is the
        relative gap ``(makespan - bound) / makespan``.
        """
        return {
            "status": self.status.value,
            "solver": self.solver,
            "k_eval": self.k_eval,
            "makespan_s": self.makespan,
            "step_time_s": self.step_time,
            "bound_makespan_s": self.bound,
            "bound_step_s": self.bound_step,
            "gap": self.gap,
            "optimality_tolerance": OPTIMALITY_TOLERANCE,
            "requested_gap": self.requested_gap,
            "wall_time_s": self.wall_time,
            "message": self.message,
            "stats": self.stats,
        }
