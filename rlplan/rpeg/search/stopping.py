"""Stopping criteria of the local search."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rlplan.rpeg import interrupts


@dataclass
class StoppingCriterion:
    """Stop at a converged evaluation budget, a wall-clock limit or an external interrupt.

    The evaluation budget ends the search only once it has converged: past
    ``max_evaluations`` evaluations, the search goes on as long as its best
    plan improved within the last ``max_evaluations // 2`` evaluations, so a
    search still improving runs on to the time limit. For a given seed the
    stop is deterministic.

    An external interrupt is a KeyboardInterrupt caught by the search or a
    stop request (:mod:`rlplan.rpeg.interrupts`, set by SIGINT or SIGTERM).

    Parameters
    ----------
    max_evaluations
        Evaluation budget (``e_max``).
    time_limit
        Seconds from construction.
    """

    max_evaluations: int
    time_limit: float = float("inf")
    started: float = field(default_factory=time.perf_counter)
    interrupted: bool = False
    reason: str = ""
    #: Evaluations done when the search last found a new best plan.
    last_improvement: int = 0

    def improved(self, evaluations: int) -> None:
        """Record that the search found a new best plan after ``evaluations`` evaluations."""
        self.last_improvement = evaluations

    def __call__(self, evaluations: int) -> bool:
        """Whether to stop after ``evaluations`` evaluations."""
        if self.interrupted or interrupts.requested():
            self.interrupted = True
            self.reason = "interrupted"
            return True
        window = max(1, self.max_evaluations // 2)
        if evaluations >= self.max_evaluations and evaluations - self.last_improvement >= window:
            self.reason = (
                f"evaluation budget e_max = {self.max_evaluations} reached, converged "
                f"(no new best in the last {evaluations - self.last_improvement} evaluations)"
            )
            return True
        if time.perf_counter() - self.started >= self.time_limit:
            self.reason = f"time limit {self.time_limit:g} s reached"
            return True
        return False

    def out_of_time(self) -> bool:
        """Whether the wall-clock limit has passed (ignores the evaluation budget)."""
        if interrupts.requested():
            self.interrupted = True
        return self.interrupted or time.perf_counter() - self.started >= self.time_limit

    @property
    def elapsed(self) -> float:
        """Seconds since construction."""
        return time.perf_counter() - self.started
