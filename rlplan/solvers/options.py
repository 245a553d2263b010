"""Options shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplan.solvers.progress import SilentProgress


@dataclass
class SolveOptions:
    """Limits and settings of one solve.

    Attributes
    ----------
    time_limit
        Wall-clock seconds for the whole solve.
    threads
        Worker threads an exact backend may use.
    seed
        Random seed (local search, CP-SAT).
    gap
        Relative gap at which an exact backend may stop and claim optimality
        within that tolerance (0 = exact).
    progress
        Where live progress goes.
    verbose
        Show the exact solver's own log (HiGHS, CP-SAT) on stderr.
    """

    time_limit: float = 60.0
    threads: int = 2
    seed: int = 0
    gap: float = 0.0
    progress: SilentProgress = field(default_factory=SilentProgress)
    verbose: bool = False
