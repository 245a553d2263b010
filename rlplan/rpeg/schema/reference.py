"""The ``reference`` section: a measured run the realism check compares a plan with.

Fields are declared in :data:`REFERENCE_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import check_keys, mapping, positive_float, require
from rlplan.rpeg.schema.fields import (
    POSITIVE_FLOAT,
    TEXT,
    Field,
    field_range,
    keys,
    read_fields,
    structured,
)

#: Keys of one ``reference.phases`` entry.
PHASE_KEYS = ("measured_s", "vertices")


def _phases_schema() -> dict[str, Any]:
    """JSON Schema of ``reference.phases``: phase name -> measured seconds and vertices."""
    seconds = POSITIVE_FLOAT.schema(field_range("reference.phases.*.measured_s"))
    return {
        "type": "object",
        "propertyNames": {"type": "string"},
        "additionalProperties": {
            "type": "object",
            "properties": {
                "measured_s": {"description": "Measured seconds of the phase", **seconds},
                "vertices": {
                    "description": "Vertices the phase covers",
                    "type": "array",
                    "minItems": 1,
                    "items": {"type": "string"},
                },
            },
            "required": list(PHASE_KEYS),
            "additionalProperties": False,
        },
    }


REFERENCE_FIELDS = (
    Field("step_time_s", POSITIVE_FLOAT, description="Measured seconds per RL step"),
    Field(
        "phases",
        structured("mapping of phase name to measured_s and vertices", _phases_schema),
        None,
        "Measured phase times",
    ),
    Field("source", TEXT, description="Where the measurement is published"),
    Field("framework", TEXT, "", "The framework that ran the step"),
    Field("settings", TEXT, "", "The framework's settings, in words"),
    Field(
        "pair",
        TEXT,
        "",
        "The published run this one is the synchronous or asynchronous sibling of "
        "(same model, GPUs and framework): the realism check compares their speed-up",
    ),
)
REFERENCE_KEYS = keys(REFERENCE_FIELDS)


@dataclass(frozen=True)
class ReferenceRun:
    """The ``reference`` section: a measured run the realism check compares with.

    Attributes
    ----------
    step_time_s
        Measured seconds per RL step.
    phases
        Measured phase times: name -> (seconds, vertex names the phase covers).
    source, framework, settings
        Citation, framework and its settings in words.
    pair
        The name of the published run this one is the synchronous or
        asynchronous sibling of ("" when it has none).
    """

    step_time_s: float
    source: str
    phases: tuple[tuple[str, float, tuple[str, ...]], ...] = ()
    framework: str = ""
    settings: str = ""
    pair: str = ""


def parse_reference(data: Any) -> ReferenceRun | None:
    """Build :class:`ReferenceRun` from the optional ``reference`` section."""
    if data is None:
        return None
    section = mapping(data, "reference")
    check_keys(section, REFERENCE_KEYS, "reference")
    values = read_fields(section, REFERENCE_FIELDS, "reference")
    phases = []
    raw = section.get("phases")
    if raw is not None:
        for name, entry in mapping(raw, "reference.phases").items():
            path = f"reference.phases.{name}"
            entry = mapping(entry, path)
            check_keys(entry, PHASE_KEYS, path)
            seconds = positive_float(require(entry, "measured_s", path), f"{path}.measured_s")
            vertices = require(entry, "vertices", path)
            if (
                not isinstance(vertices, list)
                or not vertices
                or not all(isinstance(v, str) for v in vertices)
            ):
                raise InstanceError(
                    f"{path}.vertices", f"must be a list of vertex names, got {describe(vertices)}"
                )
            phases.append((name, seconds, tuple(vertices)))
    return ReferenceRun(phases=tuple(phases), **values)
