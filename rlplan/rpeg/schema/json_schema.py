"""JSON Schema (draft 2020-12) of the instance format, generated from the field declarations.

The sections with declared fields (``hardware``, ``models``, ``workload``,
``policy``, ``optimizer``, ``engine``, ``reference``) are generated from the
same tables their readers validate with (:mod:`rlplan.rpeg.schema.fields`);
``placement`` and ``solver`` from the keys, defaults and choices their
parsers use (:data:`_PLACEMENT_VALUES` and :data:`_SOLVER_VALUES` give each
key's type). Ranges and units come from :data:`rlplan.rpeg.schema.limits.LIMITS`.

The schema describes the document as :mod:`rlplan.rpeg.schema.yamlio` loads
it: a bare ``989e12`` is a number there (as in YAML 1.2), while a YAML 1.1
loader reads it as a string, which the schema refuses like the planner would.
Unknown keys inside a section are errors; unknown top-level sections are
allowed (the loader warns about them). What the schema cannot say is checked
only by the loader: relations between values (a cluster of at most
:data:`~rlplan.rpeg.schema.limits.MAX_GPUS` GPUs, heads dividing the hidden
size, increasing ``gen_quantiles``, distinct pool names, an ``inter_pool``
link beside two pools or more), YAML merge keys (the schema sees the merged
mapping), the content of an ``hf_config`` file,
``placement.pin`` (its vertices depend on the template) and non-finite
numbers (which JSON cannot write).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from rlplan.rpeg.schema.engine import ENGINE_FIELDS
from rlplan.rpeg.schema.fields import (
    BOOLEAN,
    FRACTION_OPEN_LOW,
    POSITIVE_INT,
    Field,
    ValueType,
    allow_null,
    field_range,
    field_schema,
    structured,
)
from rlplan.rpeg.schema.hardware import HARDWARE_COMM, HARDWARE_FIELDS, HARDWARE_REQUIRED

# The placement parser's key tuple is private to the module it is edited in;
# the schema reads it so that a key added there shows up here.
from rlplan.rpeg.schema.instance import (
    _PLACEMENT_KEYS,
    _SECTIONS,
    LEGACY_CONCURRENCY,
    NODE_BLOCKS_VALUE,
    PlacementConfig,
    SolverConfig,
)
from rlplan.rpeg.schema.limits import MAX_GPUS, MAX_LIST_ITEMS, MAX_POOLS
from rlplan.rpeg.schema.model_presets import MODEL_PRESETS
from rlplan.rpeg.schema.models import MODEL_FIELDS, MODEL_KIND, RULE_FIELDS, RULE_KIND, RULE_ROLE
from rlplan.rpeg.schema.optimizer import AC_SHARE_KEY, OPTIMIZER_FIELDS
from rlplan.rpeg.schema.policy import (
    ALGORITHMS,
    DEFAULT_ALGORITHM,
    KNOWN_ROLES,
    POLICY_FIELDS,
    REQUIRED_ROLES,
    TRAINED_MODELS,
)
from rlplan.rpeg.schema.pools import INTER_POOL_FIELDS, PRICE_FIELD
from rlplan.rpeg.schema.presets import GPU_ALIASES, GPU_PRESETS
from rlplan.rpeg.schema.reference import REFERENCE_FIELDS
from rlplan.rpeg.schema.solver_options import INSTANCE, OPTION_RULES, OptionRule
from rlplan.rpeg.schema.workload import WORKLOAD_FIELDS
from rlplan.rpeg.strategy import DIMENSIONS, Dimension

#: The JSON Schema dialect of :func:`instance_json_schema`.
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Sections every instance gives.
REQUIRED_SECTIONS = ("hardware", "models", "workload")


def _section(fields: tuple[Field, ...], path: str, description: str) -> dict[str, Any]:
    """An object of declared fields; keys outside them are errors."""
    return {
        "description": description,
        "type": "object",
        "properties": {field.key: field_schema(field, path) for field in fields},
        "required": [field.key for field in fields if field.required],
        "additionalProperties": False,
    }


def _name_pattern(names: list[str]) -> str:
    """Regular expression of ``names`` as the presets read them (any case, ``_`` or space for -)."""

    def spelt(name: str) -> str:
        letters = []
        for char in name:
            if char.isalpha():
                letters.append(f"[{char.lower()}{char.upper()}]")
            elif char == "-":
                letters.append("[-_ ]")
            else:
                letters.append(re.escape(char))
        return "".join(letters)

    return "(?:" + "|".join(spelt(name) for name in sorted(names, key=len, reverse=True)) + ")"


def _text(pattern: str, description: str) -> dict[str, Any]:
    """An optional text matching ``pattern`` (null: not given)."""
    return {"description": description, "type": ["string", "null"], "pattern": pattern}


def _hardware() -> dict[str, Any]:
    """The ``hardware`` section: one GPU type, or pools of GPU types joined by one link."""
    return {
        "description": "The cluster: one GPU type, or GPU pools (docs/instance.md#pools)",
        "oneOf": [_one_type(), _pooled()],
    }


def _pooled() -> dict[str, Any]:
    """``hardware`` with ``pools``: each a one-type block with a name and a price."""
    pool = copy.deepcopy(_one_type())
    pool["description"] = "One GPU pool: a one-type hardware block with its name and price"
    pool["properties"] = {
        "name": {
            "description": "The pool's name, as plan files and pins write it",
            "type": "string",
            "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        },
        "price_per_gpu_hour": field_schema(PRICE_FIELD, "hardware.pools[0]"),
        **pool["properties"],
    }
    pool["required"] = ["name"]
    link = _section(INTER_POOL_FIELDS, "hardware.inter_pool", "The link between the pools")
    return {
        "description": "GPU pools laid out one after another, joined by the inter-pool link",
        "type": "object",
        "properties": {
            "pools": {"type": "array", "items": pool, "minItems": 1, "maxItems": MAX_POOLS},
            "inter_pool": allow_null(link),
        },
        "required": ["pools"],
        "additionalProperties": False,
    }


def _one_type() -> dict[str, Any]:
    """One GPU type: a preset fills every field but the cluster's shape."""
    schema = _section(HARDWARE_FIELDS, "hardware", "The cluster, its GPUs and links")
    preset_pattern = rf"^\s*{_name_pattern([*GPU_PRESETS, *GPU_ALIASES])}\s*$"
    schema["properties"] = {
        "preset": _text(
            preset_pattern,
            "A GPU whose figures fill the fields not written: " + ", ".join(GPU_PRESETS),
        ),
        **schema["properties"],
    }
    filled = set(next(iter(GPU_PRESETS.values())).fields())
    every = [field.key for field in (*HARDWARE_REQUIRED, *HARDWARE_COMM)]
    del schema["required"]
    schema["anyOf"] = [
        {
            "properties": {"preset": {"type": "string"}},
            "required": ["preset", *(key for key in every if key not in filled)],
        },
        {"required": every},
    ]
    return schema


def _model() -> dict[str, Any]:
    """One ``models.<role>`` entry: shape fields, or a preset or config file that fills them."""
    schema = _section(MODEL_FIELDS, "models.*", "The shape of a decoder-only transformer")
    names = _name_pattern(list(MODEL_PRESETS))
    instruct = "".join(f"[{c}{c.upper()}]" for c in "instruct")
    meta = "".join(f"[{c}{c.upper()}]" for c in "meta")
    preset_pattern = rf"^\s*(?:.*/)?(?:{meta}[-_ ])?{names}(?:[-_ ]{instruct})?\s*$"
    schema["properties"] = {
        "preset": _text(
            preset_pattern,
            "A model whose shape fills the fields not written: " + ", ".join(MODEL_PRESETS),
        ),
        "hf_config": _text(
            r"\S",
            "Path of a Hugging Face config.json (or its folder) whose shape fills the fields "
            "not written; relative to the instance file",
        ),
        "kind": {
            "description": f"What the entry is: {MODEL_KIND} (the default), a transformer",
            "enum": [MODEL_KIND, None],
        },
        **schema["properties"],
    }
    given = {"not": {"type": "null"}}
    schema["not"] = {
        "description": "preset and hf_config exclude each other",
        "required": ["preset", "hf_config"],
        "properties": {"preset": given, "hf_config": given},
    }
    schema["anyOf"] = [
        {"properties": {"preset": {"type": "string"}}, "required": ["preset"]},
        {"properties": {"hf_config": {"type": "string"}}, "required": ["hf_config"]},
        {"required": schema.pop("required")},
    ]
    return schema


def _rule() -> dict[str, Any]:
    """A rule reward: ``models.reward: {kind: rule, seconds_per_sample, workers}``."""
    schema = _section(
        RULE_FIELDS, f"models.{RULE_ROLE}", "A rule-based reward: a function run on CPU workers"
    )
    schema["properties"] = {
        "kind": {"description": "A scoring function, not a model", "const": RULE_KIND},
        **schema["properties"],
    }
    schema["required"] = ["kind", *schema["required"]]
    return schema


def _models() -> dict[str, Any]:
    """The ``models`` section (which roles are required depends on the algorithm)."""
    model = {"$ref": "#/$defs/model"}
    return {
        "description": "Architecture per model role (the reference model is the actor's)",
        "type": "object",
        "properties": {
            role: {"anyOf": [model, {"$ref": "#/$defs/rule"}]} if role == RULE_ROLE else model
            for role in KNOWN_ROLES
        },
        "additionalProperties": False,
    }


def _int_list(key: str) -> dict[str, Any]:
    """A non-empty, short list of positive integers of ``placement.<key>``."""
    item = POSITIVE_INT.schema(field_range(f"placement.{key}[0]"))
    return {"type": "array", "minItems": 1, "maxItems": MAX_LIST_ITEMS, "items": item}


def _fraction_list() -> dict[str, Any]:
    """A non-empty, short list of numbers in (0, 1]."""
    item = FRACTION_OPEN_LOW.schema(None)
    return {"type": "array", "minItems": 1, "maxItems": MAX_LIST_ITEMS, "items": item}


def _dimension_list(declared: Dimension) -> ValueType:
    """The type of a dimension's candidate list ``placement.<name>``."""
    if declared.values is int:
        return _listed(_int_list(declared.list_key), "counts")
    if declared.values is float:
        return _listed(_fraction_list(), "fractions")
    return _listed(_choices(declared.choices), "choices")


def _choices(allowed: tuple[Any, ...]) -> dict[str, Any]:
    """A non-empty, short list of values out of ``allowed``."""
    return {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_LIST_ITEMS,
        "items": {"enum": list(allowed)},
    }


def _listed(schema: dict[str, Any], name: str) -> ValueType:
    """A type whose JSON Schema is ``schema`` (read by its section's parser)."""
    return structured(name, lambda: schema)


#: The type of each key of the ``placement`` parser.
_PLACEMENT_VALUES: dict[str, tuple[ValueType, str]] = {
    "min_block_gpus": (
        ValueType(
            "power of two",
            None,
            lambda limit: {
                "type": "integer",
                "enum": [
                    2**power for power in range(MAX_GPUS.bit_length()) if 2**power <= MAX_GPUS
                ],
            },
        ),
        "Fewest GPUs of a block (a power of two)",
    ),
    "node_blocks": (
        NODE_BLOCKS_VALUE,
        "Runs of whole nodes in a rack that are blocks: any run, or aligned power-of-two groups",
    ),
    "sliced_blocks": (
        BOOLEAN,
        "Also sliced blocks: one in-node GPU range on each node of an aligned group of nodes",
    ),
    "microbatches": (_listed(_int_list("microbatches"), "counts"), "Micro-batch counts"),
    "micro_batch_sizes": (
        _listed(_int_list("micro_batch_sizes"), "sizes"),
        "Sequences per micro-batch and replica (excludes microbatches)",
    ),
    **{
        declared.list_key: (
            _dimension_list(declared),
            f"{declared.label} candidates ({declared.applies_words})",
        )
        for declared in DIMENSIONS
    },
    LEGACY_CONCURRENCY: (
        _listed(_int_list(LEGACY_CONCURRENCY), "counts"),
        "Old name of max_num_seqs (read as it; excludes max_num_seqs)",
    ),
    "pin": (
        _listed({"type": "object", "propertyNames": {"type": "string"}}, "pins"),
        "What-if pins: vertex -> fixed placement fields, staleness -> model -> steps",
    ),
}


def _solver_value(rule: OptionRule) -> tuple[ValueType, str]:
    """A solve option's type and range from its rule (the one the API and the flags apply)."""
    if rule.kind is str:
        return _listed({"type": "string", "minLength": 1}, "solver name"), rule.description
    kind = "integer" if rule.kind is int else "number"
    schema = {"type": kind, "minimum": rule.low, "maximum": rule.high}
    value = ValueType(
        f"{kind} from {rule.low:g} to {rule.high:g}",
        lambda given, path: rule.check(given, INSTANCE),
        lambda limit: schema,
    )
    return value, f"{rule.description} ({rule.unit})"


#: The type of each field of the ``solver`` parser: the solve options' rules.
_SOLVER_VALUES: dict[str, tuple[ValueType, str]] = {
    name: _solver_value(rule) for name, rule in OPTION_RULES.items()
}


def _unknown_type(key: str) -> tuple[ValueType, str]:
    """A key a parser reads that the tables above do not type: any value (tests flag it)."""
    return ValueType("value", None, lambda limit: {}), f"{key} (type not declared)"


def _declared(
    keys: tuple[str, ...], values: dict[str, tuple[ValueType, str]], defaults: object
) -> tuple[Field, ...]:
    """Fields of a parser's keys, their defaults read from the section's default dataclass."""
    fields = []
    for key in keys:
        value, description = values.get(key) or _unknown_type(key)
        default = getattr(defaults, key, None)
        fields.append(Field(key, value, default, description))
    return tuple(fields)


def _placement() -> dict[str, Any]:
    """The ``placement`` section, from the keys and defaults of its parser."""
    fields = _declared(_PLACEMENT_KEYS, _PLACEMENT_VALUES, PlacementConfig())
    schema = _section(fields, "placement", "The plan space's knobs")
    schema["properties"]["pin"].pop("default", None)
    given = {"not": {"type": "null"}}
    excluding = (
        ("microbatches", "micro_batch_sizes"),
        ("max_num_seqs", LEGACY_CONCURRENCY),
    )
    schema["allOf"] = [
        {
            "not": {
                "description": f"{first} and {second} exclude each other",
                "required": [first, second],
                "properties": {first: given, second: given},
            }
        }
        for first, second in excluding
    ]
    return schema


def _solver() -> dict[str, Any]:
    """The ``solver`` section, from the fields and defaults of :class:`SolverConfig`."""
    keys = tuple(field.name for field in dataclasses.fields(SolverConfig))
    fields = _declared(keys, _SOLVER_VALUES, SolverConfig())
    return _section(fields, "solver", "Defaults of the solve command (its options override them)")


def _algorithm_is(algorithm: str) -> dict[str, Any]:
    """The condition "the instance runs ``algorithm``" (no policy means the default)."""
    if algorithm == DEFAULT_ALGORITHM:
        return {"not": {"anyOf": [_algorithm_is(a) for a in ALGORITHMS if a != algorithm]}}
    return {
        "properties": {
            "policy": {
                "type": "object",
                "properties": {"algorithm": {"const": algorithm}},
                "required": ["algorithm"],
            }
        },
        "required": ["policy"],
    }


def _algorithm_rules() -> list[dict[str, Any]]:
    """What depends on the algorithm: models it needs, staleness it may give, DPO's reference."""
    rules = []
    for algorithm in ALGORITHMS:
        staleness = [*TRAINED_MODELS[algorithm]]
        if algorithm == "ppo":
            staleness.append(AC_SHARE_KEY)
        then: dict[str, Any] = {
            "properties": {
                "models": {"required": list(REQUIRED_ROLES[algorithm])},
                "optimizer": {
                    "properties": {"staleness_candidates": {"propertyNames": {"enum": staleness}}}
                },
            }
        }
        if algorithm == "dpo":
            then["properties"]["engine"] = {
                "properties": {"reference_model": {"not": {"const": False}}}
            }
        rules.append({"if": _algorithm_is(algorithm), "then": then})
    return rules


def instance_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an instance document.

    Returns
    -------
    dict[str, Any]
        A schema that accepts what :func:`rlplan.rpeg.schema.instance.parse_instance`
        accepts as far as JSON Schema can say it (see the module's notes),
        to validate the document as :mod:`rlplan.rpeg.schema.yamlio` loads it.
    """
    sections: dict[str, dict[str, Any]] = {
        "hardware": _hardware(),
        "models": _models(),
        "workload": _section(WORKLOAD_FIELDS, "workload", "The data of one RL step"),
        "policy": allow_null(_section(POLICY_FIELDS, "policy", "The RL algorithm")),
        "optimizer": allow_null(
            _section(OPTIMIZER_FIELDS, "optimizer", "Evaluation horizon, staleness, search knobs")
        ),
        "placement": allow_null(_placement()),
        "solver": allow_null(_solver()),
        "engine": allow_null(_section(ENGINE_FIELDS, "engine", "Facts about the RL framework")),
        "reference": allow_null(
            _section(REFERENCE_FIELDS, "reference", "A measured run to compare plans with")
        ),
    }
    assert tuple(sections) == _SECTIONS, "every section the loader knows has a schema"
    return {
        "$schema": DIALECT,
        "title": "rlplan instance",
        "description": (
            "A planning instance: cluster, models, workload, algorithm and search settings. "
            "Validate the document as rlplan's YAML loader reads it (bare 989e12 is a number). "
            "Unknown top-level sections are allowed and ignored."
        ),
        "type": "object",
        "properties": sections,
        "required": list(REQUIRED_SECTIONS),
        "allOf": _algorithm_rules(),
        "$defs": {"model": _model(), "rule": _rule()},
    }
