"""Mutation benchmark: ``python -m benchmarks.mutation {named,mutmut} [options]``.

Not run in CI (it takes tens of minutes). Both commands work on a copy of the
repository's tracked files at ``--ref`` (default: the working tree), so nothing
is written beside the sources.

* ``named`` plants each bug of :data:`NAMED_MUTANTS` (bugs the suite once
  missed) in turn and runs ``--tests``; a mutant is *killed* when the tests fail.
* ``mutmut`` runs mutmut (the ``mutation`` extra) over :data:`MUTATED`, on a
  seeded sample of ``--sample`` mutants per module (0: every mutant), each
  against the tests of ``--tests`` that cover the mutated function, and prints
  the mutation score per module: killed / (killed + survived), mutants no test
  reaches counted as survived.

Run it ``nice``-d: ``nice -n 10 python -m benchmarks.mutation mutmut --sample 15``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Modules whose mutants are scored.
MUTATED = (
    "rlplan/rpeg/evaluation/simulator.py",
    "rlplan/rpeg/model/cost.py",
    "rlplan/formulation/model.py",
    "rlplan/solvers/cpsat.py",
    "rlplan/solvers/milp/translation.py",
)

#: The fast subset of the ordinary suite that guards those modules.
DEFAULT_TESTS = (
    "tests/rpeg/test_simulator.py",
    "tests/rpeg/test_cost.py",
    "tests/rpeg/test_cost_v2.py",
    "tests/formulation",
    "tests/solvers/test_exact.py",
    "tests/solvers/test_exhaustive.py",
    "tests/rpeg/test_moves.py",
)

#: Bugs the suite once let through: (name, file, original text, planted text).
NAMED_MUTANTS = (
    (
        "bound rounded up (to_units ceil)",
        "rlplan/formulation/model.py",
        "return math.floor(seconds / self.unit + 1e-9)",
        "return math.ceil(seconds / self.unit - 1e-9)",
    ),
    (
        "CP-SAT precedence without the data-edge lags",
        "rlplan/solvers/cpsat.py",
        "        for row in rows.data_rows(self.formulation):\n"
        "            self._tick()\n"
        "            self._lag_row(row)",
        "        for row in rows.data_rows(self.formulation):\n"
        "            self._tick()\n"
        "            if row.lag == 0:\n"
        "                self._lag_row(row)",
    ),
    (
        "CP-SAT staleness without the cross-block publication lag",
        "rlplan/solvers/cpsat.py",
        "        for row in rows.pub_rows(self.formulation):\n"
        "            self._tick()\n"
        "            self._lag_row(row)",
        "        for row in rows.pub_rows(self.formulation):\n"
        "            self._tick()\n"
        "            if not (row.lag > 0 and isinstance(row.conditions[-1], rows.OnBlocks)):\n"
        "                self._lag_row(row)",
    ),
    (
        "change_strategy proposing only the current strategy",
        "rlplan/rpeg/search/moves.py",
        "        if c.strategy != placement.strategy\n    ]",
        "        if c.strategy == placement.strategy\n    ]",
    ),
)


def copy_tree(ref: str | None, destination: Path) -> None:
    """The tracked files at ``ref`` (or the working tree's tracked files) into ``destination``."""
    if ref:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
        return
    files = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_tests(folder: Path, tests: list[str]) -> int:
    """``pytest -x -q`` on ``tests`` in ``folder``; returns the exit code."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).returncode


def named(ref: str | None, tests: list[str]) -> int:
    """Plant each named mutant and run the tests; prints killed or SURVIVED per mutant."""
    survived = 0
    with tempfile.TemporaryDirectory(prefix="rlplan-mutation-") as temp:
        folder = Path(temp)
        copy_tree(ref, folder)
        for name, path, original, planted in NAMED_MUTANTS:
            source = (folder / path).read_text()
            if original not in source:
                print(f"not applicable  {name} (text not found in {path})", flush=True)
                continue
            (folder / path).write_text(source.replace(original, planted, 1))
            try:
                code = run_tests(folder, tests)
            finally:
                (folder / path).write_text(source)
            killed = code != 0
            survived += not killed
            print(f"{'killed' if killed else 'SURVIVED':8}  {name}", flush=True)
    return 1 if survived else 0


def mutmut_config(tests: list[str]) -> str:
    """The ``[tool.mutmut]`` section for the copy's pyproject.toml."""
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["rlplan"]\n'
        f"only_mutate = {json.dumps(list(MUTATED))}\n"
        'also_copy = ["benchmarks", "main.py", "instances"]\n'
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider"]\n'
    )


def generate(folder: Path) -> dict[str, list[str]]:
    """Generate the mutants in ``folder`` (no test runs); their names per module."""
    code = (
        "from mutmut.__main__ import *\n"
        "copy_src_dir(); copy_also_copy_files(); setup_source_paths(); create_mutants(1)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True, capture_output=True)
    names: dict[str, list[str]] = {}
    for module in MUTATED:
        meta = folder / "mutants" / (module + ".meta")
        data = json.loads(meta.read_text()) if meta.exists() else {}
        names[module] = sorted(data.get("exit_code_by_key", {}))
    return names


def mutmut(ref: str | None, tests: list[str], sample: int, seed: int) -> int:
    """Run mutmut on a seeded sample of each module's mutants; prints the score per module."""
    with tempfile.TemporaryDirectory(prefix="rlplan-mutmut-") as temp:
        folder = Path(temp)
        copy_tree(ref, folder)
        with open(folder / "pyproject.toml", "a") as handle:
            handle.write(mutmut_config(tests))
        names = generate(folder)
        rng = random.Random(seed)
        chosen: dict[str, list[str]] = {}
        for module, found in names.items():
            chosen[module] = sorted(rng.sample(found, sample)) if 0 < sample < len(found) else found
            print(f"{module}: {len(chosen[module])} of {len(found)} mutants", flush=True)
        everything = [name for found in chosen.values() for name in found]
        subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", "1", *everything],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        survivors = []
        for module in MUTATED:
            meta = folder / "mutants" / (module + ".meta")
            data = json.loads(meta.read_text()) if meta.exists() else {}
            codes = data.get("exit_code_by_key", {})
            for name in chosen[module]:
                outcome = _outcome(codes.get(name))
                totals[module][outcome] += 1
                if outcome in ("survived", "no tests"):
                    survivors.append((module, name, outcome))
        header = f"{'killed':>6} {'survived':>8} {'no tests':>8} {'other':>6} {'score':>6}"
        print(f"\n{'module':24} {header}")
        for module in MUTATED:
            row = totals[module]
            scored = row["killed"] + row["survived"] + row["no tests"]
            score = row["killed"] / scored if scored else float("nan")
            print(
                f"{module:24} {row['killed']:6} {row['survived']:8} {row['no tests']:8} "
                f"{row['other']:6} {score:6.1%}"
            )
        print("\nsurvivors (mutmut show NAME in a copy shows each):")
        for _module, name, outcome in survivors:
            diff = subprocess.run(
                [sys.executable, "-m", "mutmut", "show", name],
                cwd=folder,
                capture_output=True,
                text=True,
            ).stdout
            changed = [
                line
                for line in diff.splitlines()
                if line[:1] in "+-" and line[:3] not in ("+++", "---")
            ]
            print(f"  {outcome:9} {name}: {' | '.join(changed)[:300]}")
    return 0


def _outcome(code: int | None) -> str:
    """mutmut's exit code of a mutant's test run, as an outcome (a timeout is a kill)."""
    from mutmut.stats import status_by_exit_code

    status = status_by_exit_code[code]
    if status in ("killed", "timeout", "segfault"):
        return "killed"
    if status in ("survived", "no tests"):
        return status
    return "other"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__)
    parser.add_argument("command", choices=("named", "mutmut"))
    parser.add_argument("--ref", default=None, help="git revision to test (default: working tree)")
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS))
    parser.add_argument("--sample", type=int, default=15, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
    if args.command == "named":
        return named(args.ref, args.tests)
    return mutmut(args.ref, args.tests, args.sample, args.seed)


if __name__ == "__main__":
    sys.exit(main())
