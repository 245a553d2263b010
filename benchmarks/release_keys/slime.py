"""slime's flags at the targeted release, and the exporter's flags checked against them.

``python -m benchmarks.release_keys.slime [--slime-git DIR] [--megatron-git DIR]
[--sglang-wheel FILE] [--solve SECONDS] [--runs DIR] [--offline]``

1. Gets the sources slime's ``parse_args`` (slime/utils/arguments.py) reads
   its flags from, at the release the slime plan space targets
   (:data:`rlplan.rpeg.model.frameworks.slime.RELEASE`, tag v0.3.1 of
   THUDM/slime, commit :data:`SLIME_COMMIT`; slime is not on PyPI):

   * slime itself (``git fetch`` of the commit, or ``--slime-git`` naming a
     git directory that has it);
   * Megatron-LM at the commit slime's docker/Dockerfile pins
     (``MEGATRON_COMMIT``), with the arguments.py and transformer_config.py
     hunks of slime's docker/patch/latest/megatron.patch applied (``git
     apply``), or ``--megatron-git``;
   * SGLang's server_args.py from the PyPI wheel of the version slime's
     docker/README.md names as its stable image (``pip download --no-deps
     sglang==0.5.15.post1``), or ``--sglang-wheel``.

2. Reads every flag with its type from those files
   (:mod:`benchmarks.release_keys.slime_parsers`, without running them:
   they import torch and Megatron) and writes ``tests/data/releases/slime.json``.
   Left out: the ``--router-*`` flags of slime's sglang_router fork (a wheel
   of its own on GitHub; the exporter sets none).
3. Exports every shipped instance/plan pair (``instances/published/`` and,
   with ``--solve``, the plans ``rlplan solve --framework slime`` finds in
   SECONDS on the non-tiny ``instances/*.yaml``) as slime flags and checks
   every flag and its value's type against the list, printing valid /
   invalid counts and each invalid flag, and counts the exports whose
   placement group asks for more GPUs than the cluster has.

``--offline`` skips steps 1 and 2 and checks against the JSON file as it is.
Not run by the test suite (it downloads).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from benchmarks.release_keys.openrlhf import value_fits
from benchmarks.release_keys.slime_parsers import (
    SourceTree,
    argparse_flags,
    megatron_flags,
    sglang_flags,
    skipped_sglang_args,
)
from rlplan.outputs.frameworks import framework_settings
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import read_plan

ROOT = Path(__file__).resolve().parents[2]
KEYS_FILE = ROOT / "tests" / "data" / "releases" / "slime.json"
SLIME_URL = "https://github.com/THUDM/slime"
MEGATRON_URL = "https://github.com/NVIDIA/Megatron-LM"
#: ``git rev-parse v0.3.1^{commit}`` on THUDM/slime (2026-08-06).
SLIME_COMMIT = "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"
#: docker/Dockerfile ``ARG MEGATRON_COMMIT`` at slime v0.3.1 (docker/README.md: "megatron dev").
MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"
#: docker/Dockerfile ``ARG PATCH_VERSION=latest``: the patch applied to that Megatron-LM.
MEGATRON_PATCH = "docker/patch/latest/megatron.patch"
#: Files of Megatron-LM the patch adds flags to (a --use-gated-attention flag, two fields).
PATCHED = ("megatron/training/arguments.py", "megatron/core/transformer/transformer_config.py")
#: docker/README.md at slime v0.3.1: "current stable version is: sglang v0.5.15.post1
#: (0b3bb0cb...)"; docker/Dockerfile ``SGLANG_IMAGE_TAG=v0.5.15.post1-cu129``.
SGLANG_VERSION = "0.5.15.post1"
SGLANG_SERVER_ARGS = "sglang/srt/server_args.py"
#: slime's files holding ``add_argument`` calls of its parser.
SLIME_FILES = ("slime/utils/arguments.py", "slime/backends/sglang_utils/arguments.py")


def git_reader(git_dir: str, commit: str) -> Any:
    """Repository path -> text at ``commit`` of the git directory ``git_dir`` (None if absent)."""

    def read(path: str) -> str | None:
        command = ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        return result.stdout if result.returncode == 0 else None

    return read


def fetch_commit(url: str, commit: str, folder: str) -> str:
    """A git directory holding ``commit`` of ``url`` (a shallow fetch), returned as its path."""
    subprocess.run(["git", "init", "-q", "--bare", folder], check=True)
    subprocess.run(
        ["git", "--git-dir", folder, "fetch", "-q", "--depth", "1", url, commit], check=True
    )
    return folder


def patched_megatron(read: Any, patch: str, folder: str) -> Any:
    """``read`` with :data:`PATCHED` as slime's image has them (``git apply`` of their hunks)."""
    for path in PATCHED:
        target = Path(folder, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(read(path) or "", encoding="utf-8")
    Path(folder, "megatron.patch").write_text(patch, encoding="utf-8")
    includes = [f"--include={path}" for path in PATCHED]
    subprocess.run(["git", "apply", *includes, "megatron.patch"], cwd=folder, check=True)
    texts = {path: Path(folder, path).read_text(encoding="utf-8") for path in PATCHED}
    return lambda path: texts[path] if path in texts else read(path)


def sglang_server_args(wheel: str | None, folder: str) -> str:
    """server_args.py of the ``sglang==SGLANG_VERSION`` wheel (downloaded without ``wheel``)."""
    if wheel is None:
        command = [sys.executable, "-m", "pip", "download", "--no-deps"]
        command += [f"sglang=={SGLANG_VERSION}", "-d", folder]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        (wheel,) = glob.glob(os.path.join(folder, f"sglang-{SGLANG_VERSION}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(SGLANG_SERVER_ARGS).decode("utf-8")


def extract_keys(slime_read: Any, megatron_read: Any, server_args: str) -> dict[str, str]:
    """Every flag slime v0.3.1's ``parse_args`` accepts, with its type word, sorted."""
    keys: dict[str, str] = {}
    keys.update(megatron_flags(SourceTree(megatron_read)))
    for path in SLIME_FILES:
        text = slime_read(path)
        assert text is not None, path
        for flag, word in argparse_flags(text, ("add_argument", "reset_arg")).items():
            keys.setdefault(flag, word)
    sglang_arguments = slime_read(SLIME_FILES[1])
    skipped = skipped_sglang_args(sglang_arguments)
    for flag, word in sglang_flags(server_args, skipped).items():
        keys.setdefault(flag, word)
    return dict(sorted(keys.items()))


#: Flags of slime's launch scripts that are Ray's (ray start, ray job submit), not slime's.
RAY_FLAGS = frozenset(
    {"--address", "--dashboard-host", "--dashboard-port", "--disable-usage-stats", "--force"}
    | {"--head", "--node-ip-address", "--num-gpus", "--runtime-env-json"}
)


def script_flags(git_dir: str) -> set[str]:
    """Every ``--flag`` on a non-comment line of slime's scripts/*.sh at :data:`SLIME_COMMIT`."""
    command = ["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", SLIME_COMMIT]
    listed = subprocess.run([*command, "scripts/"], capture_output=True, text=True, check=True)
    read = git_reader(git_dir, SLIME_COMMIT)
    flags: set[str] = set()
    for path in listed.stdout.split():
        if path.endswith(".sh"):
            for line in (read(path) or "").splitlines():
                code = line.split("#", 1)[0]
                words = (word.strip("\"';") for word in code.split())
                flags |= {word for word in words if word.startswith("--") and len(word) > 2}
    return {flag.split("=", 1)[0] for flag in flags} - RAY_FLAGS


def write_keys(release: str, keys: dict[str, str]) -> None:
    """``tests/data/releases/slime.json``."""
    document = {
        "framework": "slime",
        "release": release,
        "source": (
            f"THUDM/slime {', '.join(SLIME_FILES)} at tag {release} (commit {SLIME_COMMIT}): "
            "slime's parse_args, i.e. its own flags, Megatron-LM's megatron/training/"
            f"arguments.py at {MEGATRON_COMMIT} (slime's docker/Dockerfile; argparse calls "
            f"and ArgumentGroupFactory dataclass fields, with {MEGATRON_PATCH}) and SGLang "
            f"{SGLANG_VERSION}'s ServerArgs flags as --sglang-* (PyPI wheel; the skipped_args "
            "of slime/backends/sglang_utils/arguments.py left out); not the --router-* flags "
            "of slime's sglang_router fork"
        ),
        "keys": keys,
    }
    KEYS_FILE.parent.mkdir(parents=True, exist_ok=True)
    KEYS_FILE.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def pairs(solve_seconds: float, runs: str | None) -> list[tuple[str, str]]:
    """(instance, plan) files: the published ones, then plans solved for slime.

    With ``solve_seconds`` > 0 the non-tiny ``instances/*.yaml`` are solved with
    ``--framework slime`` into ``runs`` (a new temporary folder when None), one
    ``NAME/plan.json`` each; with ``runs`` alone the plans already there are read.
    """
    published = str(ROOT / "instances" / "published" / "**" / "*.plan.json")
    found = [
        (plan.removesuffix(".plan.json") + ".yaml", plan)
        for plan in sorted(glob.glob(published, recursive=True))
    ]
    if solve_seconds <= 0 and runs is None:
        return found
    out = runs or tempfile.mkdtemp(prefix="slime-keys-")
    for instance in sorted(glob.glob(str(ROOT / "instances" / "*.yaml"))):
        name = Path(instance).stem
        if name.startswith(("tiny_", "infeasible_")):
            continue
        run = os.path.join(out, name)
        if solve_seconds > 0:
            command = [sys.executable, "-m", "rlplan", "solve", instance, "--solver", "local"]
            command += ["--framework", "slime", "--time-limit", str(solve_seconds)]
            subprocess.run(
                [*command, "--out", run, "--quiet"], stdout=subprocess.DEVNULL, check=False
            )
        if os.path.isfile(os.path.join(run, "plan.json")):
            found.append((instance, os.path.join(run, "plan.json")))
    return found


def placement_gpus(flags: dict[str, Any]) -> int:
    """GPUs of slime's placement group for these flags (placement_group.py, slime's defaults)."""
    actor = flags.get("--actor-num-nodes", 1) * flags.get("--actor-num-gpus-per-node", 8)
    rollout = flags.get("--rollout-num-gpus", actor if "--colocate" in flags else 0)
    return max(actor, rollout) if "--colocate" in flags else actor + rollout


def check(keys: dict[str, str], pairs: list[tuple[str, str]]) -> int:
    """Export every pair, check its flags; prints the counts and returns the invalid count."""
    valid = invalid = over = exports = 0
    for instance, plan_file in pairs:
        problem = Problem.load(instance)
        plan = read_plan(plan_file, problem.directory)
        name = Path(instance).stem
        settings = framework_settings(problem, plan, "slime", Path(plan_file).name)
        flags = {key: value for kind, key, value in settings.items if kind == "set"}
        exports += 1
        for key, value in flags.items():
            if key in keys and value_fits(value, keys[key]):
                valid += 1
                continue
            invalid += 1
            why = "no such flag" if key not in keys else f"{value!r} is not {keys[key]}"
            print(f"invalid: {name}: {key} ({why})")
        cluster = problem.instance.hardware.num_gpus
        if placement_gpus(flags) > cluster:
            over += 1
            print(f"too many GPUs: {name}: {placement_gpus(flags)} of {cluster}")
    print(f"{exports} exports: {valid} valid flags, {invalid} invalid flags")
    print(f"{over} of {exports} exports ask Ray for more GPUs than the cluster has")
    return invalid


def fetch_keys(args: argparse.Namespace, release: str) -> dict[str, str]:
    """Steps 1 and 2: the sources, then their flags."""
    with tempfile.TemporaryDirectory() as folder:
        slime_git = args.slime_git or fetch_commit(SLIME_URL, SLIME_COMMIT, f"{folder}/slime")
        megatron_git = args.megatron_git or fetch_commit(
            MEGATRON_URL, MEGATRON_COMMIT, f"{folder}/megatron"
        )
        slime_read = git_reader(slime_git, SLIME_COMMIT)
        patch = slime_read(MEGATRON_PATCH)
        assert patch is not None, MEGATRON_PATCH
        megatron_read = patched_megatron(
            git_reader(megatron_git, MEGATRON_COMMIT), patch, f"{folder}/patched"
        )
        server_args = sglang_server_args(args.sglang_wheel, folder)
        keys = extract_keys(slime_read, megatron_read, server_args)
        # The readers' check: slime's own launch scripts use only flags of the list.
        used = script_flags(slime_git)
        missing = sorted(flag for flag in used if flag not in keys)
        print(f"slime's scripts/*.sh use {len(used)} flags; not in the list: {missing or 'none'}")
        return keys


def main(argv: list[str] | None = None) -> int:
    """Fetch, extract, write and check; returns 1 when a flag is invalid."""
    from rlplan.rpeg.model.frameworks.slime import RELEASE

    parser = argparse.ArgumentParser(prog="python -m benchmarks.release_keys.slime")
    parser.add_argument("--slime-git", metavar="DIR", help=f"git directory with {SLIME_COMMIT}")
    parser.add_argument("--megatron-git", metavar="DIR", help=f"with {MEGATRON_COMMIT}")
    parser.add_argument("--sglang-wheel", metavar="FILE", help=f"sglang {SGLANG_VERSION} wheel")
    parser.add_argument("--solve", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--runs", metavar="DIR", help="folder of NAME/plan.json solve runs")
    parser.add_argument("--offline", action="store_true")
    args = parser.parse_args(argv)
    if not args.offline:
        keys = fetch_keys(args, RELEASE)
        write_keys(RELEASE, keys)
        print(f"wrote {KEYS_FILE}: {len(keys)} flags of slime {RELEASE}")
    keys = json.loads(KEYS_FILE.read_text(encoding="utf-8"))["keys"]
    return 1 if check(keys, pairs(args.solve, args.runs)) else 0


if __name__ == "__main__":
    sys.exit(main())
