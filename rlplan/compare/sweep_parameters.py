"""What ``sweep`` varies and the columns it writes: a ``--param`` and the CSV layouts.

The sweep (:mod:`rlplan.compare.sweep`) and its report
(:mod:`rlplan.compare.explore_report`) both read these, so neither imports the other's module
for them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rlplan.rpeg.errors import InputError

_INTEGER = re.compile(r"^[+-]?\d+$")

SWEEP_COLUMNS = (
    "param",
    "value",
    "status",
    "step_time_s",
    "bound_step_s",
    "gap",
    "step_change_s",
    "samples_per_s",
    "plan_change",
    "wall_time_s",
    "message",
)
TORNADO_COLUMNS = (
    "rank",
    "field",
    "unit",
    "base_value",
    "low_value",
    "high_value",
    "step_base_s",
    "step_low_s",
    "step_high_s",
    "change_low_s",
    "change_high_s",
    "status_low",
    "status_high",
)


@dataclass(frozen=True)
class Parameter:
    """A parsed ``--param``: a field path and its values.

    Attributes
    ----------
    path
        Dotted path, e.g. ``hardware.memory_per_gpu``.
    values
        Values in the order given (ints for integer literals, else floats).
    """

    path: str
    values: tuple[float, ...]


def parse_parameter(text: str) -> Parameter:
    """Parse ``PATH=v1,v2,...``.

    Raises
    ------
    InputError
        For a missing ``=``, a path that is not ``section.field``, a
        non-numeric or repeated value, or no value.
    """
    if "=" not in text:
        raise InputError("--param", f"expected PATH=v1,v2,..., got {text!r}")
    path, _, listed = text.partition("=")
    path = path.strip()
    parts = path.split(".")
    if len(parts) < 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", p) for p in parts):
        raise InputError("--param", f"{path!r} is not a field path such as hardware.memory_per_gpu")
    values: list[float] = []
    for item in listed.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value: float = int(item) if _INTEGER.match(item) else float(item)
        except ValueError:
            raise InputError("--param", f"{item!r} is not a number ({path})") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError("--param", f"{item!r} is not a finite number ({path})")
        if value in values:
            raise InputError("--param", f"{item} is given twice ({path})")
        values.append(value)
    if not values:
        raise InputError("--param", f"give at least one value, e.g. {path}=1,2")
    return Parameter(path, tuple(values))
