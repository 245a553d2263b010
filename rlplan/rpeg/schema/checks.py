"""Value checkers of instance fields: each returns the converted value or raises with the path.

Every checker takes the value as read from the YAML document and the field's
dotted path (``models.actor.layers``) and either returns the value in the
type the schema stores or raises :class:`~rlplan.rpeg.errors.InstanceError`
naming the path. Numeric checkers also refuse a value outside the field's
plausible range (:data:`rlplan.rpeg.schema.limits.LIMITS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe, did_you_mean
from rlplan.rpeg.schema.limits import check_range


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool, not an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return value.bit_length() <= 1000
    return math.isfinite(value)


def number(value: Any, path: str) -> float:
    """Return ``value`` as a float if it is a finite number (its domain is checked elsewhere)."""
    if is_number(value):
        return float(value)
    raise InstanceError(path, f"must be a number, got {describe(value)}")


def positive_int(value: Any, path: str) -> int:
    """Return ``value`` as an int > 0 (integral floats such as ``1e3`` allowed).

    Like every numeric checker here, it also refuses a value outside the
    field's plausible range (:data:`rlplan.rpeg.schema.limits.LIMITS`).
    """
    if is_number(value) and float(value).is_integer() and value > 0:
        check_range(value, path)
        return int(value)
    raise InstanceError(path, f"must be a positive integer, got {describe(value)}")


def nonnegative_int(value: Any, path: str) -> int:
    """Return ``value`` as an int >= 0."""
    if is_number(value) and float(value).is_integer() and value >= 0:
        check_range(value, path)
        return int(value)
    raise InstanceError(path, f"must be a non-negative integer, got {describe(value)}")


def positive_float(value: Any, path: str, *, limits: bool = True) -> float:
    """Return ``value`` as a finite float > 0 (``limits``: within the field's range)."""
    if is_number(value) and value > 0:
        if limits:
            check_range(value, path)
        return float(value)
    raise InstanceError(path, f"must be a positive number, got {describe(value)}")


def nonnegative_float(value: Any, path: str) -> float:
    """Return ``value`` as a finite float >= 0."""
    if is_number(value) and value >= 0:
        check_range(value, path)
        return float(value)
    raise InstanceError(path, f"must be a non-negative number, got {describe(value)}")


def unit_fraction(value: Any, path: str, *, open_low: bool, open_high: bool) -> float:
    """Return ``value`` as a float in (0|[0, 1)|1]."""
    if is_number(value):
        low_ok = value > 0 if open_low else value >= 0
        high_ok = value < 1 if open_high else value <= 1
        if low_ok and high_ok:
            return float(value)
    interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
    raise InstanceError(path, f"must be a number in {interval}, got {describe(value)}")


def boolean(value: Any, path: str) -> bool:
    """Return ``value`` if it is a YAML boolean."""
    if isinstance(value, bool):
        return value
    raise InstanceError(path, f"must be true or false, got {describe(value)}")


def text(value: Any, path: str) -> str:
    """Return ``value`` without surrounding white space if it is a string."""
    if isinstance(value, str):
        return value.strip()
    raise InstanceError(path, f"must be text, got {describe(value)}")


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    """Return ``value`` if it is a mapping with string keys."""
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return value
    raise InstanceError(path, f"must be a mapping of names to values, got {describe(value)}")


def check_keys(data: Mapping[str, Any], allowed: tuple[str, ...], path: str) -> None:
    """Reject keys outside ``allowed``: typos must not pass silently.

    Raises
    ------
    InstanceError
        Naming the first unknown key, the closest allowed key when one is
        close (``did you mean ...?``) and every allowed key.
    """
    for key in data:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            raise InstanceError(
                where,
                f"unknown key{did_you_mean(key, allowed)} (allowed: {', '.join(allowed)})",
            )


def require(data: Mapping[str, Any], key: str, path: str) -> Any:
    """Return ``data[key]`` or raise naming the missing field."""
    if key not in data or data[key] is None:
        where = f"{path}.{key}" if path else key
        raise InstanceError(where, "missing required field")
    return data[key]


def bandwidth_to_inverse(value: Any, path: str) -> float:
    """Normalise a ``beta_*`` value: >= 1 is bytes/s, < 1 is s/byte; returns s/byte."""
    number = positive_float(value, path, limits=False)
    if number >= 1.0:
        check_range(number, path)
    else:
        check_range(1.0 / number, path, f"{number:.4g} s/byte ({1.0 / number:.4g} bytes/s)")
    return 1.0 / number if number >= 1.0 else number


def is_power_of_two(value: int) -> bool:
    """Whether the int ``value`` is 1, 2, 4, 8, ..."""
    return value > 0 and value & (value - 1) == 0
