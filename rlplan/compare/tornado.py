"""The tornado of ``main.py sweep --tornado``: which hardware fields, at which values, ranked.

``--tornado`` moves every numeric hardware field (the ones a preset fills
and the cost-model knobs, at their defaults when not written; not the
cluster shape) to 0.5x and 1.5x its value, one at a time, and ranks the
fields by the largest step-time change (a side without a plan ranks first).
Both sides stay within the field's plausible range (rlplan/rpeg/schema/limits.py;
``moe_imbalance`` >= 1, so its low side is 1, perfect balance), and fractions
below their limit (``gemm_efficiency`` and ``decode_bw_eff`` at 1,
``memory_reserve`` at 0.99); bandwidths are varied in bytes/s. Fields at 0 are
not varied, nor by default the fields of :data:`MOE_FIELDS` when no model is
a mixture of experts. ``tornado.csv`` columns: ``rank``, ``field``, ``unit``,
``base_value``, ``low_value``, ``high_value`` (the values used),
``step_base_s``, ``step_low_s``, ``step_high_s`` (seconds), ``change_low_s``,
``change_high_s`` (step time minus the base's, seconds), ``status_low``,
``status_high``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlplan.compare.variants import PLAN_STATUSES
from rlplan.rpeg.schema.hardware import LEVELS, Hardware
from rlplan.rpeg.schema.instance import Instance
from rlplan.rpeg.schema.limits import LIMITS, limit_key

#: Fields describing the cluster's shape, not its figures: never in the tornado.
SHAPE_FIELDS = ("racks", "nodes_per_rack", "gpus_per_node")
#: Upper limits of fraction-valued fields (the schema's ranges).
FRACTION_LIMITS = {"decode_bw_eff": 1.0, "gemm_efficiency": 1.0, "memory_reserve": 0.99}
#: Fields that price only routed experts: the tornado varies them by default
#: only when some model of the instance is a mixture of experts (on a dense
#: instance they change nothing).
MOE_FIELDS = ("moe_imbalance", "moe_expert_overhead")
#: Tornado factors.
LOW, HIGH = 0.5, 1.5
_UNITS = {
    "flops_per_gpu": "FLOP/s",
    "memory_per_gpu": "bytes",
    "memory_bandwidth": "bytes/s",
    "host_bandwidth": "bytes/s",
    "host_to_device_pinned": "bytes/s",
    "host_to_device_pageable": "bytes/s",
    "device_to_host_pinned": "bytes/s",
    "device_to_host_pageable": "bytes/s",
    "host_memory_per_node": "bytes",
    "decode_step_overhead": "s",
    "eager_layer_overhead": "s",
    "non_gemm_constant": "s",
    "decode_bw_eff": "fraction",
    "gemm_efficiency": "fraction",
    "memory_reserve": "fraction",
    "non_gemm_ratio": "ratio",
    "moe_imbalance": "ratio",
    "moe_expert_overhead": "s",
}


def field_unit(name: str) -> str:
    """The unit of hardware field ``name`` as the tornado varies it ("" if dimensionless)."""
    if name.startswith("alpha_"):
        return "s"
    if name.startswith("beta_"):
        return "bytes/s"
    return _UNITS.get(name, "")


def default_fields(available: dict[str, float], instance: Instance) -> tuple[str, ...]:
    """The fields the tornado varies without ``--fields``: every available one but
    :data:`MOE_FIELDS` when no model of ``instance`` is a mixture of experts."""
    moe = any(getattr(spec, "is_moe", False) for spec in instance.models.values())
    return tuple(name for name in available if moe or name not in MOE_FIELDS)


def has_plan(record: dict | None) -> bool:
    """Whether a solve's record holds a plan with a step time."""
    return (
        bool(record)
        and record.get("status") in PLAN_STATUSES
        and (record.get("step_time_s") is not None)
    )


def tornado_fields(hardware: Hardware) -> dict[str, float]:
    """Every numeric hardware field but the shape, with its value (bandwidths in bytes/s).

    Parameters
    ----------
    hardware
        The instance's parsed hardware (defaults and preset figures filled in).
    """
    values: dict[str, float] = {}
    for item in dataclasses.fields(hardware):
        if item.name in SHAPE_FIELDS:
            continue
        value = getattr(hardware, item.name)
        if isinstance(value, dict):
            prefix, mode = item.name.split("_")
            for level in LEVELS:
                figure = value[level]
                values[f"{prefix}_{mode}_{level}"] = 1.0 / figure if prefix == "beta" else figure
        elif isinstance(value, int | float) and not isinstance(value, bool):
            values[item.name] = float(value)
    return values


def tornado_values(name: str, value: float) -> tuple[float, float]:
    """The low and high values of a field: 0.5x and 1.5x, fractions below their limit.

    A value within the field's plausible range
    (:data:`~rlplan.rpeg.schema.limits.LIMITS`) keeps both sides in it (the
    variants must parse): ``moe_imbalance`` 1.18 gives 1 (perfect balance) and 1.77.
    """
    low, high = value * LOW, value * HIGH
    if name in FRACTION_LIMITS:
        high = min(high, FRACTION_LIMITS[name])
    limit = LIMITS.get(limit_key(f"hardware.{name}"))
    if limit is not None and limit.low <= value <= limit.high:
        low, high = max(low, float(limit.low)), min(high, float(limit.high))
    return low, high


def rank_tornado(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort tornado entries, most influential first, and number them from 1.

    A field with a side without a plan ranks before every field with plans
    on both sides; then by the largest absolute step-time change; ties keep
    the fields' order.
    """

    def key(entry: dict[str, Any]) -> tuple[int, float]:
        missing = entry.get("step_low_s") is None or entry.get("step_high_s") is None
        changes = [
            abs(entry[k]) for k in ("change_low_s", "change_high_s") if entry.get(k) is not None
        ]
        return (0 if missing else 1, -max(changes, default=0.0))

    ranked = sorted(entries, key=key)
    for index, entry in enumerate(ranked, start=1):
        entry["rank"] = index
    return ranked


def tornado_entries(
    fields: dict[str, float], base: dict, records: dict[str, dict]
) -> list[dict[str, Any]]:
    """Ranked ``tornado.csv`` rows from the base record and the records ``FIELD-low``/``-high``."""
    base_step = base.get("step_time_s")
    entries = []
    for name, value in fields.items():
        low_value, high_value = tornado_values(name, value)
        entry: dict[str, Any] = {
            "field": name,
            "unit": field_unit(name),
            "base_value": value,
            "low_value": low_value,
            "high_value": high_value,
            "step_base_s": base_step,
        }
        for side in ("low", "high"):
            record = records.get(f"{name}-{side}", {})
            step = record.get("step_time_s") if has_plan(record) else None
            entry[f"step_{side}_s"] = step
            entry[f"status_{side}"] = record.get("status", "ERROR")
            entry[f"change_{side}_s"] = None if step is None else step - base_step
        entries.append(entry)
    return rank_tornado(entries)


def print_tornado(
    entries: list[dict[str, Any]],
    base_step: float,
    skipped: list[str],
    left_out: list[str] | None = None,
) -> None:
    """Print the ranked fields with their step times at 0.5x and 1.5x, then the
    fields at 0 (``skipped``) and the expert fields of a dense instance (``left_out``)."""
    print(f"tornado (base step time {base_step:.4f} s; step time at x0.5 / x1.5):")
    for entry in entries:
        low = "no plan" if entry["step_low_s"] is None else f"{entry['step_low_s']:.4f}"
        high = "no plan" if entry["step_high_s"] is None else f"{entry['step_high_s']:.4f}"
        print(f"  {entry['rank']:>2}. {entry['field']:<22} {low:>10} / {high:<10}")
    if skipped:
        print(f"  not varied (value 0): {', '.join(skipped)}")
    if left_out:
        print(f"  not varied (no mixture-of-experts model): {', '.join(left_out)}")
