"""Mutation fuzzing of the shipped instances: ``python -m benchmarks.fuzz [--cases 5000]``.

Each case takes a shipped instance, applies one to three random mutations
(an absurd number, a scaled number, a wrong type, a deleted or unknown key,
a huge list, a duplicated YAML line, a truncated file) and runs ``main.py
check`` on it in a fresh process, as a user would; with ``--solve-share`` a
share of the cases also runs a one-second ``solve``. The contract under
test: exit code 0, 1 or 2, never a traceback, never a hang, a bounded time
per case, and one line on stderr for exit 2. The run prints the case count,
the exit-code distribution, tracebacks, hangs and the median and largest
time per case; the failing cases are kept in the output folder.

``tests/test_fuzz.py`` runs the same mutations in-process, a few hundred
cases drawn by hypothesis.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from rlplan.rpeg.schema.yamlio import loads

ROOT = Path(__file__).resolve().parent.parent

#: The instances mutated: every shipped instance file.
INSTANCE_FILES = tuple(
    sorted((ROOT / "instances").glob("*.yaml"))
    + sorted((ROOT / "instances").glob("published/*.yaml"))
)

#: Values a leaf may be replaced with: bounds of every kind, wrong types, non-finite numbers.
ABSURD_VALUES: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    3,
    7,
    64,
    65,
    256,
    4096,
    2**31,
    2**63,
    10**6,
    10**30,
    10**400,
    0.5,
    -0.0,
    1e-308,
    -1e308,
    1e308,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x",
    "1e9",
    True,
    False,
    None,
    [],
    {},
    [1, 2],
    {"a": 1},
)

#: Factors a numeric leaf may be scaled by.
SCALES = (0.0, 1e-9, 0.01, 0.5, 0.5, 2.0, 2.0, 4.0, 10.0, 1000.0, 1e9)


def leaves(document: Any, path: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indices) to a value below ``document``, itself excluded."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            found.append((*path, key))
            found.extend(leaves(value, (*path, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.append((*path, index))
            found.extend(leaves(value, (*path, index)))
    return found


def _parent(document: Any, path: tuple) -> Any:
    for key in path[:-1]:
        document = document[key]
    return document


def mutate_document(document: dict, rng: random.Random) -> str:
    """Apply one random mutation to ``document`` (in place); returns its name."""
    paths = leaves(document)
    path = rng.choice(paths)
    parent, key = _parent(document, path), path[-1]
    kind = rng.choice(
        ("absurd", "absurd", "scale", "scale", "scale", "delete", "unknown", "huge-list", "type")
    )
    if kind == "absurd":
        parent[key] = copy.deepcopy(rng.choice(ABSURD_VALUES))
    elif kind == "scale":
        numeric = [
            p
            for p in paths
            if isinstance(_parent(document, p)[p[-1]], int | float)
            and not isinstance(_parent(document, p)[p[-1]], bool)
        ]
        if not numeric:
            return "scale (no number)"
        path = rng.choice(numeric)
        parent, key = _parent(document, path), path[-1]
        value = parent[key] * rng.choice(SCALES)
        parent[key] = int(value) if isinstance(parent[key], int) and value < 2**63 else value
    elif kind == "delete":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    elif kind == "unknown":
        target = parent if isinstance(parent, dict) else document
        target[f"unknown_{rng.randrange(100)}"] = rng.choice(ABSURD_VALUES)
    elif kind == "huge-list":
        parent[key] = [rng.choice((1, 2, 4)) for _ in range(rng.choice((100, 10_000, 100_000)))]
    else:
        parent[key] = rng.choice((str(parent[key]), [parent[key]], {"value": parent[key]}))
    return f"{kind} {'.'.join(map(str, path))}"


def mutate_text(text: str, rng: random.Random) -> str:
    """A text-level mutation: a duplicated line (a duplicate key), a cut, or stray bytes."""
    lines = text.splitlines(keepends=True)
    kind = rng.choice(("duplicate", "truncate", "bytes"))
    if kind == "duplicate" and lines:
        index = rng.randrange(len(lines))
        lines.insert(index, lines[index])
        return "".join(lines)
    if kind == "truncate":
        return text[: rng.randrange(len(text) + 1)]
    position = rng.randrange(len(text) + 1)
    return (
        text[:position]
        + rng.choice(("\t", "{", "]", ":", "&a", "*a", "\x00", "\ufeff"))
        + text[position:]
    )


def make_case(rng: random.Random) -> tuple[Path, str, list[str]]:
    """A mutated instance: (source file, YAML text, mutations applied)."""
    source = rng.choice(INSTANCE_FILES)
    document = loads(source.read_text(encoding="utf-8"), str(source))
    applied = [mutate_document(document, rng) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if rng.random() < 0.15:
        text = mutate_text(text, rng)
        applied.append("text")
    return source, text, applied


def _write_case(folder: Path, source: Path, text: str) -> Path:
    """The case's YAML file, in ``folder`` (hf_config paths are relative to the source's)."""
    path = folder / source.name
    path.write_text(text, encoding="utf-8")
    return path


def run_case(path: Path, argv: list[str], timeout: float) -> dict:
    """Run ``main.py <argv> <path>`` in a fresh process; its exit code, time and verdict."""
    command = [sys.executable, str(ROOT / "main.py"), argv[0], str(path), *argv[1:]]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=path.parent
        )
    except subprocess.TimeoutExpired:
        return {"rc": "hang", "seconds": timeout, "problem": "hang"}
    seconds = time.perf_counter() - started
    problems = []
    if done.returncode not in (0, 1, 2, 3 if argv[0] == "solve" else 0):
        problems.append(f"exit code {done.returncode}")
    if "Traceback" in done.stderr or "Traceback" in done.stdout:
        problems.append("traceback")
    if done.returncode == 2 and len(done.stderr.strip().splitlines()) != 1:
        problems.append("not one error line")
    if done.returncode == 2 and max(map(len, done.stderr.splitlines() or [""])) > 300:
        problems.append("error line too long")
    words = done.stdout.replace("(", " ").replace(")", " ").split()
    if "inf" in words or "nan" in words or "RuntimeWarning" in done.stderr:
        problems.append("inf, nan or a numpy warning printed")
    return {
        "rc": done.returncode,
        "seconds": seconds,
        "problem": "; ".join(problems),
        "stderr": done.stderr[-2000:],
    }


def _run_one(case: tuple, work: Path, timeout: float) -> list[tuple[str, dict]]:
    """Run one drawn case (``check``, then ``solve`` when drawn and the check passed)."""
    index, source, text, _, also_solve = case
    folder = work / f"case{index}"
    folder.mkdir(exist_ok=True)
    path = _write_case(folder, source, text)
    outcome = run_case(path, ["check"], timeout)
    runs = [("check", outcome)]
    if outcome["rc"] == 0 and also_solve:
        solve = ["solve", "--solver", "auto", "--time-limit", "1", "--quiet", "--out", "run"]
        runs.append(("solve", run_case(path, solve, timeout + 10)))
    shutil.rmtree(folder, ignore_errors=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    """Run the fuzz campaign; print its figures; exit 1 if any case broke the contract."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.fuzz", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="seconds before a case is a hang"
    )
    parser.add_argument(
        "--solve-share", type=float, default=0.0, help="share of cases that also run a 1 s solve"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="cases run at once, each in its own process"
    )
    parser.add_argument("--out", default=os.path.join("runs", "fuzz"))
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    codes: Counter = Counter()
    times: list[float] = []
    failures = []
    solves: Counter = Counter()
    # Every case (and whether it also solves) is drawn before any runs, so a seed names the
    # same campaign whatever --workers is.
    cases = []
    for index in range(args.cases):
        source, text, applied = make_case(rng)
        cases.append((index, source, text, applied, rng.random() < args.solve_share))
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.workers) as pool:
        outcomes = pool.map(lambda case: _run_one(case, work, args.timeout), cases)
        for done, ((index, source, text, applied, _), runs) in enumerate(
            zip(cases, outcomes, strict=True), start=1
        ):
            codes[runs[0][1]["rc"]] += 1
            times.append(runs[0][1]["seconds"])
            for command, result in runs:
                if command == "solve":
                    solves[result["rc"]] += 1
                if result["problem"]:
                    failures.append(
                        {
                            "case": index,
                            "command": command,
                            "source": source.name,
                            "mutations": applied,
                            **result,
                        }
                    )
                    (out / f"failure{index}.yaml").write_text(text, encoding="utf-8")
                    with open(out / "failures.jsonl", "a", encoding="utf-8") as log:
                        log.write(json.dumps(failures[-1]) + "\n")
            if done % 100 == 0:
                print(f"{done} cases, {len(failures)} failures", flush=True)
    summary = {
        "cases": args.cases,
        "workers": args.workers,
        "seed": args.seed,
        "exit_codes": {str(code): count for code, count in sorted(codes.items(), key=str)},
        "solve_exit_codes": {str(code): count for code, count in sorted(solves.items(), key=str)},
        "tracebacks": sum("traceback" in f["problem"] for f in failures),
        "hangs": sum(f["problem"] == "hang" for f in failures),
        "failures": len(failures),
        "median_s": statistics.median(times),
        "max_s": max(times),
        "over_2s": sum(t > 2 for t in times),
        "over_5s": sum(t > 5 for t in times),
    }
    (out / "failures.json").write_text(json.dumps(failures, indent=2) + "\n", encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
