"""Instance variants for ``pareto`` and ``sweep``: edited documents, solved in workers.

A variant is the instance file's document with some fields changed (the
cluster shape, the GPU figures, one swept field). It travels to a worker as
YAML text, like a ``compare`` cell, so a Ray worker on another machine needs no
access to the driver's files, and the worker returns one flat record.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from rlplan.compare.executors import run_local, run_ray
from rlplan.compare.progressbar import progress_bar
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import plan_to_json
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import Instance, parse_instance
from rlplan.rpeg.schema.presets import expand_hardware
from rlplan.rpeg.schema.yamlio import loads, read_yaml_file
from rlplan.solvers import get_solver
from rlplan.solvers.options import SolveOptions

#: Statuses of a result that carries a usable plan.
PLAN_STATUSES = ("OPTIMAL", "OPTIMAL_WITHIN_GAP", "FEASIBLE")


@dataclass(frozen=True)
class Variant:
    """One instance variant to solve.

    Attributes
    ----------
    key
        Identity of the variant in its results (e.g. ``h100@16``).
    name
        Instance name the variant is parsed under.
    text
        The variant's instance document as YAML.
    solver
        Backend that solves it.
    """

    key: str
    name: str
    text: str
    solver: str = "auto"


def load_document(path: str) -> dict[str, Any]:
    """Read an instance file as an editable document, validated once.

    The hardware preset (if any) is expanded into the fields it fills, so that
    every hardware figure can be read and edited, and relative
    ``models.<role>.hf_config`` paths are made absolute, so that the document
    means the same from any folder.

    Parameters
    ----------
    path
        An instance YAML file.

    Returns
    -------
    dict[str, Any]
        The document, a mapping of sections.

    Raises
    ------
    InputError
        If the file is not a valid instance.
    """
    data = read_yaml_file(path)
    base = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    parse_instance(data, stem, base)  # the file's own problems are reported against it
    document = copy.deepcopy(dict(data))
    document["hardware"] = expand_hardware(document["hardware"])
    for spec in (document.get("models") or {}).values():
        if isinstance(spec, dict) and isinstance(spec.get("hf_config"), str):
            spec["hf_config"] = os.path.join(base, spec["hf_config"])
    return document


def document_text(document: Mapping[str, Any]) -> str:
    """The document as YAML text (readable back by :func:`rlplan.rpeg.schema.yamlio.loads`)."""
    return yaml.safe_dump(_plain(document), sort_keys=False)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def parse_variant(document: Mapping[str, Any], name: str, what: str) -> Instance:
    """Parse an edited document, naming the edit when it breaks the schema.

    Parameters
    ----------
    document
        The edited instance document.
    name
        Instance name.
    what
        The option and value that made the edit (e.g. ``--param
        hardware.memory_per_gpu=4e9``), prefixed to any error.

    Raises
    ------
    InputError
        With ``what`` as its path.
    """
    try:
        return parse_instance(loads(document_text(document), name), name)
    except InputError as exc:
        raise InputError(what, str(exc)) from None


def solve_variant(variant: Variant, time_limit: float, threads: int, seed: int) -> dict:
    """Solve one variant and return its record (runs in a worker process or Ray task).

    Parameters
    ----------
    variant
        What to solve.
    time_limit
        Seconds for the solve.
    threads
        Solver threads.
    seed
        Random seed.

    Returns
    -------
    dict
        ``key``, ``status``, ``message``, ``gpus``, ``shape`` (racks,
        nodes per rack, GPUs per node), ``k_eval``,
        ``step_time_s``, ``makespan_s`` (simulated), ``score_step_s`` (the
        objective per step: the step time x the staleness factor of an
        off-policy plan), ``bound_step_s``,
        ``bound_makespan_s`` (proven lower bounds, or None), ``gap``,
        ``samples_per_s`` (sequences per simulated second), ``wall_time_s``,
        ``fingerprint`` (of the variant instance) and ``plan`` (the plan
        document of :func:`rlplan.rpeg.model.plan.plan_to_json`, or None).
    """

    started = time.perf_counter()
    record: dict[str, Any] = {"key": variant.key, "plan": None}
    try:
        instance = parse_instance(loads(variant.text, variant.name), variant.name)
        problem = Problem.from_instance(instance)
        result = get_solver(variant.solver)(
            problem, SolveOptions(time_limit=time_limit, threads=threads, seed=seed)
        )
    except InputError as exc:
        record.update(status="ERROR", message=str(exc), wall_time_s=time.perf_counter() - started)
        return record
    step = result.step_time
    record.update(
        status=result.status.value,
        message=result.message,
        gpus=instance.hardware.num_gpus,
        shape=[
            instance.hardware.racks,
            instance.hardware.nodes_per_rack,
            instance.hardware.gpus_per_node,
        ],
        k_eval=instance.k_eval,
        step_time_s=step,
        score_step_s=result.score_step,
        makespan_s=result.makespan,
        bound_step_s=None if result.bound is None else result.bound / instance.k_eval,
        bound_makespan_s=result.bound,
        gap=result.gap,
        samples_per_s=None if not step else instance.workload.sequences / step,
        wall_time_s=time.perf_counter() - started,
        fingerprint=instance_fingerprint(instance),
    )
    if result.plan is not None and result.status.value in PLAN_STATUSES:
        record["plan"] = plan_to_json(result.plan, problem.directory)
    return record


@dataclass(frozen=True)
class RunSettings:
    """How variants run.

    Attributes
    ----------
    time_limit
        Seconds per variant.
    executor
        ``local`` (a process pool) or ``ray``.
    workers
        Local worker processes.
    seed
        Random seed of every solve.
    ray_address
        Address of an existing Ray cluster (None: start one locally).
    quiet
        No progress line.
    """

    time_limit: float
    executor: str = "local"
    workers: int = 1
    seed: int = 0
    ray_address: str | None = None
    quiet: bool = False

    def check(self) -> None:
        """Refuse a non-positive time limit or worker count.

        Raises
        ------
        InputError
            Naming the option.
        """
        if not self.time_limit > 0:
            raise InputError("--time-limit", f"must be positive, got {self.time_limit}")
        if self.workers < 1:
            raise InputError("--workers", f"must be a positive integer, got {self.workers}")
        if self.executor not in ("local", "ray"):
            raise InputError("--executor", f"must be local or ray, got {self.executor!r}")


def threads_per_variant(settings: RunSettings, count: int) -> int:
    """Solver threads per variant: the machine's cores shared by the parallel variants."""
    cores = os.cpu_count() or 1
    if settings.executor == "ray":
        return min(cores, 2)
    return max(1, cores // max(1, min(settings.workers, count)))


def run_variants(variants: list[Variant], settings: RunSettings, label: str) -> Iterator[dict]:
    """Solve variants in parallel on the ``compare`` executors; yields records as they finish.

    A progress line (done / total, elapsed, ETA) is shown on a terminal
    unless ``settings.quiet``.

    Parameters
    ----------
    variants
        What to solve.
    settings
        Time limit, executor, workers, seed.
    label
        Name on the progress line.
    """

    if not variants:
        return
    threads = threads_per_variant(settings, len(variants))
    seeds = {variant: settings.seed for variant in variants}
    if settings.executor == "ray":
        stream = run_ray(
            variants, settings.time_limit, threads, seeds, settings.ray_address, solve_variant
        )
    else:
        workers = min(settings.workers, len(variants))
        stream = run_local(variants, settings.time_limit, threads, seeds, workers, solve_variant)
    progress = progress_bar(label, len(variants), settings.quiet)
    try:
        for record in stream:
            if progress is not None:
                progress.advance(progress.task_ids[0])
            yield record
    finally:
        if progress is not None:
            progress.stop()
