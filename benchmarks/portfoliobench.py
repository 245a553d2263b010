"""Benchmark: time to proof of CP-SAT alone, the MILP alone and ``auto`` on the dense frontier.

Run ``python -m benchmarks.portfoliobench [--counts 8,16,32,64] [--time-limit 180]
[--solvers cpsat,milp,auto] [--threads 2] [--before PATH]``.

The points are those of :mod:`benchmarks.paretobench`: ``ppo_8b_1x2x8_h100``
shaped to each GPU count as ``rlplan.compare.pareto.plan_points`` shapes it.
Every solve runs in a fresh process (HiGHS fixes its thread pool at a
process's first solve, so solves of one process would not be independent),
the solvers of one point back to back. ``--before PATH`` adds a column:
``auto`` run from another source tree (e.g. ``git archive`` of the commit
before the portfolio), the same way. Prints a markdown table: per point and
solver the time to the proof (wall time of the solve when it ends OPTIMAL),
or the gap left at the time limit, and the step time and bound; and the
``uptime`` load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTANCE = os.path.join(ROOT, "instances", "ppo_8b_1x2x8_h100.yaml")
COUNTS = "8,16,32,64"


def point_text(instance: str, gpus: int) -> str:
    """The instance document shaped to ``gpus`` GPUs, as the frontier builds it."""
    from rlplan.compare.pareto import plan_points

    (point,) = plan_points(instance, [gpus], None)
    return point.variant.text


def run_one(path: str, solver: str, time_limit: float, threads: int) -> dict:
    """Solve ``path`` with ``solver`` in this process; the record printed by ``--run``."""
    from rlplan.rpeg.evaluation.problem import Problem
    from rlplan.solvers import get_solver
    from rlplan.solvers.options import SolveOptions

    problem = Problem.load(path)
    options = SolveOptions(time_limit=time_limit, threads=threads, seed=0)
    began = time.perf_counter()
    result = get_solver(solver)(problem, options)
    wall = time.perf_counter() - began
    k = problem.instance.k_eval
    return {
        "status": result.status.value,
        "wall_s": wall,
        "step_s": None if result.makespan is None else result.makespan / k,
        "bound_step_s": None if result.bound is None else result.bound / k,
        "gap": result.gap,
        "bound_source": result.bound_source,
        "portfolio": result.stats.get("portfolio"),
    }


def run_fresh(path: str, solver: str, args: argparse.Namespace, tree: str = ROOT) -> dict:
    """:func:`run_one` in a fresh interpreter whose sources are ``tree``."""
    # By path, from ``tree``: ``-m`` would put this folder first on sys.path, before ``tree``.
    command = [sys.executable, os.path.abspath(__file__), "--run", path, solver]
    command += ["--time-limit", str(args.time_limit), "--threads", str(args.threads)]
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"status": f"failed ({done.returncode})", "error": done.stderr[-400:]}
    return json.loads(lines[-1])


def cell(record: dict) -> str:
    """``12.3 s`` for a proof, else the status, its wall time and gap."""
    if record["status"] == "OPTIMAL":
        return f"**{record['wall_s']:.1f} s**"
    if "wall_s" not in record:
        return record["status"]
    gap = "—" if record["gap"] is None else f"{100 * record['gap']:.2f} %"
    return f"{record['status']} {record['wall_s']:.0f} s, gap {gap}"


def load() -> str:
    """The 1/5/15-minute load averages."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``--run``, one solve); returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.portfoliobench", description=__doc__
    )
    parser.add_argument("--counts", default=COUNTS)
    parser.add_argument("--solvers", default="auto,cpsat,milp")
    parser.add_argument("--time-limit", type=float, default=180.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--instance", default=INSTANCE)
    parser.add_argument("--before", help="source tree whose auto is the 'before' column")
    parser.add_argument("--run", nargs=2, metavar=("INSTANCE", "SOLVER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        print(json.dumps(run_one(args.run[0], args.run[1], args.time_limit, args.threads)))
        return 0
    columns = [(name, ROOT) for name in args.solvers.split(",")]
    if args.before:
        columns.insert(0, ("before", os.path.abspath(args.before)))
    header = " | ".join(name for name, _ in columns)
    lines = [
        f"# {os.path.basename(args.instance)}: time to proof, {args.threads} threads, "
        f"limit {args.time_limit:g} s, {os.cpu_count()} cores",
        "",
        f"load average before: {load()}",
        "",
        f"| GPUs | {header} | step (s) | bound (s/step) | auto: proved by |",
        "|---|" + "---|" * (len(columns) + 3),
    ]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for gpus in [int(count) for count in args.counts.split(",")]:
            path = os.path.join(folder, f"ppo_8b_{gpus}gpu.yaml")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(point_text(args.instance, gpus))
            records = {}
            for name, tree in columns:
                solver = "auto" if name == "before" else name
                records[name] = run_fresh(path, solver, args, tree)
                print(f"  {gpus} GPUs {name}: {json.dumps(records[name])}", file=sys.stderr)
            best = min(
                (r for r in records.values() if r.get("step_s") is not None),
                key=lambda r: r["step_s"],
                default={},
            )
            bounds = [r["bound_step_s"] for r in records.values() if r.get("bound_step_s")]
            portfolio = (records.get("auto") or {}).get("portfolio") or {}
            row = [str(gpus), *(cell(records[name]) for name, _ in columns)]
            row += [
                "—" if not best else f"{best['step_s']:.4f}",
                "—" if not bounds else f"{max(bounds):.4f}",
                str(portfolio.get("proved_by") or "—"),
            ]
            line = "| " + " | ".join(row) + " |"
            lines.append(line)
            print(line, flush=True)
    tail = f"\nload average after: {load()}"
    print(tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
