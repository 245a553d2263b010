"""Stopping criteria of the local search."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rpeg import stop


@dataclass
class StoppingCriterion:
    """Stop at an evaluation budget, a wall-clock limit or an external interrupt.

    An external interrupt is a KeyboardInterrupt caught by the search or a
    stop request (:mod:`rpeg.stop`, set by SIGINT or SIGTERM).

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

    def __call__(self, evaluations: int) -> bool:
        """Whether to stop after ``evaluations`` evaluations."""
        if self.interrupted or stop.requested():
            self.interrupted = True
            self.reason = "interrupted"
            return True
        if evaluations >= self.max_evaluations:
            self.reason = f"evaluation budget e_max = {self.max_evaluations} reached"
            return True
        if time.perf_counter() - self.started >= self.time_limit:
            self.reason = f"time limit {self.time_limit:g} s reached"
            return True
        return False

    def out_of_time(self) -> bool:
        """Whether the wall-clock limit has passed (ignores the evaluation budget)."""
        if stop.requested():
            self.interrupted = True
        return self.interrupted or time.perf_counter() - self.started >= self.time_limit

    @property
    def elapsed(self) -> float:
        """Seconds since construction."""
        return time.perf_counter() - self.started
