"""Exact-backend benchmark: ``python -m benchmarks.exactbench INSTANCE... [--solvers cpsat,milp]``.

For each instance one warm start is computed (the better baseline improved by
the short local search every exact backend uses), so CP-SAT and the MILP
solve the *same* formulation. Prints per backend the model size, the status,
the time to the proof (or the gap at the time limit), the simulated step
time and the bound; for the MILP also the LP-relaxation bound and the root
gap ``(optimum - LP bound) / optimum``.
"""

from __future__ import annotations

import argparse
import sys
import time

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.solvers import cpsat, milp
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.options import SolveOptions


def lp_relaxation_bound(problem: Problem, start) -> float:
    """Optimum (s) of the MILP's LP relaxation built from ``start``."""
    import highspy
    import numpy as np

    built = milp.build_model(problem, start)
    highs = milp.new_highs()
    built.milp.model.to_highs(highs)
    columns = built.milp.model.num_columns
    highs.changeColsIntegrality(
        columns,
        np.arange(columns, dtype=np.int32),
        np.array([highspy.HighsVarType.kContinuous] * columns),
    )
    highs.run()
    return float(highs.getInfo().objective_function_value)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exactbench", description=__doc__)
    parser.add_argument("instances", nargs="+")
    parser.add_argument("--solvers", default="cpsat,milp")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--root-gap", action="store_true", help="also solve the MILP's LP relaxation"
    )
    args = parser.parse_args(argv)
    backends = {"cpsat": cpsat.solve_with_hint, "milp": milp.solve_with_start}
    chosen = args.solvers.split(",")
    for name in chosen:
        if name not in backends:
            print(
                f"error: --solvers: unknown exact backend {name!r} (cpsat, milp)", file=sys.stderr
            )
            return 2
    print(
        f"{'instance':<24} {'GPUs':>4} {'solver':>6} {'binaries':>8} {'constraints':>11} "
        f"{'status':>8} {'time s':>7} {'objective s':>12} {'bound s':>12} {'gap':>8}"
    )
    for path in args.instances:
        try:
            problem = Problem.load(path)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        options = SolveOptions(time_limit=args.time_limit, threads=args.threads, seed=args.seed)
        start = warm_start_plan(problem, options)
        k = problem.instance.k_eval
        optimum = None
        for name in chosen:
            began = time.perf_counter()
            result = backends[name](problem, options, start, args.time_limit)
            elapsed = time.perf_counter() - began
            stats = result.stats
            binaries = stats.get("booleans", stats.get("binaries", 0))
            objective = stats.get("cp_objective_s", stats.get("milp_objective_s"))
            model_bound = stats.get("cp_bound_s", stats.get("milp_bound_s"))
            if result.status.value == "OPTIMAL" and objective is not None:
                optimum = objective
            gap = (
                (objective - model_bound) / objective
                if objective is not None and model_bound is not None
                else float("nan")
            )
            print(
                f"{problem.instance.name:<24} {problem.instance.hardware.num_gpus:>4} {name:>6} "
                f"{binaries:>8} {stats.get('constraints', 0):>11} {result.status.value:>8} "
                f"{elapsed:>7.1f} {objective or float('nan'):>12.6f} "
                f"{model_bound or float('nan'):>12.6f} {gap:>8.4%}",
                flush=True,
            )
            print(
                f"  simulated step {(result.makespan or float('nan')) / k:.4f} s, "
                f"bound {(result.bound or float('nan')) / k:.4f} s per step"
                + (f"; note: {result.message}" if result.message else ""),
                flush=True,
            )
        if args.root_gap:
            relaxed = lp_relaxation_bound(problem, start)
            line = f"  LP relaxation {relaxed:.6f} s"
            if optimum is not None:
                line += (
                    f", root gap {(optimum - relaxed) / optimum:.2%} of the optimum {optimum:.6f} s"
                )
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
