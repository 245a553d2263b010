"""Time-limit compliance: ``python -m benchmarks.limitbench INSTANCE... --time-limit 5``.

Runs ``main.py solve`` once per (instance, solver) in a fresh process, as a
user would, and prints per run:

* ``solve s``: the solve's own wall time (``wall_time_s`` of ``result.json``:
  warm start, model building and solving, from the backend's first line;
  under a framework (``--framework`` or the instance's ``engine.framework``),
  ``stats.framework.wall_time_s``: its solve and the full-space one together);
* ``overshoot``: ``(solve s - limit) / limit`` (negative: finished early);
* ``process s``: the whole command (interpreter start, instance loading,
  solve, writing the outputs), and ``outside s`` = process - solve.

Exits 1 when a solve exceeds ``limit x (1 + --tolerance) + --slack`` (the
contract: 1.05 x limit + 1 s, model building included) or a process
exceeds that plus ``--startup`` seconds (interpreter start, loading and
outputs), so it fails on a backend that ignores its time limit. The machine
may be shared: rerun a row that looks off before trusting it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from rlplan.rpeg.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Backends measured by default (``exhaustive`` refuses large plan spaces at once).
DEFAULT_SOLVERS = "greedy,concurrent,local,cpsat,milp,exhaustive,auto"


def run_one(
    instance: str, solver: str, time_limit: float, threads: int, framework: str | None = None
) -> dict:
    """Solve ``instance`` with ``solver`` in a new process; the measured times and status.

    With ``framework``, the solve plans for it (``--framework``); under a
    framework the solve's time is both solves' (``stats.framework.wall_time_s``).
    """
    with tempfile.TemporaryDirectory(prefix="limitbench-") as folder:
        out = os.path.join(folder, "run")
        command = [
            sys.executable,
            os.path.join(ROOT, "main.py"),
            "solve",
            instance,
            "--solver",
            solver,
            "--time-limit",
            f"{time_limit:g}",
            "--threads",
            str(threads),
            "--quiet",
            "--out",
            out,
            *(["--framework", framework] if framework else []),
        ]
        began = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        process = time.perf_counter() - began
        document = {}
        path = os.path.join(out, "result.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                document = json.load(handle)
    solve = document.get("wall_time_s")
    if solve is not None:  # a framework solve (--framework or engine.framework): both solves
        solve = document.get("stats", {}).get("framework", {}).get("wall_time_s", solve)
    return {
        "status": document.get("status", f"rc {completed.returncode}"),
        "solve": solve,
        "process": process,
        "returncode": completed.returncode,
        "stderr": completed.stderr.strip().splitlines()[-1:] if completed.stderr else [],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when every run kept its limit, else 1 (2: bad input)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.limitbench", description=__doc__)
    parser.add_argument("instances", nargs="+")
    parser.add_argument("--solvers", default=DEFAULT_SOLVERS)
    parser.add_argument(
        "--gpus",
        default=None,
        help="re-shape every instance to these GPU counts, as `pareto` does (e.g. 8,64,1024)",
    )
    parser.add_argument(
        "--k-eval", default=None, help="and set optimizer.k_eval to each of these (e.g. 1,8)"
    )
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--framework",
        default=None,
        help="solve for this framework (verl, nemo-rl, openrlhf, slime) and the full space",
    )
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="allowed relative overshoot (default 0.05)"
    )
    parser.add_argument(
        "--slack", type=float, default=1.0, help="allowed absolute overshoot, s (default 1)"
    )
    parser.add_argument(
        "--startup",
        type=float,
        default=5.0,
        help="seconds a process may add to the solve: start, loading, outputs (default 5)",
    )
    args = parser.parse_args(argv)
    for path in args.instances:
        if not os.path.isfile(path):
            print(f"error: {path}: no such instance file", file=sys.stderr)
            return 2
    if args.time_limit <= 0:
        print(f"error: --time-limit: must be positive, got {args.time_limit}", file=sys.stderr)
        return 2
    solvers = [name.strip() for name in args.solvers.split(",") if name.strip()]
    limit = args.time_limit
    with tempfile.TemporaryDirectory(prefix="limitbench-variants-") as folder:
        try:
            instances = scale_variants(args.instances, args.gpus, args.k_eval, folder)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _run(instances, solvers, limit, args)


def scale_variants(
    paths: list[str], gpus: str | None, k_eval: str | None, folder: str
) -> list[str]:
    """The instance files to run: ``paths`` as given, or re-shaped variants written to ``folder``.

    With ``gpus``, each instance is re-shaped to each count (nodes keep their
    width, as in ``main.py pareto``); with ``k_eval``, each variant also gets
    each ``optimizer.k_eval``. Variant files are named
    ``<instance>-<gpus>gpu-k<k_eval>.yaml``.
    """
    if gpus is None and k_eval is None:
        return list(paths)
    import yaml

    from rlplan.compare.pareto import plan_points
    from rlplan.compare.shapes import parse_counts

    k_values = parse_counts(k_eval, "--k-eval") if k_eval is not None else [None]
    written = []
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0]
        if gpus is None:
            with open(path, encoding="utf-8") as handle:
                texts = [(None, handle.read())]
        else:
            texts = [
                (point.gpus, point.variant.text)
                for point in plan_points(path, parse_counts(gpus), None)
            ]
        for count, text in texts:
            for k in k_values:
                document = yaml.safe_load(text)
                if k is not None:
                    document.setdefault("optimizer", {})["k_eval"] = k
                label = name + (f"-{count}gpu" if count else "") + (f"-k{k}" if k else "")
                target = os.path.join(folder, f"{label}.yaml")
                with open(target, "w", encoding="utf-8") as handle:
                    yaml.safe_dump(document, handle, sort_keys=False)
                written.append(target)
    return written


def _run(instances: list[str], solvers: list[str], limit: float, args) -> int:
    """Run every (instance, solver) and print the table; 0 when every run kept its limit."""
    print(
        f"{'instance':<34} {'solver':<11} {'limit s':>7} {'status':<10} {'solve s':>8} "
        f"{'overshoot':>9} {'process s':>9} {'outside s':>9}"
    )
    failures = []
    for path in instances:
        name = os.path.splitext(os.path.basename(path))[0]
        for solver in solvers:
            row = run_one(path, solver, limit, args.threads, args.framework)
            solve = row["solve"]
            overshoot = None if solve is None else (solve - limit) / limit
            outside = None if solve is None else row["process"] - solve
            print(
                f"{name:<34} {solver:<11} {limit:>7g} {row['status']:<10} "
                f"{'—' if solve is None else f'{solve:.2f}':>8} "
                f"{'—' if overshoot is None else f'{overshoot:+.1%}':>9} "
                f"{row['process']:>9.2f} {'—' if outside is None else f'{outside:.2f}':>9}",
                flush=True,
            )
            if solve is None and row["returncode"] not in (0, 1, 3):
                failures.append(f"{name}/{solver}: failed ({' '.join(row['stderr'])})")
            elif solve is not None and solve > limit * (1 + args.tolerance) + args.slack:
                failures.append(
                    f"{name}/{solver}: solve {solve:.2f} s > limit + {args.tolerance:.0%} "
                    f"+ {args.slack:g} s"
                )
            elif row["process"] > limit * (1 + args.tolerance) + args.startup:
                failures.append(
                    f"{name}/{solver}: process {row['process']:.2f} s > limit + "
                    f"{args.tolerance:.0%} + {args.startup:g} s"
                )
    for failure in failures:
        print(f"OVER: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
