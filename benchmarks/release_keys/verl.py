"""verl's trainer config keys at the targeted release, and the exporter's keys checked against them.

Not run in CI (it downloads the release):
``python -m benchmarks.release_keys.verl [--write] [--plans PLAN.json ...]``.

* The release: verl 0.9.1, the newest on PyPI in December 2026, fetched with
  ``pip download --no-deps verl==0.9.1``. Its wheel ships the resolved trainer
  configs ``verl/trainer/config/_generated_ppo_trainer.yaml`` (FSDP,
  ``--config-name=ppo_trainer``) and ``_generated_ppo_megatron_trainer.yaml``
  (Megatron, ``--config-name=ppo_megatron_trainer``): the keys
  ``verl.trainer.main_ppo`` takes as ``key=value`` overrides.
* Types: a key's default gives its type. A null or ``???`` default takes the
  type annotated on the dataclass its section's ``_target_`` names
  (``verl/workers/config/*.py``; ``any`` when there is none), an interpolation
  (``${oc.select:KEY,DEFAULT}``) the type of what it selects. Fields of those
  dataclasses that the YAML leaves out are keys only with Hydra's ``+``
  (written ``+key``). The keys of ``verl/trainer/config/legacy_reward_impl.yaml``
  are typed ``legacy``: only ``verl/experimental/fully_async_policy`` migrates
  them (``migrate_legacy_reward_impl``), ``main_ppo`` never reads them.
* ``--write`` writes ``tests/data/releases/verl.json``; every run checks each
  ``key=value`` the exporter emits for the published instance/plan pairs
  (``instances/published/**/X.yaml`` with ``X.plan.json``) and for ``--plans``
  (their instance found as ``export-config`` finds it), and prints the valid and
  invalid counts and each invalid key. Plans outside verl's plan space
  (``plan_problems``) are counted apart: ``export-config`` refuses them.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGE, VERSION = "verl", "0.9.1"
DATA = ROOT / "tests" / "data" / "releases" / "verl.json"
CONFIGS = {
    "ppo_trainer": "verl/trainer/config/_generated_ppo_trainer.yaml",
    "ppo_megatron_trainer": "verl/trainer/config/_generated_ppo_megatron_trainer.yaml",
}
LEGACY = "verl/trainer/config/legacy_reward_impl.yaml"
SOURCE = (
    f"PyPI {PACKAGE}=={VERSION} wheel: {CONFIGS['ppo_trainer']} and "
    f"{CONFIGS['ppo_megatron_trainer']}; null defaults typed from the dataclasses their "
    "_target_ names (verl/workers/config/*.py), +keys are dataclass fields the YAML leaves out; "
    f"keys of {LEGACY} typed legacy (main_ppo never reads them)"
)
_SELECT = re.compile(r"^\$\{oc\.select:([^,}]+)(?:,(.*))?\}$")
_REFERENCE = re.compile(r"^\$\{([^:}]+)\}$")


def fetch_wheel(folder: Path) -> Path:
    """``pip download --no-deps verl==0.9.1`` into ``folder``; the wheel's path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", f"{PACKAGE}=={VERSION}"]
    subprocess.run([*command, "-d", str(folder), "--quiet"], check=True)
    return next(folder.glob(f"{PACKAGE}-{VERSION}-*.whl"))


def value_type(value: Any) -> str:
    """The type name of a YAML value (``int``, ``float``, ``bool``, ``str``, ``list``, ``null``)."""
    if value is None or value == "???":
        return "null"
    if isinstance(value, bool):
        return "bool"
    for kind, name in ((int, "int"), (float, "float"), (str, "str"), (list, "list")):
        if isinstance(value, kind):
            return name
    return "dict"


def override_type(text: str) -> str:
    """The type Hydra reads an override value ``text`` as (``true`` -> bool, ``4`` -> int)."""
    if text in ("true", "false", "True", "False"):
        return "bool"
    if text == "null":
        return "null"
    if re.fullmatch(r"[+-]?\d+", text):
        return "int"
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", text):
        return "float"
    if text.startswith("["):
        return "list"
    if text.startswith("{"):
        return "dict"
    return "str"


def accepts(key_type: str, value: str) -> bool:
    """Whether a key of ``key_type`` takes the override value ``value``."""
    allowed = set(key_type.lstrip("+").split("|"))
    if "legacy" in allowed:
        return False
    got = override_type(value)
    if "any" in allowed or got in allowed:
        return True
    return got == "int" and "float" in allowed


def _annotation_type(node: ast.expr | None) -> str:
    """A dataclass field annotation as type names (``Optional[int]`` -> ``int|null``)."""
    text = ast.unparse(node) if node is not None else "Any"
    text = text.replace("typing.", "")
    optional = text.startswith("Optional[") or "None" in text
    if text.startswith("Optional["):
        text = text[len("Optional[") : -1]
    names = []
    for part in re.split(r"\s*\|\s*", text):
        base = part.split("[")[0].strip()
        simple = {"int": "int", "float": "float", "bool": "bool", "str": "str"}.get(base)
        if simple is None:
            simple = "list" if base.lower() in ("list", "tuple", "listconfig") else None
        if base == "None":
            continue
        names.append(simple or ("any" if base in ("Any", "object") else "dict"))
    if optional:
        names.append("null")
    return "|".join(dict.fromkeys(names)) or "any"


def dataclass_fields(wheel: zipfile.ZipFile) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Class name -> (base class names, {field: type names}) of every class in the wheel."""
    classes: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name in wheel.namelist():
        if not name.endswith(".py") or not name.startswith("verl/"):
            continue
        tree = ast.parse(wheel.read(name).decode("utf-8", "replace"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            fields = {
                item.target.id: _annotation_type(item.annotation)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
            bases = [ast.unparse(base).split(".")[-1] for base in node.bases]
            classes.setdefault(node.name, (bases, fields))
    return classes


def _field(classes: dict, name: str, field: str) -> str | None:
    """The type of ``field`` on class ``name`` or its bases (None: not declared)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop(0)
        if current in seen or current not in classes:
            continue
        seen.add(current)
        bases, fields = classes[current]
        if field in fields:
            return fields[field]
        todo.extend(bases)
    return None


def _all_fields(classes: dict, name: str) -> dict[str, str]:
    """Every field of class ``name`` with its bases' (nearest first)."""
    found: dict[str, str] = {}
    todo, seen = [name], set()
    while todo:
        current = todo.pop(0)
        if current in seen or current not in classes:
            continue
        seen.add(current)
        bases, fields = classes[current]
        for field, kind in fields.items():
            found.setdefault(field, kind)
        todo.extend(bases)
    return found


def flatten(document: dict, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys of a nested mapping (a ``{}`` mapping is a leaf)."""
    out: dict[str, Any] = {}
    for key, value in document.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out[dotted] = value
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _target(key: str, parent: str) -> str:
    """An interpolation's key made absolute (``.x`` is relative to ``parent``)."""
    return f"{parent}{key}" if key.startswith(".") else key


def typed_keys(document: dict, classes: dict, legacy: set[str]) -> dict[str, str]:
    """Every leaf key of one resolved config with its type names (see the module docstring)."""
    flat = flatten(document)
    cache: dict[str, str] = {}

    def declared(key: str) -> str | None:
        parent, _, field = key.rpartition(".")
        target = flat.get(f"{parent}._target_") if parent else None
        return _field(classes, target.split(".")[-1], field) if isinstance(target, str) else None

    def resolve(key: str, depth: int = 0) -> str:
        if key in cache:
            return cache[key]
        value, parent = flat[key], key.rpartition(".")[0]
        kind = value_type(value)
        if isinstance(value, str) and depth < 20:
            select, reference = _SELECT.match(value), _REFERENCE.match(value)
            if select or reference:
                match = select or reference
                assert match is not None
                target = _target(match.group(1).strip(), parent + "." if parent else "")
                kind = resolve(target, depth + 1) if target in flat else "null"
                default = select.group(2) if select else None
                if kind in ("null", "any") and default is not None:
                    kind = value_type(yaml.safe_load(default.strip() or "null"))
        if kind in ("null", "any"):
            kind = declared(key) or "any"
        else:
            annotated = declared(key)
            if annotated is not None and annotated != "any":
                kind = "|".join(dict.fromkeys([kind, *annotated.split("|")]))
        cache[key] = kind
        return kind

    keys: dict[str, str] = {}
    for key, value in flat.items():
        if key.endswith("._target_") or (isinstance(value, dict) and value):
            continue
        keys[key] = "legacy" if key in legacy else resolve(key)
    for key, value in flat.items():
        if not key.endswith("._target_") or not isinstance(value, str):
            continue
        section = key[: -len("._target_")]
        for field, kind in _all_fields(classes, value.split(".")[-1]).items():
            dotted = f"{section}.{field}"
            if field.startswith("_") or dotted in flat or kind == "dict":
                continue
            keys[f"+{dotted}"] = kind
    return keys


def release_keys(wheel_path: Path) -> dict[str, Any]:
    """The data file's document: every key of both configs, and the keys only one has."""
    with zipfile.ZipFile(wheel_path) as wheel:
        classes = dataclass_fields(wheel)
        legacy = set(flatten(yaml.safe_load(wheel.read(LEGACY))))
        per_config = {
            config: typed_keys(yaml.safe_load(wheel.read(member)), classes, legacy)
            for config, member in CONFIGS.items()
        }
    keys: dict[str, str] = {}
    for typed in per_config.values():
        for key, kind in typed.items():
            old = keys.get(key)
            parts = [*(old or "").split("|"), *kind.split("|")]
            keys[key] = "|".join(dict.fromkeys(part for part in parts if part))
    only_in = {}
    for config, typed in per_config.items():
        others = [set(t) for name, t in per_config.items() if name != config]
        only_in[config] = sorted(set(typed) - set().union(*others))
    return {
        "framework": "verl",
        "release": VERSION,
        "source": SOURCE,
        "keys": dict(sorted(keys.items())),
        "only_in": only_in,
    }


def key_problem(document: dict[str, Any], config: str, key: str, value: str) -> str | None:
    """Why ``key=value`` is not a valid override of ``config`` at the release (None: valid)."""
    kind = document["keys"].get(key)
    if kind is None:
        plus = "+" + key if not key.startswith("+") else key[1:]
        hint = f" (it is {plus}: {document['keys'][plus]})" if plus in document["keys"] else ""
        return f"{key}: no such key in {document['framework']} {document['release']}{hint}"
    others = [name for name, only in document["only_in"].items() if name != config]
    if any(key in document["only_in"][name] for name in others):
        return f"{key}: not a key of --config-name={config}"
    if kind == "legacy":
        return f"{key}: a legacy key main_ppo {document['release']} never reads"
    if not accepts(kind, value):
        return f"{key}={value}: {override_type(value)}, the key takes {kind}"
    return None


def published_pairs() -> list[tuple[Path, Path]]:
    """(instance, plan) of every published run: ``X.yaml`` beside ``X.plan.json``."""
    pairs = []
    for plan in sorted((ROOT / "instances" / "published").rglob("*.plan.json")):
        instance = plan.with_name(plan.name[: -len(".plan.json")] + ".yaml")
        if instance.is_file():
            pairs.append((instance, plan))
    return pairs


def _outside(problem: Any, plan: Any) -> list[str]:
    """The verl rules ``plan`` breaks (empty: inside verl's plan space, or no rules yet)."""
    try:
        from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
    except ImportError:
        return []
    problem = problem.for_plan(plan)
    framework = FRAMEWORKS["verl"]
    unsupported = framework.unsupported(problem.instance)
    gpus = problem.instance.hardware.num_gpus
    found = plan_problems(framework, problem.directory.template, plan, gpus)
    return ([unsupported.line()] if unsupported else []) + found


def exported(instance: Path, plan_path: Path) -> tuple[str, list[tuple[str, str]], list[str]]:
    """(config name, ``key=value`` pairs, rules broken) of one plan's verl export."""
    from rlplan.outputs.frameworks import FRAMEWORKS, framework_settings
    from rlplan.rpeg.evaluation.problem import Problem
    from rlplan.rpeg.model.plan import read_plan

    problem = Problem.load(str(instance))
    plan = read_plan(plan_path, problem.directory)
    broken = _outside(problem, plan)
    module = FRAMEWORKS["verl"]
    text = module.render(framework_settings(problem, plan, "verl", plan_path.name))
    found = re.search(r"--config-name=(\w+)", text)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    pairs = [(key, value) for key, _, value in (line.partition("=") for line in lines)]
    return (found.group(1) if found else "ppo_trainer"), pairs, broken


def check(document: dict[str, Any], plans: list[tuple[Path, Path]]) -> dict[str, list]:
    """Valid and invalid keys of every plan's export, apart for plans outside verl's space.

    Returns ``{"inside": [valid count, invalid lines], "outside": [...]}``:
    ``export-config`` refuses the plans outside; their keys are what
    ``settings`` would write for them.
    """
    counts: dict[str, list] = {"inside": [0, []], "outside": [0, []]}
    for instance, plan in plans:
        config, pairs, broken = exported(instance, plan)
        group = counts["outside" if broken else "inside"]
        if broken:
            print(f"{plan}: outside verl's plan space ({len(broken)} rules broken)")
        for key, value in pairs:
            problem = key_problem(document, config, key, value)
            if problem is None:
                group[0] += 1
            else:
                name = plan.name if plan.name != "plan.json" else f"{plan.parent.name}/{plan.name}"
                group[1].append(f"{name}: {problem}")
    return counts


def _plan_pair(plan: str) -> tuple[Path, Path]:
    """(instance, plan) of a plan file given on the command line."""
    from rlplan.outputs.frameworks import locate_instance

    return Path(locate_instance(plan)), Path(plan)


def main(argv: list[str] | None = None) -> int:
    """Write the key list (``--write``) and check the exporter's keys; the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.release_keys.verl")
    parser.add_argument("--write", action="store_true", help=f"download and write {DATA}")
    parser.add_argument("--wheel", help="a downloaded verl wheel instead of pip download")
    parser.add_argument("--plans", nargs="*", default=[], help="more plan files to export")
    args = parser.parse_args(argv)
    if args.write or args.wheel or not DATA.is_file():
        with tempfile.TemporaryDirectory() as folder:
            wheel = Path(args.wheel) if args.wheel else fetch_wheel(Path(folder))
            document = release_keys(wheel)
        if args.write:
            DATA.parent.mkdir(parents=True, exist_ok=True)
            DATA.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {len(document['keys'])} keys to {DATA}")
    else:
        document = json.loads(DATA.read_text(encoding="utf-8"))
    plans = published_pairs() + [_plan_pair(plan) for plan in args.plans]
    counts = check(document, plans)
    failed = False
    for group, (valid, invalid) in counts.items():
        where = f"plans {group} verl's plan space"
        print(f"verl {VERSION}, {where}: {valid} valid, {len(invalid)} invalid")
        for line in invalid:
            print(f"  invalid {line}")
        failed = failed or (group == "inside" and bool(invalid))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
