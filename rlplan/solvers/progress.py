"""Live progress of a solve on a terminal (incumbent, bound, gap, rate, elapsed)."""

from __future__ import annotations

import sys
import time
from typing import Protocol


class Progress(Protocol):
    """What a backend calls while it runs."""

    def update(
        self,
        best: float | None = None,
        bound: float | None = None,
        evaluations: int | None = None,
        note: str = "",
    ) -> None:
        """Report the incumbent makespan, best bound and evaluations so far."""

    def close(self) -> None:
        """Stop displaying."""


class SilentProgress:
    """Progress that shows nothing but remembers when each incumbent appeared."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.history: list[tuple[float, float]] = []
        self.best: float | None = None
        self.bound: float | None = None

    def update(
        self,
        best: float | None = None,
        bound: float | None = None,
        evaluations: int | None = None,
        note: str = "",
    ) -> None:
        """Record an improved incumbent with its time."""
        if best is not None and (self.best is None or best < self.best):
            self.best = best
            self.history.append((time.perf_counter() - self.started, best))
        if bound is not None and (self.bound is None or bound > self.bound):
            self.bound = bound

    def close(self) -> None:
        """Nothing to stop."""


class TerminalProgress(SilentProgress):
    """A one-line live display on stderr, refreshed at most four times a second."""

    def __init__(self, label: str, k_eval: int) -> None:
        super().__init__()
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._text = Text
        self.label = label
        self.k_eval = k_eval
        self.evaluations = 0
        self.note = ""
        self._last = 0.0
        self._live = Live(
            Text(""), console=Console(file=sys.stderr), refresh_per_second=4, transient=True
        )
        self._live.start()

    def update(
        self,
        best: float | None = None,
        bound: float | None = None,
        evaluations: int | None = None,
        note: str = "",
    ) -> None:
        """Record and, at most every 0.25 s, redraw."""
        super().update(best, bound, evaluations, note)
        if evaluations is not None:
            self.evaluations = evaluations
        if note:
            self.note = note
        now = time.perf_counter()
        if now - self._last < 0.25:
            return
        self._last = now
        elapsed = now - self.started
        parts = [f"{self.label}", f"{elapsed:6.1f} s"]
        if self.best is not None:
            parts.append(f"best step {self.best / self.k_eval:.4f} s")
        if self.bound is not None:
            parts.append(f"bound {self.bound / self.k_eval:.4f} s")
            if self.best:
                parts.append(f"gap {max(0.0, (self.best - self.bound) / self.best):.2%}")
        if self.evaluations:
            parts.append(f"{self.evaluations / max(elapsed, 1e-9):,.0f} eval/s")
        if self.note:
            parts.append(self.note)
        self._live.update(self._text("  ".join(parts)))

    def close(self) -> None:
        """Remove the live line."""
        self._live.stop()


def finish_history(
    history: list[tuple[float, float]], makespan: float | None, at: float
) -> list[tuple[float, float]]:
    """The incumbent history of a result, ending at its reported (simulated) makespan.

    Parameters
    ----------
    history
        ``(seconds, makespan)`` incumbents as the backends reported them; an
        exact backend reports its model's objective, which may sit up to the
        rounding tolerance below the simulation of its plan.
    makespan
        The result's simulated makespan (None: no plan, history kept as is).
    at
        Seconds at which the result was reported (the time of a final entry
        the history lacks).

    Returns
    -------
    list of (float, float)
        Sorted by time, strictly improving, no value below ``makespan`` (a
        solver objective under it is raised to it: that incumbent's plan
        simulates at no less), and the last value is ``makespan``.
    """
    entries = sorted(history)
    if makespan is None:
        return entries
    finished: list[tuple[float, float]] = []
    for when, value in entries:
        value = max(value, makespan)
        if not finished or value < finished[-1][1]:
            finished.append((when, value))
    if not finished or finished[-1][1] != makespan:
        finished.append((max(at, finished[-1][0]) if finished else at, makespan))
    return finished


def make_progress(label: str, k_eval: int, quiet: bool) -> SilentProgress:
    """A terminal display when stderr is a terminal and not quiet, else a silent recorder."""
    if not quiet and sys.stderr.isatty():
        return TerminalProgress(label, k_eval)
    return SilentProgress()
