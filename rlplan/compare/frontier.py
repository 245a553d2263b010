"""Cost per step and the non-dominated set over (GPUs, step time, cost per step)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Two objective values within this relative difference are equal (float noise
#: only: simulated step times of the same plan agree far closer).
EQUAL = 1e-12


def cost_per_step(gpus: int, price_per_gpu_hour: float, step_time_s: float) -> float:
    """Currency spent on one training step.

    cost per step = GPUs x price per GPU-hour x step time (s) / 3600 (s per hour)

    Parameters
    ----------
    gpus
        GPUs the step runs on (all of them are paid for the whole step).
    price_per_gpu_hour
        Price of one GPU for one hour, in currency units.
    step_time_s
        Simulated step time in seconds.

    Returns
    -------
    float
        Currency units per step.
    """
    return gpus * price_per_gpu_hour * step_time_s / 3600.0


@dataclass(frozen=True)
class Objectives:
    """What a point is judged on; every objective is minimised.

    Attributes
    ----------
    gpus
        GPUs used; None leaves them out of the comparison (pool mixes at a
        budget, :mod:`rlplan.compare.pareto_mix`).
    step_time
        Simulated step time (s); None without a plan.
    cost
        Cost per step (currency units); None without a price or a plan.
    """

    gpus: float | None
    step_time: float | None
    cost: float | None = None

    def values(self) -> tuple[float | None, ...]:
        """The objectives in order (GPUs, step time, cost per step)."""
        return (self.gpus, self.step_time, self.cost)


def _less(a: float, b: float) -> bool:
    return a < b and not _equal(a, b)


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= EQUAL * max(abs(a), abs(b))


def dominates(a: Objectives, b: Objectives) -> bool:
    """Whether ``a`` dominates ``b``: no worse in every objective, better in one.

    Objectives missing (None) on either side are left out of the comparison
    (e.g. cost when no price is known). Points without a step time (no plan)
    neither dominate nor are dominated.
    """
    if a.step_time is None or b.step_time is None:
        return False
    better = False
    for x, y in zip(a.values(), b.values(), strict=True):
        if x is None or y is None:
            continue
        if _less(y, x):
            return False
        if _less(x, y):
            better = True
    return better


def dominated_by(points: Sequence[Objectives]) -> list[int | None]:
    """For each point, the index of a point that dominates it, or None.

    A point with a plan and None here is on the frontier (the non-dominated
    set); points that tie in every objective are all kept. A point without a
    plan gets None too: it is neither on the frontier nor dominated.

    Parameters
    ----------
    points
        The objectives of every point.

    Returns
    -------
    list[int | None]
        One entry per point: the first dominating point's index (the one with
        the fewest GPUs, then the shortest step time), or None.
    """
    order = sorted(
        range(len(points)),
        key=lambda i: (points[i].gpus or 0, points[i].step_time or float("inf")),
    )
    result: list[int | None] = []
    for b in points:
        result.append(next((i for i in order if dominates(points[i], b)), None))
    return result
