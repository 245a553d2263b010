"""NeMo RL's config keys at the targeted release, and a check of the keys the exporter emits.

The release (:data:`rlplan.rpeg.model.frameworks.nemo_rl.RELEASE`, a tag of
NVIDIA-NeMo/RL) is not on PyPI: ``nemo-rl`` there is a 0.0.0 placeholder
without code. Get the tag's source with::

    git clone --depth 1 --branch v0.7.0 https://github.com/NVIDIA-NeMo/RL nemo-rl

Its keys are those of the GRPO and PPO example configs,
``examples/configs/**/*.yaml`` with a ``grpo`` or ``ppo`` section, each file
merged with the files its ``defaults`` names as NeMo RL's loader does
(``load_config_with_inheritance`` in nemo_rl/utils/config.py). A key's type
is the union over those files of its values' types, interpolations
(``${policy.train_micro_batch_size}``, ``${mul:...}``) resolved.

Usage (not run in CI)::

    python benchmarks/release_keys/nemo_rl.py --checkout nemo-rl   # writes the key list
    python benchmarks/release_keys/nemo_rl.py --solve              # checks the exports

``--git-dir`` reads a bare clone at the tag instead of a checkout. The check
exports every shipped instance/plan pair (``instances/published``) and, with
``--solve``, a greedy plan of every non-tiny ``instances/*.yaml``, then
prints the emitted keys found valid and invalid, and each invalid one.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "releases" / "nemo_rl.json"
CONFIGS = "examples/configs"
#: The configs the exporter names as ``defaults`` (their merged keys need no ``++``).
BASES = (
    "grpo_math_1B.yaml",
    "grpo_math_1B_megatron.yaml",
    "grpo_rm_1B.yaml",
    "ppo_math_1B.yaml",
    "ppo_math_1B_megatron.yaml",
)
#: Keys the release's code reads that no example config sets, with their types and where.
READ_BY_CODE = {
    "data.env_name": (
        "str",
        "nemo_rl/algorithms/ppo.py, setup: data_config['env_name'] == 'reward_model' "
        "gives the reward model its GPUs",
    ),
}
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def type_name(value: Any) -> str:
    """``int``, ``float``, ``bool``, ``str``, ``null``, ``list`` or ``dict``."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str")):
        if isinstance(value, kind):
            return name
    return "list" if isinstance(value, list) else "dict"


def accepts(types: str, value: Any) -> bool:
    """Whether a key of ``types`` (``int|null``) takes ``value`` (an int also for a float)."""
    allowed = set(types.split("|"))
    name = type_name(value)
    return name in allowed or (name == "int" and "float" in allowed)


def _merge(base: dict, override: dict) -> dict:
    """``override`` over ``base``, recursively; ``_override_: true`` replaces a section."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and value.get("_override_"):
            out[key] = {k: v for k, v in value.items() if k != "_override_"}
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def merged(name: str, raw: dict[str, dict]) -> dict:
    """Config ``name`` (its path in the repository) with its ``defaults`` merged in."""
    config = dict(raw[name])
    parents = config.pop("defaults", None)
    if parents is None:
        return config
    folder = os.path.dirname(name)
    base: dict = {}
    for parent in [parents] if isinstance(parents, str) else parents:
        base = _merge(base, merged(os.path.normpath(os.path.join(folder, str(parent))), raw))
    return _merge(base, config)


def flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf keys of ``tree`` (an empty mapping is a leaf of type ``dict``)."""
    leaves: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            leaves.update(flatten(value, f"{dotted}."))
        else:
            leaves[dotted] = value
    return leaves


def _resolved(value: Any, leaves: dict[str, Any], depth: int = 0) -> Any:
    """An interpolation's value: a reference followed, ``${mul:..}`` etc. as a number."""
    if not isinstance(value, str) or "${" not in value or depth > 8:
        return value
    match = _REFERENCE.match(value)
    if match and match.group(1) in leaves:
        return _resolved(leaves[match.group(1)], leaves, depth + 1)
    if value.startswith(("${mul:", "${max:")):
        return 1
    return 1.0 if value.startswith("${div:") else value


def read_configs(checkout: Path | None, git_dir: Path | None, tag: str) -> dict[str, dict]:
    """Every YAML mapping under examples/, by path in the repository."""
    texts: dict[str, str] = {}
    if checkout is not None:
        for path in sorted((checkout / "examples").rglob("*.yaml")):
            texts[path.relative_to(checkout).as_posix()] = path.read_text()
    else:
        archive = subprocess.run(
            ["git", f"--git-dir={git_dir}", "archive", tag, "examples"],
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(".yaml"):
                    texts[member.name] = tar.extractfile(member).read().decode()
    configs = {name: yaml.safe_load(text) for name, text in texts.items()}
    return {name: tree for name, tree in configs.items() if isinstance(tree, dict)}


def extract(raw: dict[str, dict], source: str) -> dict[str, Any]:
    """The key list: every key of the GRPO and PPO configs with its types."""
    types: dict[str, set[str]] = {}
    used = 0
    for name in sorted(raw):
        if not name.startswith(f"{CONFIGS}/"):
            continue
        tree = merged(name, raw)
        if "grpo" not in tree and "ppo" not in tree:
            continue
        used += 1
        leaves = flatten(tree)
        for key, value in leaves.items():
            types.setdefault(key, set()).add(type_name(_resolved(value, leaves)))
    from rlplan.rpeg.model.frameworks.nemo_rl import RELEASE

    read = "; ".join(f"{key} ({where})" for key, (_, where) in READ_BY_CODE.items())
    for key, (kind, _) in READ_BY_CODE.items():
        types.setdefault(key, set()).add(kind)
    return {
        "framework": "nemo-rl",
        "release": RELEASE,
        "source": f"{source}; {used} GRPO and PPO configs under {CONFIGS} with their "
        "defaults merged (nemo_rl/utils/config.py, load_config_with_inheritance); "
        f"read by the code only: {read}",
        "keys": {key: "|".join(sorted(names)) for key, names in sorted(types.items())},
        "base_configs": {name: sorted(flatten(merged(f"{CONFIGS}/{name}", raw))) for name in BASES},
    }


def emitted(problem: Any, plan: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    """The ``(key, value)`` pairs the NeMo RL exporter sets for ``plan``, and its bases.

    The bases are the ``defaults`` it sets, else the example configs its
    comment lines name (``examples/configs/X.yaml``).
    """
    from rlplan.outputs.frameworks import nemo_rl
    from rlplan.outputs.frameworks.common import PlanFacts

    settings = nemo_rl.settings(PlanFacts(problem, plan), "plan.json")
    pairs = [(key, value) for kind, key, value in settings.items if kind == "set"]
    bases = [value for key, value in pairs if key == "defaults"]
    if bases:
        return pairs, [bases[0]] if isinstance(bases[0], str) else list(bases[0])
    named = re.findall(
        rf"{CONFIGS}/([\w.]+\.yaml)", " ".join(t for k, t, _ in settings.items if k == "comment")
    )
    return pairs, named[:1]


def outside_bases(pairs: list[tuple[str, Any]], bases: list[str], data: dict[str, Any]) -> list:
    """Emitted keys that none of ``bases`` has: ``++key=value`` on a command line."""
    known = set().union(*(data["base_configs"].get(name, ()) for name in bases))
    return [key for key, _ in pairs if key != "defaults" and key not in known]


def problems(pairs: list[tuple[str, Any]], data: dict[str, Any]) -> list[str]:
    """Why each emitted pair is invalid at the release (empty: all valid)."""
    keys, bases = data["keys"], data["base_configs"]
    found = []
    for key, value in pairs:
        if key == "defaults":
            named = [value] if isinstance(value, str) else value
            found += [f"defaults: {n} is not a base config" for n in named if n not in bases]
        elif key not in keys:
            found.append(f"{key}: not a key of the release")
        elif not accepts(keys[key], value):
            found.append(f"{key}: {type_name(value)} {value!r}, the release has {keys[key]}")
    return found


def plan_pairs(solve: bool, folder: Path) -> list[tuple[str, str]]:
    """(instance, plan) files: the published pairs and, with ``solve``, greedy plans."""
    pairs = [
        (str(plan).replace(".plan.json", ".yaml"), str(plan))
        for plan in sorted((ROOT / "instances" / "published").rglob("*.plan.json"))
    ]
    if not solve:
        return pairs
    for instance in sorted((ROOT / "instances").glob("*.yaml")):
        if instance.name.startswith("tiny_"):
            continue
        out = folder / instance.stem
        command = [sys.executable, "-m", "rlplan", "solve", str(instance), "--solver"]
        command += ["greedy", "--time-limit", "10", "--threads", "1", "--quiet"]
        done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True)
        if done.returncode == 0 and (out / "plan.json").exists():
            pairs.append((str(instance), str(out / "plan.json")))
        else:
            print(f"{instance.name}: no plan ({done.stderr.strip().splitlines()[-1:]})")
    return pairs


def check(data: dict[str, Any], solve: bool) -> int:
    """Export every pair, print valid and invalid counts and each invalid key; 1 if any."""
    from rlplan.rpeg.evaluation.problem import Problem
    from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
    from rlplan.rpeg.model.plan import read_plan

    framework = FRAMEWORKS["nemo-rl"]
    valid = invalid = outside = plus = 0
    with tempfile.TemporaryDirectory() as folder:
        for instance, plan_file in plan_pairs(solve, Path(folder)):
            problem = Problem.load(instance)
            plan = read_plan(plan_file, problem.directory)
            template, gpus = problem.directory.template, problem.instance.hardware.num_gpus
            if framework.unsupported(problem.instance) or plan_problems(
                framework, template, plan, gpus
            ):
                outside += 1
            pairs, bases = emitted(problem, plan)
            found = problems(pairs, data)
            beyond = outside_bases(pairs, bases, data)
            plus += len(beyond)
            if beyond:
                print(f"beyond   {Path(instance).stem} ({', '.join(bases)}): {', '.join(beyond)}")
            invalid += len(found)
            valid += len(pairs) - len(found)
            for line in found:
                print(f"invalid  {Path(instance).stem}: {line}")
    print(f"{data['framework']} {data['release']}: {valid} valid, {invalid} invalid keys")
    print(f"{plus} valid keys not in the base config named (++ on a command line)")
    print(f"({outside} of the plans lie outside the framework's rules)")
    return 1 if invalid else 0


def main(argv: list[str] | None = None) -> int:
    """Write the key list (``--checkout`` or ``--git-dir``), then check the exports."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, help="a source tree of NVIDIA-NeMo/RL at the tag")
    parser.add_argument("--git-dir", type=Path, help="a bare clone holding the tag")
    parser.add_argument("--tag", default=None, help="the tag (default: the targeted release)")
    parser.add_argument("--solve", action="store_true", help="also check greedy plans")
    args = parser.parse_args(argv)
    if args.checkout or args.git_dir:
        from rlplan.rpeg.model.frameworks.nemo_rl import RELEASE

        tag = args.tag or RELEASE
        raw = read_configs(args.checkout, args.git_dir, tag)
        commit = ""
        if args.git_dir:
            rev = ["git", f"--git-dir={args.git_dir}", "rev-parse", f"{tag}^{{commit}}"]
            commit = subprocess.run(rev, check=True, capture_output=True, text=True).stdout
            commit = f" (commit {commit.strip()})"
        data = extract(raw, f"NVIDIA-NeMo/RL tag {tag}{commit}")
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {DATA}: {len(data['keys'])} keys")
    return check(json.loads(DATA.read_text()), args.solve)


if __name__ == "__main__":
    sys.exit(main())
