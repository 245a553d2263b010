"""The instance JSON Schema: shipped instances pass it, bad ones fail it, and it agrees
with the loader on mutated documents."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from rlplan.cli import app
from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.engine import ENGINE_FIELDS, EngineConfig
from rlplan.rpeg.schema.fields import Field
from rlplan.rpeg.schema.hardware import HARDWARE_FIELDS, Hardware
from rlplan.rpeg.schema.instance import _PLACEMENT_KEYS, _SECTIONS, SolverConfig, parse_instance
from rlplan.rpeg.schema.json_schema import _PLACEMENT_VALUES, _SOLVER_VALUES, instance_json_schema
from rlplan.rpeg.schema.models import MODEL_FIELDS, RULE_FIELDS, ModelSpec, RuleReward
from rlplan.rpeg.schema.optimizer import OPTIMIZER_FIELDS, OptimizerConfig
from rlplan.rpeg.schema.reference import REFERENCE_FIELDS, ReferenceRun
from rlplan.rpeg.schema.workload import WORKLOAD_FIELDS, Workload
from rlplan.rpeg.schema.yamlio import loads, read_yaml_file

ROOT = Path(__file__).resolve().parents[2]
#: Folders of ``instances/`` that hold other files (benchmark suites, GPU price lists).
NOT_INSTANCES = ("suites", "gpu_types")
SHIPPED = sorted(
    path
    for path in (ROOT / "instances").rglob("*.yaml")
    if not set(path.relative_to(ROOT / "instances").parts) & set(NOT_INSTANCES)
)
TEST_DATA = sorted((ROOT / "tests" / "data").rglob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = instance_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def loader_accepts(document: Any, base_dir: Path) -> bool:
    try:
        parse_instance(document, base_dir=base_dir)
    except InstanceError:
        return False
    return True


def test_schema_is_json_of_draft_2020_12() -> None:
    schema = instance_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(json.dumps(schema, allow_nan=False)) == schema


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_shipped_instance_is_valid(validator, path: Path) -> None:
    document = read_yaml_file(path)
    assert loader_accepts(document, path.parent)
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(document)]
    assert not errors


@pytest.mark.parametrize("path", TEST_DATA, ids=lambda path: path.name)
def test_test_data_agrees_with_loader(validator, path: Path) -> None:
    try:
        document = read_yaml_file(path)
    except InstanceError:
        return  # not YAML: nothing for a schema to validate
    assert validator.is_valid(document) == loader_accepts(document, path.parent)


def test_bare_scientific_notation_as_the_loader_reads_it(validator) -> None:
    text = (ROOT / "instances" / "tiny_grpo_2gpu.yaml").read_text()
    text = text.replace("flops_per_gpu:", "flops_per_gpu: 989e12 #", 1)
    assert validator.is_valid(loads(text))
    # A YAML 1.1 loader reads 989e12 as a string, which the planner refuses too.
    import yaml

    assert not validator.is_valid(yaml.safe_load(text))


def _base() -> dict[str, Any]:
    return read_yaml_file(ROOT / "instances" / "tiny_ppo_2gpu_ac.yaml")


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("hardware", "rackz"), 1),  # a misspelt key
        (("hardware", "racks"), None),  # a missing required field
        (("models", "actor", "layers"), -4),  # a negative layer count
        (("models", "actor", "layers"), "24"),  # a wrong type
        (("workload", "batch_size"), 2.5),
        (("optimizer", "staleness_candidates", "actor"), [0, -1]),
        (("engine", "cuda_graphs"), "yes"),
        (("placement", "recompute"), ["partial"]),
        (("solver", "threads"), 0),
        (("policy", "algorithm"), "a2c"),
        (("models", "critic", "preset"), "llama-9"),
    ],
)
def test_bad_instance_fails_schema_and_loader(validator, where, value) -> None:
    document = _base()
    parent = document
    for key in where[:-1]:
        parent = parent.setdefault(key, {})
    parent[where[-1]] = value
    assert not validator.is_valid(document)
    assert not loader_accepts(document, ROOT / "instances")


def test_unknown_top_level_section_is_allowed(validator) -> None:
    document = {**_base(), "notes": {"anything": 1}}
    assert validator.is_valid(document)
    assert loader_accepts(document, ROOT / "instances")


# ----------------------------------------------------------------------------
# Agreement with the loader on mutated documents
# ----------------------------------------------------------------------------


#: Mutations: remove the key (or list entry), rename it, or write a wrong
#: type, null, a value out of range or blank text.
class _Edit:
    """A mutation other than writing a value."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


DELETE, RENAME = _Edit("<deleted>"), _Edit("<renamed>")
WRONG = (DELETE, RENAME, None, "x", "  ", True, [1], {"a": 1}, -1, 0, 0.5, 1e30)


def _with_presets() -> dict[str, Any]:
    """tiny_grpo_2gpu with its GPU and models named by presets and a config file."""
    document = read_yaml_file(ROOT / "instances" / "tiny_grpo_2gpu.yaml")
    document["hardware"] = {"preset": "RTX_4090", "racks": 1, "nodes_per_rack": 1}
    document["hardware"]["gpus_per_node"] = 2
    document["models"] = {
        "actor": {"preset": "Qwen/Qwen2.5-0.5B-Instruct"},
        "reward": {"hf_config": "hf/tiny-tied", "layers": 2},
    }
    return document


def _documents() -> list[tuple[str, dict[str, Any], Path]]:
    published = ROOT / "instances" / "published"
    return [
        ("ppo_ac", _base(), ROOT / "instances"),
        ("dpo", read_yaml_file(ROOT / "instances" / "tiny_dpo_2gpu_v2.yaml"), ROOT / "instances"),
        (
            "reference",
            read_yaml_file(published / "verl_dapo_qwen25_math_7b_16_h20.yaml"),
            published,
        ),
        ("presets", _with_presets(), ROOT / "tests" / "data"),
    ]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key and list index of a document, depth first."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        found.append((*prefix, key))
        if isinstance(item, dict | list):
            found.extend(_paths(item, (*prefix, key)))
    return found


def _mutated(document: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    parent = copied
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    elif value is RENAME:
        parent[f"{path[-1]}_typo"] = parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return copied


#: Rejections the schema cannot express: relations between values, and files.
BEYOND_SCHEMA = (
    "does not divide",  # kv_heads and the head count
    "is not divisible",  # hidden_dim and head_dim
    "GPUs is more than the limit",  # racks x nodes x GPUs
    "must increase within",  # gen_quantiles fractions
    "must not decrease",  # gen_quantiles lengths
    "must end with",  # gen_quantiles' last pair
    "hf_config: cannot read",  # a config file that does not exist
)


@pytest.mark.parametrize(("name", "document", "base_dir"), _documents(), ids=lambda x: x)
def test_schema_agrees_with_loader_on_mutations(validator, name, document, base_dir) -> None:
    assert loader_accepts(document, base_dir) and validator.is_valid(document)
    disagreements = []
    for path in _paths(document):
        if path[0] not in _SECTIONS:
            continue
        for value in WRONG:
            if value is RENAME and not isinstance(path[-1], str):
                continue
            mutated = _mutated(document, path, value)
            try:
                parse_instance(mutated, base_dir=base_dir)
                loader, message = True, ""
            except InstanceError as exc:
                loader, message = False, str(exc)
            beyond_schema = any(words in message for words in BEYOND_SCHEMA)
            if validator.is_valid(mutated) != loader and not beyond_schema:
                disagreements.append(f"{'.'.join(map(str, path))} = {value!r}: {message}")
    assert not disagreements, disagreements[:10]


# ----------------------------------------------------------------------------
# The declarations behind the schema
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "section"),
    [
        (HARDWARE_FIELDS, Hardware),
        (MODEL_FIELDS, ModelSpec),
        (RULE_FIELDS, RuleReward),
        (WORKLOAD_FIELDS, Workload),
        (OPTIMIZER_FIELDS, OptimizerConfig),
        (ENGINE_FIELDS, EngineConfig),
        (REFERENCE_FIELDS, ReferenceRun),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_declared_defaults_are_the_dataclass_defaults(fields: tuple[Field, ...], section) -> None:
    defaults = {
        f.name: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(section)
    }
    for field in fields:
        if field.key not in defaults:  # alpha_*/beta_* are stored per mode
            assert field.key.startswith(("alpha_", "beta_"))
            continue
        expected = defaults[field.key]
        if expected is dataclasses.MISSING:
            assert field.required, field.key
        elif field.key not in ("staleness_candidates", "phases"):
            assert field.default == expected, field.key
        else:
            assert field.default is None  # filled per algorithm, or empty


def test_placement_and_solver_keys_have_declared_types() -> None:
    assert set(_PLACEMENT_VALUES) == set(_PLACEMENT_KEYS)
    assert set(_SOLVER_VALUES) == {f.name for f in dataclasses.fields(SolverConfig)}


def test_schema_defaults_follow_declarations() -> None:
    schema = instance_json_schema()
    one_type, pooled = schema["properties"]["hardware"]["oneOf"]
    hardware = one_type["properties"]
    assert hardware["gemm_efficiency"]["default"] == 0.8
    assert pooled["properties"]["pools"]["items"]["properties"]["racks"] == hardware["racks"]
    assert "default" not in hardware["racks"]
    placement = schema["properties"]["placement"]["anyOf"][0]["properties"]
    assert placement["micro_batch_sizes"]["default"] == [1, 2, 4, 8]


def test_rlplan_schema_prints_the_schema_that_validates_instances(tmp_path, capsys):
    """``rlplan schema`` prints (or writes) exactly :func:`instance_json_schema`; a shipped
    instance passes the printed schema and a misspelt key fails it."""
    assert app.main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(instance_json_schema()))
    target = tmp_path / "instance.schema.json"
    assert app.main(["schema", "--out", str(target)]) == 0
    assert json.loads(target.read_text(encoding="utf-8")) == printed
    checker = jsonschema.Draft202012Validator(printed)
    document = read_yaml_file(str(ROOT / "instances" / "ppo_8b_1x2x8_h100.yaml"))
    assert list(checker.iter_errors(document)) == []
    document["hardware"]["gpus_per_nod"] = document["hardware"].pop("gpus_per_node")
    assert list(checker.iter_errors(document)) != []
