"""OpenRLHF's flags at the targeted release, and the exporter's flags checked against them.

``python -m benchmarks.release_keys.openrlhf [--solve SECONDS] [--runs DIR] [--offline]``

1. Fetches the release the OpenRLHF plan space targets
   (:data:`rlplan.rpeg.model.frameworks.openrlhf.RELEASE`) from PyPI with
   ``pip download --no-deps openrlhf==VERSION`` (the wheel holds the
   sources; the same file is at the git tag: ``git clone --branch v0.11.0
   https://github.com/OpenRLHF/OpenRLHF``, openrlhf/cli/train_ppo_ray.py).
2. Builds the argument parser of ``openrlhf/cli/train_ppo_ray.py`` (the
   ``add_argument`` statements of its ``__main__`` block, run without
   OpenRLHF's dependencies) and writes every flag with its type to
   ``tests/data/releases/openrlhf.json``.
3. Exports every shipped instance/plan pair (``instances/published/``, its
   subfolders, and with ``--solve`` the plans ``rlplan solve --solver local``
   finds in SECONDS on the non-tiny ``instances/*.yaml``) as OpenRLHF flags
   and checks every flag and its value's type against the list, printing
   valid / invalid counts and each invalid flag. It also counts the exports
   whose Ray groups ask for more GPUs than the cluster has.

``--offline`` skips step 1 and 2 and checks against the JSON file as it is.
Not run by the test suite (it downloads).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from rlplan.outputs.frameworks import framework_settings
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import read_plan

ROOT = Path(__file__).resolve().parents[2]
KEYS_FILE = ROOT / "tests" / "data" / "releases" / "openrlhf.json"
SCRIPT = "openrlhf/cli/train_ppo_ray.py"
#: The release's tag and commit on OpenRLHF/OpenRLHF (``git rev-parse v0.11.0^{commit}``).
COMMIT = "3c3be6234e0cb353e76bb8019947db9dfe99fca7"
#: Instances the ``--solve`` step leaves out (tiny ones and the infeasible one).
SKIPPED = ("tiny_", "infeasible_")


def release_version() -> str:
    """The targeted release without its ``v`` (``0.11.0``)."""
    from rlplan.rpeg.model.frameworks.openrlhf import FRAMEWORK

    return FRAMEWORK.release.removeprefix("v")


def fetch_script(version: str, folder: str) -> str:
    """The text of train_ppo_ray.py in the ``openrlhf==version`` wheel from PyPI."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", f"openrlhf=={version}"]
    subprocess.run([*command, "-d", folder], check=True, stdout=subprocess.DEVNULL)
    (wheel,) = glob.glob(os.path.join(folder, f"openrlhf-{version}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [name for name in archive.namelist() if name.endswith(SCRIPT)]
        return archive.read(member).decode("utf-8")


def build_parser(source: str) -> argparse.ArgumentParser:
    """The parser the script's ``__main__`` block builds, up to ``parser.parse_args()``.

    Only those statements run (they need nothing but ``argparse`` and
    ``datetime``), so OpenRLHF's own imports (ray, torch) are never loaded.
    """
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            body = []
            for statement in node.body:
                if "parse_args" in ast.unparse(statement):
                    break
                body.append(statement)
            module = ast.Module(body=body, type_ignores=[])
            namespace: dict[str, Any] = {"argparse": argparse, "datetime": datetime.datetime}
            exec(compile(module, SCRIPT, "exec"), namespace)  # the release's own statements
            return namespace["parser"]
    raise ValueError(f"{SCRIPT}: no __main__ block")


def type_name(action: argparse.Action) -> str:
    """``bool`` for a switch, else the value's type (``int``, ``str``, ``list[float]`` ...)."""
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        return "bool"
    name = getattr(action.type, "__name__", "str") if action.type is not None else "str"
    return f"list[{name}]" if action.nargs not in (None, "?") else name


def extract_keys(source: str) -> dict[str, str]:
    """Every ``--flag`` of the script with its type name, sorted."""
    keys: dict[str, str] = {}
    for action in build_parser(source)._actions:
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                keys[option] = type_name(action)
    return dict(sorted(keys.items()))


def write_keys(version: str, keys: dict[str, str]) -> None:
    """``tests/data/releases/openrlhf.json``."""
    document = {
        "framework": "openrlhf",
        "release": f"v{version}",
        "source": (
            f"OpenRLHF/OpenRLHF {SCRIPT} at tag v{version} (commit {COMMIT}), read from the "
            f"PyPI wheel openrlhf=={version}: the argparse flags of its __main__ block"
        ),
        "keys": keys,
    }
    KEYS_FILE.parent.mkdir(parents=True, exist_ok=True)
    KEYS_FILE.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def value_fits(value: Any, type_word: str) -> bool:
    """Whether an exported value is what argparse takes for a flag of ``type_word``."""
    if type_word == "bool":
        return value is True
    if isinstance(value, bool):
        return False
    if type_word == "int":
        return isinstance(value, int)
    if type_word == "float":
        return isinstance(value, int | float)
    if type_word == "str":
        return isinstance(value, str)
    return False


def pairs(solve_seconds: float, runs: str | None) -> list[tuple[str, str]]:
    """(instance, plan) files: the published ones, then solved ones.

    With ``solve_seconds`` > 0 the non-tiny ``instances/*.yaml`` are solved
    into ``runs`` (a new temporary folder when None), one ``NAME/plan.json``
    each; with ``runs`` alone the plans already there are read.
    """
    found = []
    published = str(ROOT / "instances" / "published" / "**" / "*.plan.json")
    for plan in sorted(glob.glob(published, recursive=True)):
        found.append((plan.removesuffix(".plan.json") + ".yaml", plan))
    if solve_seconds <= 0 and runs is None:
        return found
    out = runs or tempfile.mkdtemp(prefix="openrlhf-keys-")
    for instance in sorted(glob.glob(str(ROOT / "instances" / "*.yaml"))):
        name = Path(instance).stem
        if name.startswith(SKIPPED):
            continue
        run = os.path.join(out, name)
        if solve_seconds > 0:
            command = [sys.executable, "-m", "rlplan", "solve", instance, "--solver", "local"]
            command += ["--time-limit", str(solve_seconds), "--out", run, "--quiet"]
            subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
        if os.path.isfile(os.path.join(run, "plan.json")):
            found.append((instance, os.path.join(run, "plan.json")))
    return found


def ray_gpus(flags: dict[str, Any]) -> int:
    """GPUs the exported flags ask Ray for, as train_ppo_ray.py's train() places the groups.

    A group in a shared placement group (``--train.colocate_*``) adds nothing
    beyond that placement group; any other group, and the vLLM engines unless
    they join the actor's placement group (colocate_all, synchronous), add
    their own GPUs. Groups default to 1 node x 8 GPUs.
    """

    def size(group: str) -> int:
        return flags.get(f"--{group}.num_nodes", 1) * flags.get(f"--{group}.num_gpus_per_node", 8)

    colocate_all = "--train.colocate_all" in flags
    asynchronous = "--train.async_enable" in flags
    actor_pg = colocate_all or "--train.colocate_actor_ref" in flags
    total = size("actor")
    if not (colocate_all and not asynchronous):
        total += flags.get("--vllm.num_engines", 0) * flags.get("--vllm.tensor_parallel_size", 1)
    if flags.get("--algo.kl.init_coef", 0.01) > 0 and not actor_pg:
        total += size("ref")
    critic = flags.get("--algo.advantage.estimator", "gae") == "gae"
    pair = critic and "--train.colocate_critic_reward" in flags
    shared = pair or colocate_all
    if pair:
        total += size("critic")
    if critic and not shared:
        total += size("critic")
    if "--reward.remote_url" not in flags and not shared:
        total += size("reward")
    return total


def check(keys: dict[str, str], solve_seconds: float, runs: str | None) -> int:
    """Export every pair, check its flags; prints the counts and returns the invalid count."""
    valid = invalid = over = exports = 0
    for instance, plan_file in pairs(solve_seconds, runs):
        problem = Problem.load(instance)
        plan = read_plan(plan_file, problem.directory)
        name = Path(instance).stem
        settings = framework_settings(problem, plan, "openrlhf", Path(plan_file).name)
        flags = {key: value for kind, key, value in settings.items if kind == "set"}
        exports += 1
        for key, value in flags.items():
            if key in keys and value_fits(value, keys[key]):
                valid += 1
                continue
            invalid += 1
            why = "no such flag" if key not in keys else f"{value!r} is not {keys[key]}"
            print(f"invalid: {name}: {key} ({why})")
        hardware = problem.instance.hardware
        cluster = hardware.racks * hardware.nodes_per_rack * hardware.gpus_per_node
        if ray_gpus(flags) > cluster:
            over += 1
            print(f"too many GPUs: {name}: {ray_gpus(flags)} of {cluster}")
    print(f"{exports} exports: {valid} valid flags, {invalid} invalid flags")
    print(f"{over} of {exports} exports ask Ray for more GPUs than the cluster has")
    return invalid


def main(argv: list[str] | None = None) -> int:
    """Fetch, extract, write and check; returns 1 when a flag is invalid."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.release_keys.openrlhf")
    parser.add_argument("--solve", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--runs", metavar="DIR", help="folder of NAME/plan.json solve runs")
    parser.add_argument("--offline", action="store_true")
    args = parser.parse_args(argv)
    if not args.offline:
        version = release_version()
        with tempfile.TemporaryDirectory() as folder:
            keys = extract_keys(fetch_script(version, folder))
        write_keys(version, keys)
        print(f"wrote {KEYS_FILE}: {len(keys)} flags of openrlhf {version}")
    keys = json.loads(KEYS_FILE.read_text(encoding="utf-8"))["keys"]
    return 1 if check(keys, args.solve, args.runs) else 0


if __name__ == "__main__":
    sys.exit(main())
