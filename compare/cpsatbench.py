"""CP-SAT benchmark: ``python -m compare.cpsatbench INSTANCE... [--time-limit S] [--threads N]``.

For each instance: the warm start (better baseline + 5 s of local search),
then CP-SAT with the given limits; prints the model size, the time to the
proof (or the gap at the limit), and checks the plan by simulation.
"""

from __future__ import annotations

import argparse
import sys
import time

from rpeg.context import Problem
from rpeg.errors import InputError
from solvers import cpsat
from solvers.local import best_baseline, improve
from solvers.options import SolveOptions


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m compare.cpsatbench", description=__doc__)
    parser.add_argument("instances", nargs="+")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    header = (
        f"{'instance':<28} {'GPUs':>4} {'bools':>6} {'intervals':>9} {'constraints':>11} "
        f"{'status':>8} {'time s':>7} {'step s':>9} {'bound s':>9} {'gap':>8}"
    )
    print(header)
    for path in args.instances:
        try:
            problem = Problem.load(path)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        options = SolveOptions(time_limit=args.time_limit, threads=args.threads, seed=args.seed)
        start = best_baseline(problem)
        start, _ = improve(problem, start, options, 5.0)
        began = time.perf_counter()
        result = cpsat.solve_with_hint(problem, options, start, args.time_limit)
        elapsed = time.perf_counter() - began
        k = problem.instance.k_eval
        stats = result.stats
        step = (result.makespan or float("nan")) / k
        bound = (result.bound or float("nan")) / k
        gap = result.gap if result.gap is not None else float("nan")
        print(
            f"{problem.instance.name:<28} {problem.instance.hardware.num_gpus:>4} "
            f"{stats.get('booleans', 0):>6} {stats.get('intervals', 0):>9} "
            f"{stats.get('constraints', 0):>11} {result.status.value:>8} {elapsed:>7.1f} "
            f"{step:>9.4f} {bound:>9.4f} {gap:>8.4%}",
            flush=True,
        )
        if result.message:
            print(f"  note: {result.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
