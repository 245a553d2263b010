"""``main.py sweep``: re-solve while one field varies; ``--tornado`` ranks hardware fields.

``--param PATH=v1,v2,...`` sets the instance field ``PATH`` (e.g.
``hardware.beta_coll_n``, ``hardware.memory_per_gpu``,
``workload.generation_length``, ``workload.batch_size``) to each value in
turn, solves with ``auto`` and reports the step time and what changed in the
plan since the previous value. Values are written as in an instance file
(bandwidths in bytes/s, memory in bytes, times in seconds).

``sweep.csv`` columns:

=====================  ================================================================
``param``              the field's path
``value``              its value (the field's unit)
``status``             OPTIMAL (proven), OPTIMAL_WITHIN_GAP, FEASIBLE, INFEASIBLE, UNKNOWN
``step_time_s``        simulated step time, seconds
``bound_step_s``       proven lower bound on the step time, seconds
``gap``                (step time - bound) / step time, a fraction
``step_change_s``      step time minus the previous value's, seconds
``samples_per_s``      sequences per second
``plan_change``        what changed in the plan since the previous value, in words
``wall_time_s``        the solve's wall time, seconds
``message``            why the status is what it is
=====================  ================================================================

``--tornado`` ranks the hardware fields by the step-time change at 0.5x and
1.5x their value (:mod:`rlplan.compare.tornado`).
"""

from __future__ import annotations

import copy
import os
import sys
from dataclasses import dataclass
from typing import Any

from rlplan.compare.explore_report import write_sweep_outputs
from rlplan.compare.plandiff import describe_changes, plan_changes
from rlplan.compare.sweep_parameters import Parameter
from rlplan.compare.sweep_parameters import parse_parameter as parse_parameter  # for --param
from rlplan.compare.tornado import (
    MOE_FIELDS,
    default_fields,
    has_plan,
    print_tornado,
    tornado_entries,
    tornado_fields,
    tornado_values,
)
from rlplan.compare.tornado import rank_tornado as rank_tornado  # for the tests
from rlplan.compare.variants import (
    RunSettings,
    Variant,
    document_text,
    load_document,
    parse_variant,
    run_variants,
)
from rlplan.rpeg.errors import InputError, did_you_mean
from rlplan.rpeg.schema.instance import _SECTIONS, parse_instance
from rlplan.rpeg.schema.yamlio import loads


def set_field(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``document`` with the field at dotted ``path`` set to ``value``.

    Raises
    ------
    InputError
        When the path's section is not in the document's schema, or an
        intermediate field is not a mapping.
    """

    parts = path.split(".")
    if parts[0] not in _SECTIONS:
        raise InputError(
            "--param", f"{path!r}: unknown section {parts[0]!r} (sections: {', '.join(_SECTIONS)})"
        )
    edited = copy.deepcopy(document)
    node = edited
    for index, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise InputError("--param", f"{'.'.join(parts[: index + 1])} is not a mapping")
        node = child
    current = node.get(parts[-1])
    if current is not None and (isinstance(current, bool) or not isinstance(current, int | float)):
        raise InputError("--param", f"{path} is not a numeric field (it holds {current!r})")
    node[parts[-1]] = value
    return edited


def _variants(
    document: dict[str, Any], name: str, path: str, values: list[float], prefix: str
) -> list[Variant]:
    variants = []
    for index, value in enumerate(values):
        edited = set_field(document, path, value)
        parse_variant(edited, name, f"--param {path}={value}")
        variants.append(Variant(f"{prefix}{index}", f"{name}", document_text(edited)))
    return variants


def _solve_all(variants: list[Variant], run: RunSettings, label: str) -> dict[str, dict]:
    records = {}
    for record in run_variants(variants, run, label):
        records[record["key"]] = record
        if record.get("status") == "ERROR":
            print(f"  {record['key']}: ERROR {record.get('message', '')}", file=sys.stderr)
    return records


def sweep_rows(parameter: Parameter, records: list[dict]) -> list[dict[str, Any]]:
    """``sweep.csv`` rows from the records of each value, in the order of the values.

    The plan change of a value is described against the previous value's plan.
    """
    rows: list[dict[str, Any]] = []
    previous: dict | None = None
    for index, (value, record) in enumerate(zip(parameter.values, records, strict=True)):
        plan = record.get("plan") if has_plan(record) else None
        step = record.get("step_time_s") if plan is not None else None
        if index == 0:
            change = "first value" if plan is not None else "no plan"
            delta = None
        else:
            old_plan = previous.get("plan") if previous and has_plan(previous) else None
            phrases = plan_changes(
                old_plan, plan, (previous or {}).get("shape"), record.get("shape")
            )
            change = describe_changes(phrases) if (old_plan or plan) else "no plan"
            old_step = previous.get("step_time_s") if old_plan is not None else None
            delta = None if step is None or old_step is None else step - old_step
        rows.append(
            {
                "param": parameter.path,
                "value": value,
                "status": record.get("status", "ERROR"),
                "step_time_s": step,
                "bound_step_s": record.get("bound_step_s"),
                "gap": record.get("gap") if plan is not None else None,
                "step_change_s": delta,
                "samples_per_s": record.get("samples_per_s") if plan is not None else None,
                "plan_change": change,
                "wall_time_s": record.get("wall_time_s"),
                "message": record.get("message") or "",
            }
        )
        previous = record
    return rows


def _tornado_variants(
    document: dict[str, Any], name: str, wanted: tuple[str, ...] | None
) -> tuple[dict[str, float], list[str], list[str], list[Variant]]:
    """The tornado's fields with their values, the fields not varied (at 0, or
    :data:`~rlplan.compare.tornado.MOE_FIELDS` left out of a dense instance's
    default), and the variants to solve: each field at its low and high value,
    then the base.

    Raises
    ------
    InputError
        When a field of ``wanted`` (``--fields``) is not a numeric hardware field.
    """
    instance = parse_instance(loads(document_text(document), name), name)
    available = tornado_fields(instance.hardware)
    chosen = wanted or default_fields(available, instance)
    for field_name in chosen:
        if field_name not in available:
            raise InputError(
                "--fields",
                f"{field_name!r} is not a numeric hardware field"
                f"{did_you_mean(field_name, available)} (fields: {', '.join(available)})",
            )
    fields: dict[str, float] = {}
    skipped: list[str] = []
    variants: list[Variant] = []
    for field_name in chosen:
        value = available[field_name]
        if value == 0:
            skipped.append(field_name)
            continue
        fields[field_name] = value
        for side, edit in zip(("low", "high"), tornado_values(field_name, value), strict=True):
            edited = set_field(document, f"hardware.{field_name}", edit)
            parse_variant(edited, name, f"--tornado hardware.{field_name}={edit}")
            variants.append(Variant(f"{field_name}-{side}", name, document_text(edited)))
    variants.append(Variant("base", name, document_text(document)))
    left_out = [field for field in MOE_FIELDS if field in available and field not in chosen]
    return fields, skipped, left_out if not wanted else [], variants


@dataclass(frozen=True)
class SweepSettings:
    """What ``sweep`` runs.

    Attributes
    ----------
    instance
        The instance file.
    parameter
        The ``--param`` (None with ``--tornado`` alone).
    tornado
        Also rank the hardware fields.
    out
        Output folder.
    run
        Time limit per solve, executor, workers.
    fields
        Hardware fields the tornado varies (None: every numeric one).
    """

    instance: str
    parameter: Parameter | None
    tornado: bool
    out: str
    run: RunSettings
    fields: tuple[str, ...] | None = None


def run_sweep(settings: SweepSettings) -> int:
    """Validate every variant, solve them, print the table and write the outputs.

    Returns
    -------
    int
        0 (130 when interrupted: nothing is written).
    """

    settings.run.check()
    if settings.parameter is None and not settings.tornado:
        raise InputError("--param", "give --param PATH=v1,v2,... or --tornado")
    if os.path.exists(settings.out) and not os.path.isdir(settings.out):
        raise InputError("--out", f"{settings.out} exists and is not a folder")
    document = load_document(settings.instance)
    name = os.path.splitext(os.path.basename(settings.instance))[0]
    variants: list[Variant] = []
    if settings.parameter is not None:
        variants += _variants(
            document, name, settings.parameter.path, list(settings.parameter.values), "value-"
        )
    fields: dict[str, float] = {}
    skipped: list[str] = []
    left_out: list[str] = []
    if settings.tornado:
        fields, skipped, left_out, more = _tornado_variants(document, name, settings.fields)
        variants += more
    print(f"{len(variants)} solve(s), {settings.run.time_limit:g} s each with auto")
    try:
        records = _solve_all(variants, settings.run, "sweep")
    except KeyboardInterrupt:
        print("interrupted: nothing written", file=sys.stderr)
        return 130
    rows: list[dict[str, Any]] = []
    if settings.parameter is not None:
        ordered = [records[f"value-{i}"] for i in range(len(settings.parameter.values))]
        rows = sweep_rows(settings.parameter, ordered)
        print_sweep(rows)
    entries: list[dict[str, Any]] = []
    base_step = None
    if settings.tornado:
        base = records["base"]
        base_step = base.get("step_time_s") if has_plan(base) else None
        if base_step is None:
            print(
                f"tornado: the instance itself has no plan ({base.get('status')}: "
                f"{base.get('message', '')}); no ranking"
            )
        else:
            entries = tornado_entries(fields, base, records)
            print_tornado(entries, base_step, skipped, left_out)

    written = write_sweep_outputs(
        settings.out, settings.instance, settings.parameter, rows, entries, base_step, skipped
    )
    print("wrote " + ", ".join(written))
    return 0


def print_sweep(rows: list[dict[str, Any]]) -> None:
    """Print one line per value: status, step time and the plan change."""
    for row in rows:
        step = row["step_time_s"]
        shown = "" if step is None else f"{step:.4f} s/step"
        delta = row.get("step_change_s")
        moved = "" if delta is None else f" ({delta:+.4f} s)"
        why = f" — {row['message']}" if step is None and row.get("message") else ""
        print(f"  {row['param']}={row['value']:<12g} {row['status']:<10} {shown}{moved}{why}")
        print(f"      plan: {row['plan_change']}")
