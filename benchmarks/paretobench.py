"""Benchmark: the proven frontier of ``ppo_8b`` over 8, 16, 32 and 64 H100 within a budget.

Run ``python -m benchmarks.paretobench [--budget 300] [--workers 1] [--out DIR]``.
By default the points run one after another, smallest first, each with all
the machine's cores as solver threads (on 2 cores CP-SAT then runs its
default worker beside the max-LP worker, whose relaxation the larger points'
proofs need); each point may use the whole budget, and the benchmark passes
only when every point is proven optimal and the whole frontier took at most
the budget. With ``--workers N`` the points run N at a time, the cores shared
among them, each limited to ``budget x N / points`` seconds. It prints, and
writes to ``paretobench.md`` in the output folder, each point's status, step
time, bound, gap and wall time, the total wall time, and
whether every point was proven optimal within the budget.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

from rlplan.compare.pareto import ParetoSettings, parse_row, run_pareto
from rlplan.compare.variants import RunSettings
from rlplan.outputs.files import write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTANCE = os.path.join(ROOT, "instances", "ppo_8b_1x2x8_h100.yaml")
COUNTS = [8, 16, 32, 64]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when every point is proven optimal within the budget."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.paretobench", description=__doc__)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the frontier")
    parser.add_argument("--workers", type=int, default=1, help="points solved at a time")
    parser.add_argument("--out", default=os.path.join("runs", "paretobench"))
    parser.add_argument("--instance", default=INSTANCE)
    args = parser.parse_args(argv)
    if args.workers == 1:
        per_point = math.floor(args.budget)
    else:
        per_point = math.floor(args.budget * args.workers / len(COUNTS))
    out = os.path.join(args.out, time.strftime("%Y%m%d-%H%M%S"))
    started = time.perf_counter()
    run_pareto(
        ParetoSettings(
            args.instance,
            COUNTS,
            None,
            out,
            RunSettings(time_limit=per_point, executor="local", workers=args.workers),
        )
    )
    total = time.perf_counter() - started
    import csv

    with open(os.path.join(out, "pareto.csv"), newline="", encoding="utf-8") as handle:
        rows = [parse_row(row) for row in csv.DictReader(handle)]
    proven = all(row["status"] == "OPTIMAL" for row in rows) and len(rows) == len(COUNTS)
    lines = [
        f"# Pareto benchmark: {os.path.basename(args.instance)} over {COUNTS} GPUs",
        "",
        f"{os.cpu_count()} cores, {args.workers} points at a time, {per_point} s per point, "
        f"budget {args.budget:g} s.",
        "",
        "| GPUs | status | step time (s) | bound (s/step) | gap | wall time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        gap = "—" if row["gap"] is None else f"{100 * row['gap']:.3f}%"
        step = "—" if row["step_time_s"] is None else f"{row['step_time_s']:.4f}"
        bound = "—" if row["bound_step_s"] is None else f"{row['bound_step_s']:.4f}"
        lines.append(
            f"| {row['gpus']} | {row['status']} | {step} | {bound} | {gap} | "
            f"{row['wall_time_s']:.1f} |"
        )
    verdict = "every point proven optimal" if proven else "NOT every point proven optimal"
    lines += ["", f"Total wall time {total:.1f} s: {verdict} (budget {args.budget:g} s)."]
    text = "\n".join(lines) + "\n"
    write_text(os.path.join(out, "paretobench.md"), text)
    sys.stdout.write(text)
    return 0 if proven and total <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
