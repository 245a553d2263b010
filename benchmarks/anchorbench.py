"""Benchmark: H100 only, H20 only and a mix of both at an equal hourly budget.

Run ``python -m benchmarks.anchorbench [--time-limit 300] [--out DIR] [--family NAME]``.

The instances are ``instances/anchor/``: one GRPO math workload with long
reasoning generations, for a dense 7B actor (``grpo_r1_7b_math_*``) and for the
Qwen3-30B-A3B mixture-of-experts actor (``grpo_qwen3_30b_a3b_math_*``), each on
three clusters that fit 36 units per hour at the prices of
``instances/gpu_types/h100_h20.yaml``: 2 nodes of H100 (36.0), 4 nodes of H20
(32.0), and 1 node of H100 beside 2 nodes of H20 (34.0). Every instance is
solved with ``auto`` (its ``k_eval`` is 16); the status, simulated step time,
score (the step time times 1.05 for an off-policy plan, ``lambda_stale``), the
proven bound on the score and the gap are the solve's.

An asynchronous plan's makespan over k steps includes the fill of its
pipeline, so the benchmark also simulates each optimum's plan (placements,
strategies and staleness unchanged; the default run order) unrolled over 32
and 64 steps: ``(makespan(64) - makespan(32)) / 32`` is the plan's long-run
mean step. That is the plan's own long-run figure, not an optimum over long
runs (the solve optimised 16 steps).

It prints, and writes to ``anchorbench.md`` in the output folder, one row per
instance (GPUs, hourly price, status, step time, bound, gap, long-run mean
step, cost per step at the long-run mean, wall time) and, per family, the
mixed cluster's speed-up and cost ratio against each homogeneous one.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from typing import Any

from rlplan import api
from rlplan.outputs.files import write_text
from rlplan.rpeg.schema.yamlio import read_yaml_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "instances", "anchor")
FAMILIES = ("r1_7b", "qwen3_30b_a3b")
CLUSTERS = ("h100_2x8", "h20_4x8", "h100_h20")
#: Steps of the two long unrolled simulations whose difference is the long-run mean.
LONG_STEPS = (32, 64)


def hourly_price(document: dict[str, Any]) -> tuple[int, float]:
    """GPUs and price per hour of a ``hardware.pools`` cluster."""
    gpus = price = 0
    for pool in document["hardware"]["pools"]:
        count = pool["racks"] * pool["nodes_per_rack"] * pool["gpus_per_node"]
        gpus += count
        price += count * float(pool["price_per_gpu_hour"])
    return gpus, price


def _unrolled(document: dict[str, Any], plan: dict[str, Any], steps: int) -> float:
    """The makespan of ``plan`` unrolled over ``steps`` steps, seconds."""
    longer = copy.deepcopy(document)
    longer["optimizer"]["k_eval"] = steps
    replanned = {key: value for key, value in plan.items() if key not in ("order", "instance")}
    replanned["k_eval"] = steps
    return api.simulate(longer, replanned).makespan


def long_run_step(document: dict[str, Any], plan: dict[str, Any]) -> float:
    """``(makespan(64) - makespan(32)) / 32`` of ``plan``, seconds per step."""
    short, long = (_unrolled(document, plan, steps) for steps in LONG_STEPS)
    return (long - short) / (LONG_STEPS[1] - LONG_STEPS[0])


def run_one(path: str, time_limit: float) -> dict[str, Any]:
    """Solve one instance and measure its plan's long-run mean step."""
    document = read_yaml_file(path)
    started = time.perf_counter()
    result = api.solve(path, "auto", time_limit=time_limit)
    wall = time.perf_counter() - started
    gpus, price = hourly_price(document)
    row: dict[str, Any] = {
        "instance": os.path.splitext(os.path.basename(path))[0],
        "gpus": gpus,
        "price_per_hour": price,
        "status": result.status.value,
        "step_s": result.step_time,
        "score_s": result.score_step,
        "bound_s": result.bound_step,
        "gap": result.gap,
        "wall_s": wall,
    }
    if result.plan_document is not None:
        row["long_run_s"] = long_run_step(document, result.plan_document)
        row["cost_per_step"] = price * row["long_run_s"] / 3600.0
    return row


def _cell(value: Any, form: str) -> str:
    return "—" if value is None else format(value, form)


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The per-instance table, Markdown."""
    lines = [
        "| instance | GPUs | price/h | status | step (k=16) s | score s | bound s | gap | "
        "long-run step s | cost/step | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['instance']} | {row['gpus']} | {row['price_per_hour']:.2f} | "
            f"{row['status']} | {_cell(row['step_s'], '.2f')} | {_cell(row['score_s'], '.2f')} | "
            f"{_cell(row['bound_s'], '.2f')} | "
            f"{_cell(row['gap'], '.4%')} | {_cell(row.get('long_run_s'), '.2f')} | "
            f"{_cell(row.get('cost_per_step'), '.3f')} | {row['wall_s']:.1f} |"
        )
    return lines


def ratios(family: str, rows: dict[str, dict[str, Any]]) -> list[str]:
    """The mixed cluster against each homogeneous one: speed-up and cost ratio."""
    mixed = rows.get("h100_h20")
    lines = []
    for other in ("h100_2x8", "h20_4x8"):
        base = rows.get(other)
        if not mixed or not base or "long_run_s" not in mixed or "long_run_s" not in base:
            continue
        lines.append(
            f"- {family}: mixed vs {other}: step (k=16) {base['step_s'] / mixed['step_s']:.2f}x "
            f"faster, long-run step {base['long_run_s'] / mixed['long_run_s']:.2f}x faster, "
            f"cost per step {base['cost_per_step'] / mixed['cost_per_step']:.2f}x lower"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when every instance was solved to a plan."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.anchorbench", description=__doc__)
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per solve")
    parser.add_argument("--out", default=os.path.join("runs", "anchorbench"))
    parser.add_argument("--family", choices=FAMILIES, action="append")
    args = parser.parse_args(argv)
    rows, summary = [], []
    for family in args.family or FAMILIES:
        by_cluster = {}
        for cluster in CLUSTERS:
            path = os.path.join(FOLDER, f"grpo_{family}_math_{cluster}.yaml")
            row = run_one(path, args.time_limit)
            print(table([row])[-1], flush=True)
            rows.append(row)
            by_cluster[cluster] = row
        summary += ratios(family, by_cluster)
    text = "\n".join(["# H100, H20 and a mix at 36 units per hour", "", *table(rows), "", *summary])
    os.makedirs(args.out, exist_ok=True)
    write_text(os.path.join(args.out, "anchorbench.md"), text + "\n")
    print("\n".join(summary))
    return 0 if all("long_run_s" in row for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
