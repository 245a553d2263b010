"""``main.py pareto``: the frontier of cluster size, GPU type and cost against step time.

For every GPU count of ``--gpus`` and every GPU type of ``--gpu-types`` (by
default the instance's own hardware, without a price) the instance is shaped
to that cluster (:func:`rlplan.compare.shapes.cluster_shape`: the node width is
kept and nodes grow before racks; a one-node instance grows in nodes of one
rack) and solved with ``auto``; the points run in parallel on the ``compare``
executors. The
non-dominated set is taken over (GPUs, step time, cost per step), all
minimised (:mod:`rlplan.compare.frontier`). An instance that lists
``hardware.pools`` is shaped from its pool 0.

With ``--budget-per-hour X`` or ``--total-gpus N`` instead of ``--gpus``,
``pareto`` explores pool mixes at that budget: every maximal mix of whole
nodes of the ``--gpu-types`` types, one type in today's form or several as
``hardware.pools`` (:mod:`rlplan.compare.pareto_mix`, whose docstring gives
its ``pareto.csv`` columns and its frontier).

``pareto.csv`` columns (one row per point, appended as each finishes; a rerun
with the same ``--out`` skips finished points and repairs a torn last row):

==========================  ==============================================================
``gpu_type``                GPU type name (``--gpu-types`` entry, or the instance's)
``gpus``                    GPUs in the cluster
``racks``,                  the cluster shape
``nodes_per_rack``,
``gpus_per_node``
``price_per_gpu_hour``      currency units per GPU-hour (empty without a price)
``status``                  OPTIMAL (proven), OPTIMAL_WITHIN_GAP, FEASIBLE, INFEASIBLE,
                            UNKNOWN (no plan in time) or ERROR
``step_time_s``             simulated step time, seconds
``bound_step_s``            proven lower bound on the score per step (the step time x
                            (1 + lambda_stale) for an off-policy plan), seconds (empty: none)
``gap``                     (score - bound) / score, a fraction
``cost_per_step``           currency units per step = gpus x price x step_time_s / 3600
``samples_per_s_per_gpu``   sequences per second per GPU (display only)
``dominated``               true / false; empty for a point without a plan
``dominated_by``            a point that dominates it, ``TYPE@GPUS``
``time_limit_s``            the solve's time limit, seconds
``wall_time_s``             the solve's wall time, seconds
``fingerprint``             fingerprint of the shaped instance (resume checks it)
``message``                 why the status is what it is (e.g. which vertex fits nowhere)
==========================  ==============================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rlplan.compare.csvlog import CsvLog
from rlplan.compare.explore_report import write_pareto_outputs
from rlplan.compare.frontier import Objectives, cost_per_step, dominated_by
from rlplan.compare.gputypes import GpuType, load_gpu_types
from rlplan.compare.mix_instances import base_hardware
from rlplan.compare.resumable import solve_resumable
from rlplan.compare.shapes import cluster_shape, rack_width
from rlplan.compare.variants import (
    PLAN_STATUSES,
    RunSettings,
    Variant,
    document_text,
    load_document,
    parse_variant,
)
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.yamlio import read_yaml_file

COLUMNS = (
    "gpu_type",
    "gpus",
    "racks",
    "nodes_per_rack",
    "gpus_per_node",
    "price_per_gpu_hour",
    "status",
    "step_time_s",
    "bound_step_s",
    "gap",
    "cost_per_step",
    "samples_per_s_per_gpu",
    "dominated",
    "dominated_by",
    "time_limit_s",
    "wall_time_s",
    "fingerprint",
    "message",
)
_INTS = ("gpus", "racks", "nodes_per_rack", "gpus_per_node")
_FLOATS = (
    "price_per_gpu_hour",
    "step_time_s",
    "bound_step_s",
    "gap",
    "cost_per_step",
    "samples_per_s_per_gpu",
    "time_limit_s",
    "wall_time_s",
)


@dataclass(frozen=True)
class Point:
    """One (GPU type, GPU count) to solve.

    Attributes
    ----------
    gpu_type
        The type.
    gpus
        GPU count.
    shape
        ``(racks, nodes_per_rack, gpus_per_node)``.
    variant
        The shaped instance, ready for a worker.
    fingerprint
        Fingerprint of the shaped instance.
    """

    gpu_type: GpuType
    gpus: int
    shape: tuple[int, int, int]
    variant: Variant
    fingerprint: str

    @property
    def key(self) -> str:
        """``TYPE@GPUS``."""
        return point_key(self.gpu_type.name, self.gpus)


def point_key(gpu_type: str, gpus: int) -> str:
    """How a point is named in ``dominated_by`` and in results: ``TYPE@GPUS``."""
    return f"{gpu_type}@{gpus}"


def parse_row(row: dict[str, str]) -> dict[str, Any]:
    """A ``pareto.csv`` row with numbers and booleans parsed (empty cells as None)."""
    parsed: dict[str, Any] = dict(row)
    for key in _INTS:
        parsed[key] = int(row[key]) if row.get(key) else None
    for key in _FLOATS:
        parsed[key] = float(row[key]) if row.get(key) else None
    parsed["dominated"] = {"true": True, "false": False}.get(row.get("dominated", ""))
    parsed["dominated_by"] = row.get("dominated_by") or None
    return parsed


def _default_type(path: str) -> GpuType:

    hardware = read_yaml_file(path).get("hardware") or {}
    preset = hardware.get("preset") if isinstance(hardware, dict) else None
    return GpuType(str(preset) if preset else "instance", {}, None)


def plan_points(
    instance_path: str, counts: list[int], gpu_types: list[GpuType] | None, solver: str = "auto"
) -> list[Point]:
    """Shape and validate every point before any work.

    Parameters
    ----------
    instance_path
        The instance file.
    counts
        GPU counts.
    gpu_types
        GPU types (None: the instance's own hardware, without a price).
    solver
        Backend of every solve.

    Raises
    ------
    InputError
        For a count that cannot be shaped or a type that makes the instance invalid.
    """
    document = load_document(instance_path)
    name = os.path.splitext(os.path.basename(instance_path))[0]
    types = gpu_types or [_default_type(instance_path)]
    points = []
    for gpu_type in types:
        hardware = gpu_type.hardware(base_hardware(document))
        for gpus in counts:
            width = rack_width(int(hardware["racks"]), int(hardware["nodes_per_rack"]))
            shape = cluster_shape(gpus, int(hardware["gpus_per_node"]), width)
            variant_document = dict(document)
            variant_document["hardware"] = {
                **hardware,
                "racks": shape[0],
                "nodes_per_rack": shape[1],
                "gpus_per_node": shape[2],
            }
            variant_name = f"{name}-{gpu_type.name}-{gpus}gpu"
            instance = parse_variant(
                variant_document, variant_name, f"GPU type {gpu_type.name!r} at {gpus} GPUs"
            )
            variant = Variant(
                point_key(gpu_type.name, gpus),
                variant_name,
                document_text(variant_document),
                solver,
            )
            points.append(Point(gpu_type, gpus, shape, variant, instance_fingerprint(instance)))
    return points


def point_row(point: Point, record: dict, time_limit: float) -> dict[str, Any]:
    """The ``pareto.csv`` row of a solved point (dominance filled in later)."""
    price = point.gpu_type.price_per_gpu_hour
    step = record.get("step_time_s")
    has_plan = step is not None and record.get("status") in PLAN_STATUSES
    return {
        "gpu_type": point.gpu_type.name,
        "gpus": point.gpus,
        "racks": point.shape[0],
        "nodes_per_rack": point.shape[1],
        "gpus_per_node": point.shape[2],
        "price_per_gpu_hour": price,
        "status": record.get("status", "ERROR"),
        "step_time_s": step if has_plan else None,
        "bound_step_s": record.get("bound_step_s"),
        "gap": record.get("gap") if has_plan else None,
        "cost_per_step": cost_per_step(point.gpus, price, step)
        if has_plan and price is not None
        else None,
        "samples_per_s_per_gpu": record["samples_per_s"] / point.gpus
        if has_plan and record.get("samples_per_s")
        else None,
        "dominated": None,
        "dominated_by": None,
        "time_limit_s": time_limit,
        "wall_time_s": record.get("wall_time_s"),
        "fingerprint": point.fingerprint,
        "message": record.get("message") or "",
    }


def mark_dominance(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set ``dominated`` and ``dominated_by`` of parsed rows (in place; returned).

    Points with a plan are compared over (GPUs, step time, cost per step);
    a point without a plan has neither field set.
    """
    objectives = [
        Objectives(row["gpus"], row.get("step_time_s"), row.get("cost_per_step")) for row in rows
    ]
    for row, by in zip(rows, dominated_by(objectives), strict=True):
        if row.get("step_time_s") is None:
            row["dominated"], row["dominated_by"] = None, None
        else:
            row["dominated"] = by is not None
            row["dominated_by"] = (
                None if by is None else point_key(rows[by]["gpu_type"], rows[by]["gpus"])
            )
    return rows


@dataclass(frozen=True)
class ParetoSettings:
    """What ``pareto`` runs and where.

    Attributes
    ----------
    instance
        The instance file.
    counts
        GPU counts.
    gpu_types
        The ``--gpu-types`` file, or None.
    out
        Output folder.
    run
        Time limit per point, executor, workers.
    """

    instance: str
    counts: list[int]
    gpu_types: str | None
    out: str
    run: RunSettings


def run_pareto(settings: ParetoSettings) -> int:
    """Solve every unfinished point, append each as it finishes, then write the outputs.

    Returns
    -------
    int
        0, or 130 when interrupted (finished points are kept for a rerun).
    """
    settings.run.check()
    if os.path.exists(settings.out) and not os.path.isdir(settings.out):
        raise InputError("--out", f"{settings.out} exists and is not a folder")
    types = load_gpu_types(settings.gpu_types) if settings.gpu_types else None
    points = plan_points(settings.instance, settings.counts, types)
    os.makedirs(settings.out, exist_ok=True)
    log = CsvLog(os.path.join(settings.out, "pareto.csv"), COLUMNS)
    if log.repaired:
        print(f"repaired {log.path}: dropped a row cut short by an interrupted run")
    rows, interrupted = solve_resumable(
        points,
        log,
        settings.run,
        lambda p: (p.gpu_type.name, p.gpus),
        lambda row: (row["gpu_type"], row["gpus"]),
        parse_row,
        lambda p, record: point_row(p, record, settings.run.time_limit),
        _point_line,
    )
    mark_dominance(rows)
    log.rewrite(rows)
    if rows:
        written = write_pareto_outputs(settings.out, settings.instance, rows)
        print("wrote " + ", ".join([log.path, *written]))
        print_frontier(rows)
    return 130 if interrupted else 0


def _point_line(row: dict[str, Any]) -> str:
    step = row.get("step_time_s")
    shown = "" if step is None else f"{step:.4f} s/step"
    cost = row.get("cost_per_step")
    money = "" if cost is None else f", {cost:.4g} per step"
    bound = row.get("bound_step_s")
    proof = "" if bound is None else f" (bound {bound:.4f} s)"
    message = f" — {row['message']}" if row.get("message") and step is None else ""
    return (
        f"  {point_key(row['gpu_type'], row['gpus']):<24} {row['status']:<10} "
        f"{shown}{proof}{money} in {row.get('wall_time_s') or 0:.1f} s{message}"
    )


def print_frontier(rows: list[dict[str, Any]]) -> None:
    """Print the non-dominated points, fewest GPUs first."""
    front = sorted(
        (r for r in rows if r.get("dominated") is False),
        key=lambda r: (r["gpus"], r["step_time_s"]),
    )
    print("frontier (GPUs, step time, cost per step; * = proven optimal):")
    for row in front:
        cost = row.get("cost_per_step")
        mark = "*" if row["status"] == "OPTIMAL" else " "
        print(
            f"  {mark} {point_key(row['gpu_type'], row['gpus']):<24} "
            f"{row['step_time_s']:.4f} s/step"
            + ("" if cost is None else f", {cost:.4g} per step")
            + f", {row['samples_per_s_per_gpu'] or 0:.3f} samples/s per GPU"
        )
