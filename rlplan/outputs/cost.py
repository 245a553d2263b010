"""What a step costs: the rented cluster's GPU-hours at each pool's price.

The whole cluster is rented for the step, used or not: pool ``p`` costs
``gpus_p x price_p x step_time / 3600`` per step, and the plan the sum over
the pools (docs/outputs.md#cost-per-step). Prices are ``hardware.pools[i].
price_per_gpu_hour``, in any currency (the same for every pool); a one-type
``hardware`` section has none, and an instance where some pool has none gets
no cost lines, so its outputs are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlplan.rpeg.schema.pools import Pool


@dataclass(frozen=True)
class StepCost:
    """The cost of one step of a plan.

    Attributes
    ----------
    total
        Cost per step, every pool's GPUs for the step time.
    per_pool
        (pool name, cost per step) by pool; empty for a cluster of one pool.
    per_thousand_samples
        Cost of 1,000 samples (sequences), or None when a step has none.
    """

    total: float
    per_pool: tuple[tuple[str, float], ...]
    per_thousand_samples: float | None


def step_cost(pools: Sequence[Pool], step_time: float, samples: int | None) -> StepCost | None:
    """The cost of a step of ``step_time`` seconds, or None when some pool has no price.

    Parameters
    ----------
    pools
        The instance's pools (:attr:`Instance.pools
        <rlplan.rpeg.schema.instance.Instance.pools>`).
    step_time
        Simulated step time (s).
    samples
        Samples (sequences) per step, or None when unknown.
    """
    if not pools or any(pool.price_per_gpu_hour is None for pool in pools):
        return None
    costs = [
        pool.hardware.num_gpus * float(pool.price_per_gpu_hour) * step_time / 3600.0  # type: ignore[arg-type]
        for pool in pools
    ]
    total = sum(costs)
    per_pool = (
        tuple((str(pool.name), cost) for pool, cost in zip(pools, costs, strict=True))
        if len(pools) > 1
        else ()
    )
    per_thousand = 1000.0 * total / samples if samples else None
    return StepCost(total, per_pool, per_thousand)


def money(value: float) -> str:
    """A cost with four significant digits, e.g. ``0.3166`` or ``1.338e-05``."""
    return f"{value:.4g}"


def cost_words(cost: StepCost, unit: str = " per step") -> str:
    """``0.4686 per step (pool h100 0.3166, pool h20 0.152; the whole cluster rented)``."""
    parts = ", ".join(f"pool {name} {money(value)}" for name, value in cost.per_pool)
    inside = f"{parts}; " if parts else ""
    return f"{money(cost.total)}{unit} ({inside}the whole cluster rented)"


def cost_lines(pools: Sequence[Pool], step_time: float | None, samples: int | None) -> list[str]:
    """The terminal summary's cost lines; none without a step time or a price for every pool.

    Returns
    -------
    list[str]
        ``cost         0.4686 per step (...)`` and, when samples per step are
        known, ``cost         0.9153 per 1,000 samples``.
    """
    cost = None if step_time is None else step_cost(pools, step_time, samples)
    if cost is None:
        return []
    lines = [f"cost         {cost_words(cost)}"]
    if cost.per_thousand_samples is not None:
        lines.append(f"cost         {money(cost.per_thousand_samples)} per 1,000 samples")
    return lines


def cost_rows(
    pools: Sequence[Pool], step_time: float | None, samples: int | None
) -> list[tuple[str, str]]:
    """(label, value) rows of the reports' summary tables; none without a price."""
    cost = None if step_time is None else step_cost(pools, step_time, samples)
    if cost is None:
        return []
    rows = [("cost per step", cost_words(cost, unit=""))]
    if cost.per_thousand_samples is not None:
        rows.append(("cost per 1,000 samples", money(cost.per_thousand_samples)))
    return rows
