"""A third MIP solver confirms exported MILP optima.

Run ``python -m benchmarks.third_solver [INSTANCE...]``.

For each instance (default: the tiny PPO, GRPO and DPO instances) the MILP is
exported to MPS the way users export it (``main.py export --format mps``),
then the file is solved by HiGHS (highspy, the MILP backend's solver) and by
SCIP (PySCIPOpt, the optional ``bench`` extra: ``pip install -e .[bench]``).
Prints both objectives (the makespan of ``k_eval`` steps, s) and their
relative difference; exits 1 when any differs by more than
:data:`REL_TOLERANCE`, or when a solver does not prove its optimum.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTANCES = [
    os.path.join(ROOT, "instances", name)
    for name in ("tiny_ppo_2gpu.yaml", "tiny_grpo_2gpu.yaml", "tiny_dpo_2gpu.yaml")
]
#: Largest relative difference of the two optima.
REL_TOLERANCE = 1e-6


def export_mps(instance: str, path: str) -> None:
    """``main.py export INSTANCE --format mps --out PATH``."""
    command = [sys.executable, os.path.join(ROOT, "main.py"), "export", instance]
    command += ["--format", "mps", "--out", path]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True)


def solve_highs(path: str) -> tuple[float, bool, float]:
    """HiGHS on the MPS file: objective, whether proven optimal, seconds."""
    import highspy

    from rlplan.solvers.milp import new_highs

    highs = new_highs()  # without its banner
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("mip_rel_gap", 0.0)
    highs.readModel(path)
    began = time.perf_counter()
    highs.run()
    optimal = highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return highs.getInfo().objective_function_value, optimal, time.perf_counter() - began


def solve_scip(path: str) -> tuple[float, bool, float]:
    """SCIP on the MPS file: objective, whether proven optimal, seconds."""
    from pyscipopt import Model

    model = Model()
    model.hideOutput()
    model.readProblem(path)
    model.setParam("limits/gap", 0.0)
    began = time.perf_counter()
    model.optimize()
    return model.getObjVal(), model.getStatus() == "optimal", time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    """Run the check; returns 0 when every pair of optima agrees."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.third_solver", description=__doc__)
    parser.add_argument("instances", nargs="*", default=INSTANCES)
    args = parser.parse_args(argv)
    try:
        import pyscipopt  # noqa: F401
    except ImportError:
        print("error: PySCIPOpt is not installed: pip install -e .[bench]", file=sys.stderr)
        return 2
    agree = True
    print(f"{'instance':<24} {'HiGHS s':>14} {'SCIP s':>14} {'rel. diff':>10}  solve times")
    with tempfile.TemporaryDirectory() as folder:
        for instance in args.instances:
            name = os.path.splitext(os.path.basename(instance))[0]
            path = os.path.join(folder, f"{name}.mps")
            export_mps(instance, path)
            highs, highs_optimal, highs_s = solve_highs(path)
            scip, scip_optimal, scip_s = solve_scip(path)
            difference = abs(highs - scip) / max(abs(highs), 1e-12)
            ok = highs_optimal and scip_optimal and difference <= REL_TOLERANCE
            agree = agree and ok
            print(
                f"{name:<24} {highs:>14.9f} {scip:>14.9f} {difference:>10.2e}  "
                f"HiGHS {highs_s:.1f} s, SCIP {scip_s:.1f} s" + ("" if ok else "  MISMATCH")
            )
    print(
        "every optimum confirmed" if agree else "NOT every optimum confirmed",
        f"(relative tolerance {REL_TOLERANCE:g})",
    )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
