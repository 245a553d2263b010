"""``main.py pareto --budget-per-hour X`` or ``--total-gpus N``: the frontier of pool mixes.

Every maximal mix of whole nodes of the ``--gpu-types`` types within the
budget (:mod:`rlplan.compare.mixes`) becomes a shaped instance
(:mod:`rlplan.compare.mix_instances`: one type in today's form, several as
``hardware.pools`` joined by an inter-pool link) solved with ``auto``; points
run in parallel on the ``compare`` executors and resume from ``pareto.csv``
(:mod:`rlplan.compare.resumable`).

The budget is either

* ``--budget-per-hour X``: a mix's hourly price ``sum_t GPUs_t x price_t``
  is at most X; or
* ``--total-gpus N``: a mix has at most N GPUs (a budget of GPUs, each
  costing 1). With one node width that divides N, every mix has exactly N.

The frontier is the non-dominated set over (step time, cost per step) at a
budget per hour: GPUs are what the money buys there, not a cost. With
``--total-gpus`` it is over (GPUs, step time, cost per step), as the GPU-count
form's: mixes of several node widths may fall short of N, and fewer GPUs for
the same step is better.

``pareto.csv`` columns of this form (one row per mix):

==========================  ==============================================================
``mix``                     each type's name and GPUs, ``h100:16+h20:16``, in the types' order
``kind``                    ``homogeneous`` (one type) or ``mixed`` (pools)
``gpus``                    GPUs of the mix
``price_per_hour``          the mix's hourly price, currency units
``shapes``                  each type's ``RxNxG``, joined by ``+``
``status`` ... ``message``  as the GPU-count form's (:mod:`rlplan.compare.pareto`);
                            ``cost_per_step`` = price per hour x step time / 3600 and
                            ``dominated_by`` names a mix
``score_step_s``            (after ``step_time_s``) the objective per step: the step time,
                            x (1 + lambda_stale) for an off-policy plan; ``bound_step_s``
                            and ``gap`` are about it, so the bound may exceed the step time
==========================  ==============================================================
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from rlplan.compare.csvlog import CsvLog
from rlplan.compare.frontier import Objectives, cost_per_step, dominated_by
from rlplan.compare.gputypes import GpuType, load_gpu_types
from rlplan.compare.mix_instances import base_hardware, mix_document, type_width
from rlplan.compare.mix_report import write_mix_outputs
from rlplan.compare.mixes import Mix, NodeKind, enumerate_mixes
from rlplan.compare.resumable import solve_resumable
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

MIX_COLUMNS = (
    "mix",
    "kind",
    "gpus",
    "price_per_hour",
    "shapes",
    "status",
    "step_time_s",
    "score_step_s",
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
_INTS = ("gpus",)
_FLOATS = (
    "price_per_hour",
    "step_time_s",
    "score_step_s",
    "bound_step_s",
    "gap",
    "cost_per_step",
    "samples_per_s_per_gpu",
    "time_limit_s",
    "wall_time_s",
)
#: A type name must be a pool name (``hardware.pools[i].name`` of rlplan.rpeg.schema.pools).
_POOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: Default of ``--max-mixes``: each mix is one solve of ``--time-limit`` seconds.
MAX_MIXES = 100


@dataclass(frozen=True)
class MixBudget:
    """What a mix may take: currency per hour, or GPUs.

    Attributes
    ----------
    per_hour
        ``--budget-per-hour`` (None with ``--total-gpus``).
    total_gpus
        ``--total-gpus`` (None with ``--budget-per-hour``).
    max_mixes
        ``--max-mixes``: the most mixes to solve.
    """

    per_hour: float | None = None
    total_gpus: int | None = None
    max_mixes: int = MAX_MIXES

    @property
    def option(self) -> str:
        """The option that sets the budget."""
        return "--budget-per-hour" if self.per_hour is not None else "--total-gpus"

    @property
    def value(self) -> float:
        """The budget, in currency per hour or in GPUs."""
        return self.per_hour if self.per_hour is not None else float(self.total_gpus or 0)

    def words(self) -> str:
        """The budget in words, for the terminal and the report."""
        if self.per_hour is not None:
            return f"a budget of {self.per_hour:g} per hour"
        return f"a total of at most {self.total_gpus} GPUs"


@dataclass(frozen=True)
class MixPoint:
    """One mix to solve.

    Attributes
    ----------
    mix
        Its key, ``h100:16+h20:16``.
    parts
        ``(type, GPUs)`` per type of the mix.
    shapes
        Each type's ``RxNxG``, joined by ``+``.
    variant
        The shaped instance, ready for a worker.
    fingerprint
        Fingerprint of the shaped instance.
    """

    mix: str
    parts: tuple[tuple[GpuType, int], ...]
    shapes: str
    variant: Variant
    fingerprint: str

    @property
    def key(self) -> str:
        """The mix key."""
        return self.mix

    @property
    def gpus(self) -> int:
        """GPUs of the mix."""
        return sum(gpus for _, gpus in self.parts)

    @property
    def price_per_hour(self) -> float:
        """The mix's hourly price."""
        return sum(gpus * (t.price_per_gpu_hour or 0.0) for t, gpus in self.parts)


def node_kinds(document: dict[str, Any], types: list[GpuType], budget: MixBudget) -> list[NodeKind]:
    """Each type's node width, rack width and the node's cost against ``budget``."""
    base = base_hardware(document)
    kinds = []
    for index, gpu_type in enumerate(types):
        if not _POOL_NAME.fullmatch(gpu_type.name):
            raise InputError(
                f"--gpu-types: gpu_types[{index}].name",
                f"{gpu_type.name!r} cannot name a pool of a mix (letters, digits, '_', '.' or "
                "'-', at most 64, starting with a letter or digit)",
            )
        hardware = gpu_type.hardware(base)
        width = int(hardware["gpus_per_node"])
        price = gpu_type.price_per_gpu_hour or 0.0
        cost = width * price if budget.per_hour is not None else float(width)
        kinds.append(NodeKind(gpu_type.name, width, cost, type_width(hardware)))
    return kinds


def plan_mix_points(
    instance_path: str, types: list[GpuType], budget: MixBudget, solver: str = "auto"
) -> list[MixPoint]:
    """Enumerate the mixes and shape and validate each before any work.

    Raises
    ------
    InputError
        For a type whose node does not fit the budget, too many mixes, or a
        mix that makes the instance invalid.
    """
    document = load_document(instance_path)
    name = os.path.splitext(os.path.basename(instance_path))[0]
    kinds = node_kinds(document, types, budget)
    mixes = enumerate_mixes(kinds, budget.value, budget.max_mixes, budget.option)
    return [_mix_point(document, name, types, kinds, mix, solver) for mix in mixes]


def _mix_point(
    document: dict[str, Any],
    name: str,
    types: list[GpuType],
    kinds: list[NodeKind],
    mix: Mix,
    solver: str,
) -> MixPoint:
    key = mix.key(kinds)
    parts = tuple((types[t], nodes * kinds[t].node_gpus) for t, nodes in mix.parts)
    variant_document = mix_document(document, parts)
    variant_name = f"{name}-{key.replace(':', '-').replace('+', '_')}"
    instance = parse_variant(variant_document, variant_name, f"pool mix {key}")
    hardware = variant_document["hardware"]
    sections = hardware.get("pools", [hardware])
    shapes = "+".join(f"{s['racks']}x{s['nodes_per_rack']}x{s['gpus_per_node']}" for s in sections)
    variant = Variant(key, variant_name, document_text(variant_document), solver)
    return MixPoint(key, parts, shapes, variant, instance_fingerprint(instance))


def mix_row(point: MixPoint, record: dict, time_limit: float) -> dict[str, Any]:
    """The ``pareto.csv`` row of a solved mix (dominance filled in later)."""
    step = record.get("step_time_s")
    has_plan = step is not None and record.get("status") in PLAN_STATUSES
    return {
        "mix": point.mix,
        "kind": "homogeneous" if len(point.parts) == 1 else "mixed",
        "gpus": point.gpus,
        "price_per_hour": point.price_per_hour,
        "shapes": point.shapes,
        "status": record.get("status", "ERROR"),
        "step_time_s": step if has_plan else None,
        "score_step_s": record.get("score_step_s") if has_plan else None,
        "bound_step_s": record.get("bound_step_s"),
        "gap": record.get("gap") if has_plan else None,
        "cost_per_step": sum(
            cost_per_step(gpus, t.price_per_gpu_hour or 0.0, step) for t, gpus in point.parts
        )
        if has_plan
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


def parse_mix_row(row: dict[str, str]) -> dict[str, Any]:
    """A mix row with numbers and booleans parsed (empty cells as None)."""
    parsed: dict[str, Any] = dict(row)
    for key in _INTS:
        parsed[key] = int(row[key]) if row.get(key) else None
    for key in _FLOATS:
        parsed[key] = float(row[key]) if row.get(key) else None
    parsed["dominated"] = {"true": True, "false": False}.get(row.get("dominated", ""))
    parsed["dominated_by"] = row.get("dominated_by") or None
    return parsed


def mark_mix_dominance(rows: list[dict[str, Any]], with_gpus: bool) -> list[dict[str, Any]]:
    """Set ``dominated`` and ``dominated_by`` (a mix key) of parsed rows, in place.

    Rows with a plan are compared over (step time, cost per step), and over
    GPUs too when ``with_gpus``; a row without a plan has neither set.
    """
    objectives = [
        Objectives(row["gpus"] if with_gpus else None, row.get("step_time_s"), row["cost_per_step"])
        for row in rows
    ]
    for row, by in zip(rows, dominated_by(objectives), strict=True):
        if row.get("step_time_s") is None:
            row["dominated"], row["dominated_by"] = None, None
        else:
            row["dominated"] = by is not None
            row["dominated_by"] = None if by is None else rows[by]["mix"]
    return rows


@dataclass(frozen=True)
class MixSettings:
    """What the pool-mix form of ``pareto`` runs and where.

    Attributes
    ----------
    instance
        The instance file.
    gpu_types
        The ``--gpu-types`` file.
    budget
        The budget and the mix limit.
    out
        Output folder.
    run
        Time limit per mix, executor, workers.
    """

    instance: str
    gpu_types: str
    budget: MixBudget
    out: str
    run: RunSettings


def run_pareto_mix(settings: MixSettings) -> int:
    """Solve every unfinished mix, append each as it finishes, then write the outputs.

    Returns
    -------
    int
        0, or 130 when interrupted (finished mixes are kept for a rerun).
    """
    settings.run.check()
    if os.path.exists(settings.out) and not os.path.isdir(settings.out):
        raise InputError("--out", f"{settings.out} exists and is not a folder")
    points = plan_mix_points(settings.instance, load_gpu_types(settings.gpu_types), settings.budget)
    os.makedirs(settings.out, exist_ok=True)
    log = CsvLog(os.path.join(settings.out, "pareto.csv"), MIX_COLUMNS)
    if log.repaired:
        print(f"repaired {log.path}: dropped a row cut short by an interrupted run")
    print(f"{len(points)} pool mix(es) at {settings.budget.words()}")
    rows, interrupted = solve_resumable(
        points,
        log,
        settings.run,
        lambda p: p.mix,
        lambda row: row["mix"],
        parse_mix_row,
        lambda p, record: mix_row(p, record, settings.run.time_limit),
        _mix_line,
    )
    mark_mix_dominance(rows, with_gpus=settings.budget.per_hour is None)
    log.rewrite(rows)
    if rows:
        written = write_mix_outputs(settings.out, settings.instance, rows, settings.budget.words())
        print("wrote " + ", ".join([log.path, *written]))
        print_mix_frontier(rows, settings.budget.words(), settings.budget.per_hour is None)
    return 130 if interrupted else 0


def _mix_line(row: dict[str, Any]) -> str:
    step = row.get("step_time_s")
    shown = "" if step is None else f"{step:.4f} s/step"
    bound = row.get("bound_step_s")
    proof = "" if bound is None else f" (bound {bound:.4f} s)"
    score = row.get("score_step_s")
    if bound is not None and step is not None and score is not None and score > step * 1.000001:
        proof = f" (score {score:.4f} s, bound {bound:.4f} s)"
    cost = row.get("cost_per_step")
    money = "" if cost is None else f", {cost:.4g} per step"
    message = f" — {row['message']}" if row.get("message") and step is None else ""
    return (
        f"  {row['mix']:<28} {row['status']:<10} {shown}{proof}{money} "
        f"in {row.get('wall_time_s') or 0:.1f} s{message}"
    )


def _proof_words(row: dict[str, Any]) -> str:
    if row["status"] == "OPTIMAL":
        return "proven optimal"
    if row.get("gap") is not None:
        return f"not proven: gap {100 * row['gap']:.2f}%"
    return "not proven: no bound"


def print_mix_frontier(rows: list[dict[str, Any]], budget: str, with_gpus: bool = False) -> None:
    """Print the non-dominated mixes, fastest first, the fastest mix at the budget and how
    the fastest mixed one compares with the fastest homogeneous one."""
    front = sorted((r for r in rows if r.get("dominated") is False), key=lambda r: r["step_time_s"])
    objectives = "GPUs, step time, cost per step" if with_gpus else "step time, cost per step"
    print(f"frontier by mix ({objectives}; * = proven optimal):")
    for row in front:
        mark = "*" if row["status"] == "OPTIMAL" else " "
        print(
            f"  {mark} {row['mix']:<28} {row['step_time_s']:.4f} s/step, "
            f"{row['cost_per_step']:.4g} per step, {row['price_per_hour']:.4g} per hour, "
            f"{row['gpus']} GPUs"
        )
    planned = [r for r in rows if r.get("step_time_s") is not None]
    if not planned:
        print(f"no mix at {budget} has a plan")
        return
    best = min(planned, key=lambda r: r["step_time_s"])
    print(
        f"fastest mix at {budget}: {best['mix']}, {best['step_time_s']:.4f} s/step "
        f"({_proof_words(best)}), {best['price_per_hour']:.4g} per hour"
    )
    kinds = {
        kind: min((r for r in planned if r["kind"] == kind), key=lambda r: r["step_time_s"])
        for kind in ("homogeneous", "mixed")
        if any(r["kind"] == kind for r in planned)
    }
    if len(kinds) == 2:
        mixed, alone = kinds["mixed"], kinds["homogeneous"]
        print(
            f"fastest mixed {mixed['mix']} against fastest homogeneous {alone['mix']}: "
            f"{alone['step_time_s'] / mixed['step_time_s']:.3f}x the steps per second"
        )
