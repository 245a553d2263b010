"""Declared fields of the instance sections: one table drives reading and the JSON Schema.

A section module declares its scalar fields as a tuple of :class:`Field`
(key, :class:`ValueType`, default or :data:`REQUIRED`, description); the
field's unit and plausible range come from
:data:`rlplan.rpeg.schema.limits.LIMITS`. :func:`read_fields` reads a section
from that table, :func:`check_fields` validates a built dataclass against it
and :func:`field_schema` turns one declaration into JSON Schema
(:mod:`rlplan.rpeg.schema.json_schema`). Fields whose value is a structure
(``gen_quantiles``, ``staleness_candidates``, ``phases``) declare a
:class:`ValueType` without a checker: their section reads them after the
scalar fields and supplies their JSON Schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema import checks
from rlplan.rpeg.schema.limits import LIMITS, Range, limit_key

#: JSON Schema of a value, given the field's range (None when LIMITS has none).
SchemaOf = Callable[[Range | None], dict[str, Any]]


@dataclass(frozen=True)
class ValueType:
    """What a field's value must be.

    Attributes
    ----------
    name
        A few words for documentation (``positive integer``).
    check
        The checker (``value, path -> converted value``) of
        :mod:`rlplan.rpeg.schema.checks`; None for a structured value its
        section reads itself.
    schema
        The value's JSON Schema, given the field's range.
    nullable
        Whether YAML null stands for "not given" (the default applies); text
        fields refuse null.
    """

    name: str
    check: Callable[[Any, str], Any] | None
    schema: SchemaOf
    nullable: bool = True


class _Required:
    """Marker of a field without a default."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a field that must be given.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Field:
    """One key of a section.

    Attributes
    ----------
    key
        The key as written in the instance file.
    value
        What its value must be.
    default
        The value a missing (or null) key takes; :data:`REQUIRED` if it must
        be given.
    description
        What the field means, in one sentence.
    read_as
        A looser type the section reader checks, when the full check of
        ``value`` is left to the dataclass's construction (so that it also
        guards values built in code); None to read with ``value``.
    """

    key: str
    value: ValueType
    default: Any = REQUIRED
    description: str = ""
    read_as: ValueType | None = None

    @property
    def required(self) -> bool:
        """Whether the key must be given."""
        return self.default is REQUIRED


def keys(fields: tuple[Field, ...]) -> tuple[str, ...]:
    """The keys of ``fields`` in declaration order."""
    return tuple(field.key for field in fields)


def read_fields(section: Mapping[str, Any], fields: tuple[Field, ...], path: str) -> dict[str, Any]:
    """Read the scalar fields of a section in declaration order.

    A nullable field that is missing or null is left out (its default
    applies) unless it is required. A text field takes its default when
    missing and refuses null; a required text field that is missing or blank
    is reported after every other field was read.

    Parameters
    ----------
    section
        The section's mapping (keys already checked).
    fields
        Its declarations; structured fields (no checker) are skipped.
    path
        The section's field path.

    Returns
    -------
    dict[str, Any]
        Key -> converted value of every field given.

    Raises
    ------
    InstanceError
        Naming the first field that is missing or wrong.
    """
    values: dict[str, Any] = {}
    for field in fields:
        if field.value.check is None:
            continue
        where = f"{path}.{field.key}"
        check = (field.read_as or field.value).check
        assert check is not None
        if not field.value.nullable:
            given = field.key in section
            values[field.key] = check(section[field.key], where) if given else field.default
        elif field.required:
            values[field.key] = check(checks.require(section, field.key, path), where)
        elif section.get(field.key) is not None:
            values[field.key] = check(section[field.key], where)
    for field in fields:
        if not field.value.nullable and field.required and values[field.key] in (REQUIRED, ""):
            raise InstanceError(f"{path}.{field.key}", "missing required field")
    return values


def check_fields(owner: object, fields: tuple[Field, ...], path: str) -> None:
    """Check the attributes of a built section named by ``fields`` (declaration order)."""
    for field in fields:
        if field.value.check is not None:
            field.value.check(getattr(owner, field.key), f"{path}.{field.key}")


def field_range(path: str) -> Range | None:
    """The plausible range of the field at ``path`` (``models.*.layers`` works), or None."""
    return LIMITS.get(limit_key(path))


#: Keywords that constrain a null too (so null cannot just be added to ``type``).
_APPLY_TO_ANY_TYPE = frozenset(("enum", "const", "not", "anyOf", "allOf", "oneOf", "if", "$ref"))


def allow_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also accepts null."""
    kind = schema.get("type")
    if isinstance(kind, str) and not _APPLY_TO_ANY_TYPE.intersection(schema):
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _json_default(value: Any) -> Any:
    """A default as JSON data (tuples as lists)."""
    if isinstance(value, tuple):
        return [_json_default(item) for item in value]
    return value


def field_schema(field: Field, path: str) -> dict[str, Any]:
    """The JSON Schema of one declared field of the section at ``path``.

    The description names the unit of :data:`~rlplan.rpeg.schema.limits.LIMITS`;
    an optional nullable field also accepts null (the loader reads it as not
    given).
    """
    limit = field_range(f"{path}.{field.key}")
    schema = field.value.schema(limit)
    words = field.description or field.value.name
    if limit is not None:
        words = f"{words} ({limit.unit})"
    if field.required and not field.value.nullable:
        schema = {**schema, "pattern": r"\S"}  # a required text must not be blank
    if not field.required:
        if field.value.nullable:
            schema = allow_null(schema)
        if field.default is not None:
            schema = {**schema, "default": _json_default(field.default)}
    return {"description": words, **schema}


# ----------------------------------------------------------------------------
# Value types
# ----------------------------------------------------------------------------


def _bounded(kind: str, low: float | None, limit: Range | None) -> dict[str, Any]:
    """``{"type": kind}`` with ``minimum``/``maximum`` of ``low`` and the range."""
    schema: dict[str, Any] = {"type": kind}
    floor = low if limit is None else max(low if low is not None else limit.low, limit.low)
    if floor is not None:
        schema["minimum"] = floor
    if limit is not None:
        schema["maximum"] = limit.high
    return schema


def _positive_number(limit: Range | None) -> dict[str, Any]:
    if limit is not None and limit.low > 0:
        return {"type": "number", "minimum": limit.low, "maximum": limit.high}
    schema: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0}
    if limit is not None:
        schema["maximum"] = limit.high
    return schema


def _fraction(open_low: bool, open_high: bool) -> SchemaOf:
    def schema(limit: Range | None) -> dict[str, Any]:
        bounds: dict[str, Any] = {"type": "number"}
        bounds["exclusiveMinimum" if open_low else "minimum"] = 0
        bounds["exclusiveMaximum" if open_high else "maximum"] = 1
        return bounds

    return schema


def _bandwidth(limit: Range | None) -> dict[str, Any]:
    assert limit is not None, "every beta_* field has a range"
    return {
        "anyOf": [
            {"type": "number", "minimum": limit.low, "maximum": limit.high},
            {"type": "number", "minimum": 1.0 / limit.high, "maximum": 1.0 / limit.low},
        ]
    }


POSITIVE_INT = ValueType(
    "positive integer", checks.positive_int, lambda limit: _bounded("integer", 1, limit)
)
NONNEGATIVE_INT = ValueType(
    "non-negative integer", checks.nonnegative_int, lambda limit: _bounded("integer", 0, limit)
)
POSITIVE_FLOAT = ValueType("positive number", checks.positive_float, _positive_number)
NONNEGATIVE_FLOAT = ValueType(
    "non-negative number", checks.nonnegative_float, lambda limit: _bounded("number", 0, limit)
)
#: Any finite number: the reading of a field whose domain its dataclass checks.
NUMBER = ValueType("number", checks.number, lambda limit: _bounded("number", None, limit))
#: Numbers in (0, 1], [0, 1) and [0, 1].
FRACTION_OPEN_LOW = ValueType(
    "number in (0, 1]",
    lambda value, path: checks.unit_fraction(value, path, open_low=True, open_high=False),
    _fraction(True, False),
)
FRACTION_OPEN_HIGH = ValueType(
    "number in [0, 1)",
    lambda value, path: checks.unit_fraction(value, path, open_low=False, open_high=True),
    _fraction(False, True),
)
FRACTION = ValueType(
    "number in [0, 1]",
    lambda value, path: checks.unit_fraction(value, path, open_low=False, open_high=False),
    _fraction(False, False),
)
#: A bandwidth in bytes/s (>= 1) or its inverse in s/byte (< 1); read as s/byte.
BANDWIDTH = ValueType(
    "bandwidth in bytes/s, or its inverse in s/byte", checks.bandwidth_to_inverse, _bandwidth
)
BOOLEAN = ValueType("true or false", checks.boolean, lambda limit: {"type": "boolean"})
TEXT = ValueType("text", checks.text, lambda limit: {"type": "string"}, nullable=False)


def one_of(allowed: tuple, words: str) -> ValueType:
    """A value that must be one of ``allowed`` (text is stripped first)."""

    def check(value: Any, path: str) -> Any:
        if isinstance(value, str):
            value = value.strip()
        if isinstance(value, bool) or value not in allowed:
            raise InstanceError(path, f"must be {words}, got {describe(value)}")
        return value

    return ValueType(words, check, lambda limit: {"enum": list(allowed)})


def structured(name: str, schema: Callable[[], dict[str, Any]]) -> ValueType:
    """The type of a structured field its section reads itself, with its JSON Schema."""
    return ValueType(name, None, lambda limit: schema())
