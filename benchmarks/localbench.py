"""Local-search scale benchmark: ``python -m benchmarks.localbench {prove,local} [SUITE]``.

The suite (default ``instances/suites/scale.yaml``) lists variants of the
shipped instances: a ``base`` instance file and dotted fields to ``set``.

* ``prove`` runs CP-SAT on every variant not yet proven and caches its status,
  simulated optimum and raw bound in ``<suite>_optima.json`` beside the suite.
* ``local`` runs the local search (``--time-limit`` seconds, default 20) on
  every variant and prints, per variant, the proven optimum, the local
  search's simulated makespan, its gap to the optimum, the evaluations and the
  stop reason, then the share of proven variants within ``--target`` (1 %).

Only variants whose optimum CP-SAT proved (status OPTIMAL) count. Not run in CI:
``prove`` takes minutes per variant.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from typing import Any

from rlplan.compare.variants import load_document, parse_variant
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.yamlio import read_yaml_file

SCALE_SUITE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "instances",
    "suites",
    "scale.yaml",
)


def set_dotted(document: dict[str, Any], key: str, value: Any) -> None:
    """Set ``section.field`` (any depth) of an instance document in place."""
    *path, last = key.split(".")
    node = document
    for part in path:
        node = node.setdefault(part, {})
    node[last] = value


def load_variants(path: str) -> list[tuple[str, dict[str, Any]]]:
    """The suite's variants as ``(name, instance document)`` pairs.

    Parameters
    ----------
    path
        A suite file with a ``variants`` list of ``{name, base, set}`` mappings.

    Raises
    ------
    InputError
        If the suite or a variant is malformed.
    """
    data = read_yaml_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("variants"), list):
        raise InputError(path, "a scale suite is a mapping with a 'variants' list")
    folder = os.path.dirname(os.path.abspath(path))
    variants = []
    for index, entry in enumerate(data["variants"]):
        where = f"{path}: variants[{index}]"
        if not isinstance(entry, dict) or not {"name", "base"} <= set(entry):
            raise InputError(where, "needs 'name' and 'base' (and optionally 'set')")
        document = copy.deepcopy(load_document(os.path.join(folder, entry["base"])))
        for key, value in (entry.get("set") or {}).items():
            set_dotted(document, key, value)
        parse_variant(document, entry["name"], where)
        variants.append((entry["name"], document))
    return variants


def optima_path(suite: str) -> str:
    """The cache file of the suite's proven optima."""
    return os.path.splitext(suite)[0] + "_optima.json"


def load_optima(suite: str) -> dict[str, dict[str, Any]]:
    """The cached CP-SAT results of the suite's variants (empty if none yet)."""
    path = optima_path(suite)
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return json.load(handle)


def _problem(name: str, document: dict[str, Any]):
    from rlplan.rpeg.evaluation.problem import Problem

    return Problem.from_instance(parse_variant(document, name, name))


def prove(suite: str, time_limit: float, threads: int) -> int:
    """CP-SAT on every variant not yet proven; the cache is rewritten after each."""
    from rlplan.solvers import cpsat
    from rlplan.solvers.options import SolveOptions

    cache_file = optima_path(suite)
    cache = load_optima(suite)
    for name, document in load_variants(suite):
        if cache.get(name, {}).get("status") == "OPTIMAL":
            continue
        started = time.perf_counter()
        result = cpsat.solve(
            _problem(name, document), SolveOptions(time_limit=time_limit, threads=threads)
        )
        cache[name] = {
            "status": result.status.value,
            "makespan_s": result.makespan,
            "cp_bound_s": result.stats.get("cp_bound_s"),
            "gap": result.gap,
            "time_limit_s": time_limit,
            "wall_time_s": round(time.perf_counter() - started, 2),
        }
        print(name, cache[name], flush=True)
        with open(cache_file + ".tmp", "w") as handle:
            json.dump(cache, handle, indent=1, sort_keys=True)
        os.replace(cache_file + ".tmp", cache_file)
    return 0


def local(suite: str, time_limit: float, target: float, out: str | None) -> int:
    """Local search on every variant; prints the table and the share within ``target``."""
    from rlplan.solvers import local as local_search
    from rlplan.solvers.options import SolveOptions

    cache = load_optima(suite)
    rows = []
    print(
        f"{'variant':18} {'optimum s':>10} {'local s':>10} {'gap %':>7} {'evals':>8}  stop",
        flush=True,
    )
    for name, document in load_variants(suite):
        result = local_search.solve(
            _problem(name, document), SolveOptions(time_limit=time_limit, seed=0)
        )
        proven = cache.get(name, {})
        optimum = proven.get("makespan_s") if proven.get("status") == "OPTIMAL" else None
        gap = None if optimum is None else (result.makespan - optimum) / optimum
        row = {
            "variant": name,
            "optimum_s": optimum,
            "local_s": result.makespan,
            "gap": gap,
            "evaluations": result.stats.get("evaluations"),
            "stop_reason": result.stats.get("stop_reason"),
        }
        rows.append(row)
        shown = "-" if optimum is None else f"{optimum:10.4f}"
        gap_shown = "-" if gap is None else f"{100 * gap:7.3f}"
        print(
            f"{name:18} {shown:>10} {result.makespan:10.4f} {gap_shown:>7} "
            f"{row['evaluations']:>8}  {row['stop_reason']}",
            flush=True,
        )
    counted = [row for row in rows if row["gap"] is not None]
    within = sum(row["gap"] <= target for row in counted)
    print(f"within {100 * target:g} %: {within} of {len(counted)} proven variants")
    if out:
        with open(out, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.localbench", description=__doc__)
    parser.add_argument("command", choices=("prove", "local"))
    parser.add_argument("suite", nargs="?", default=SCALE_SUITE)
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.01)
    parser.add_argument("--out", default=None, help="JSON file of the local-search rows")
    args = parser.parse_args(argv)
    try:
        if args.command == "prove":
            return prove(args.suite, args.time_limit or 300.0, args.threads)
        return local(args.suite, args.time_limit or 20.0, args.target, args.out)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
