"""Local-search scale benchmark: ``python -m benchmarks.localbench {prove,local} [SUITE]``.

The suite (default ``instances/suites/scale.yaml``) lists variants of the
shipped instances: a ``base`` instance file and dotted fields to ``set``.

* ``prove`` runs CP-SAT on every variant not yet proven (every variant with
  ``--force``) and caches its status, simulated optimum (makespan and score,
  the objective every solver minimises), raw bound and the instance
  fingerprint in ``<suite>_optima.json`` beside the suite.
* ``local`` runs the local search (``--time-limit`` seconds, default 20) on
  every variant and prints, per variant, the proven optimum score, the local
  search's simulated score, its gap to the optimum, the evaluations and the
  stop reason, then the share of proven variants within ``--target`` (1 %)
  and the gap distribution.

Only variants whose optimum CP-SAT proved (status OPTIMAL) for the same
instance fingerprint count; a record without a score or of another
fingerprint is stale (the cost model or the instance changed since) and is
shown as such. The fingerprint covers the instance, not the cost model's
code: after a change of the cost model, ``prove --force``. Not run in CI:
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


def _fingerprint(problem) -> str:
    """The fingerprint of ``problem``'s instance, which the cache records."""
    from rlplan.rpeg.schema.fingerprint import instance_fingerprint

    return instance_fingerprint(problem.instance)


def proven_score(record: dict[str, Any], fingerprint: str) -> float | None:
    """The cached optimum score of a record proven OPTIMAL for ``fingerprint``, else None."""
    if record.get("status") != "OPTIMAL" or record.get("fingerprint") != fingerprint:
        return None
    return record.get("score_s")


def prove(suite: str, time_limit: float, threads: int, force: bool = False) -> int:
    """CP-SAT on every variant not yet proven (all with ``force``); the cache is
    rewritten after each."""
    from rlplan.solvers import cpsat
    from rlplan.solvers.options import SolveOptions

    cache_file = optima_path(suite)
    cache = load_optima(suite)
    for name, document in load_variants(suite):
        problem = _problem(name, document)
        fingerprint = _fingerprint(problem)
        if not force and proven_score(cache.get(name, {}), fingerprint) is not None:
            continue
        started = time.perf_counter()
        result = cpsat.solve(problem, SolveOptions(time_limit=time_limit, threads=threads))
        cache[name] = {
            "fingerprint": fingerprint,
            "score_s": result.score,
            "status": result.status.value,
            "makespan_s": result.makespan,
            "bound_s": result.bound,
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


def local(
    suite: str,
    time_limit: float,
    target: float,
    out: str | None,
    only: str | None = None,
    seeds: int = 1,
) -> int:
    """Local search on every variant; prints the table, the share within ``target``
    and the gap distribution."""
    cache = load_optima(suite)
    rows = []
    print(
        f"{'variant':22} {'optimum s':>10} {'local s':>10} {'gap %':>7} {'evals':>8}  stop",
        flush=True,
    )
    for name, document in load_variants(suite):
        if only is not None and not any(part in name for part in only.split(",")):
            continue
        problem = _problem(name, document)
        optimum = proven_score(cache.get(name, {}), _fingerprint(problem))
        for seed in range(seeds):
            row = _local_row(problem, name, optimum, time_limit, seed)
            rows.append(row)
            stale = "stale" if cache.get(name, {}).get("status") == "OPTIMAL" else "-"
            shown = stale if optimum is None else f"{optimum:10.4f}"
            gap_shown = "-" if row["gap"] is None else f"{100 * row['gap']:7.3f}"
            label = name if seeds == 1 else f"{name}/{seed}"
            print(
                f"{label:22} {shown:>10} {row['local_s']:10.4f} {gap_shown:>7} "
                f"{row['evaluations']:>8}  {row['stop_reason']}",
                flush=True,
            )
    print(summary(rows, target))
    if out:
        with open(out, "w") as handle:
            json.dump(rows, handle, indent=1)
    return 0


def _local_row(problem, name: str, optimum: float | None, time_limit: float, seed: int) -> dict:
    """One local search of ``time_limit`` seconds with ``seed``, and its gap to ``optimum``."""
    from rlplan.solvers import local as local_search
    from rlplan.solvers.options import SolveOptions

    result = local_search.solve(problem, SolveOptions(time_limit=time_limit, seed=seed))
    return {
        "variant": name,
        "seed": seed,
        "optimum_s": optimum,
        "local_s": result.score,
        "gap": None if optimum is None else (result.score - optimum) / optimum,
        "evaluations": result.stats.get("evaluations"),
        "stop_reason": result.stats.get("stop_reason"),
    }


def summary(rows: list[dict[str, Any]], target: float) -> str:
    """The share of proven variants within ``target``, within 0.1 % and 1 %, and the
    median and largest gap."""
    gaps = sorted(row["gap"] for row in rows if row["gap"] is not None)
    if not gaps:
        return "no proven variant"
    lines = [f"within {100 * target:g} %: {sum(g <= target for g in gaps)} of {len(gaps)}"]
    for limit in sorted({0.001, 0.01} - {target}):
        lines.append(f"within {100 * limit:g} %: {sum(g <= limit for g in gaps)} of {len(gaps)}")
    lines.append(f"median gap {100 * gaps[len(gaps) // 2]:.3f} %, max gap {100 * gaps[-1]:.3f} %")
    return "\n".join(lines) + " (proven variants)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.localbench", description=__doc__)
    parser.add_argument("command", choices=("prove", "local"))
    parser.add_argument("suite", nargs="?", default=SCALE_SUITE)
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", type=float, default=0.01)
    parser.add_argument("--out", default=None, help="JSON file of the local-search rows")
    parser.add_argument("--force", action="store_true", help="prove: every variant again")
    parser.add_argument("--seeds", type=int, default=1, help="local: seeds 0 .. N-1 each")
    parser.add_argument(
        "--only", default=None, help="local: variants whose name holds one of these (a,b,...)"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "prove":
            return prove(args.suite, args.time_limit or 300.0, args.threads, args.force)
        limit = args.time_limit or 20.0
        return local(args.suite, limit, args.target, args.out, args.only, args.seeds)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
