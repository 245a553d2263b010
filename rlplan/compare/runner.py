"""``main.py compare``: run a suite of (instance, solver, repeat) cells and summarise them."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from rlplan.compare.cells import Cell, instance_name
from rlplan.compare.executors import run_local, run_ray
from rlplan.compare.progressbar import progress_bar
from rlplan.compare.store import ResultStore
from rlplan.compare.summary import (
    fill_gaps,
    render_summary,
    write_gap_over_time,
    write_performance_profile,
)
from rlplan.outputs.files import write_text
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import load_instance
from rlplan.solvers import get_solver


@dataclass
class BenchmarkSettings:
    """What ``compare`` runs and where."""

    instances: list[str]
    solvers: list[str]
    time_limit: float
    repeats: int
    executor: str
    workers: int
    out: str
    seed: int = 0
    ray_address: str | None = None
    quiet: bool = False


def run_benchmark(settings: BenchmarkSettings) -> int:
    """Run every unfinished cell, append each result as it finishes, write the summary.

    Returns the exit code (0, or 130 when interrupted).
    """

    if settings.time_limit <= 0:
        raise InputError("--time-limit", f"must be positive, got {settings.time_limit}")
    if settings.repeats < 1:
        raise InputError("--repeats", f"must be a positive integer, got {settings.repeats}")
    if settings.workers < 1:
        raise InputError("--workers", f"must be a positive integer, got {settings.workers}")
    for solver in settings.solvers:
        get_solver(solver)  # unknown names and unavailable MIP solvers fail here, before any work
    texts = {}
    for path in settings.instances:
        load_instance(path)  # bad instances fail here, before any work
        with open(path, encoding="utf-8") as handle:
            texts[path] = handle.read()
    names = [instance_name(p) for p in settings.instances]
    if len(set(names)) != len(names):
        raise InputError("instances", "two instances share a file name; names identify results")
    if os.path.exists(settings.out) and not os.path.isdir(settings.out):
        raise InputError("--out", f"{settings.out} exists and is not a folder")
    store = ResultStore(settings.out)
    finished = store.finished()
    cells = [
        Cell(path, solver, repeat, texts[path])
        for path in settings.instances
        for solver in settings.solvers
        for repeat in range(settings.repeats)
        if (instance_name(path), solver, repeat) not in finished
    ]
    seeds = {cell: settings.seed + cell.repeat for cell in cells}
    cores = os.cpu_count() or 1
    if settings.executor == "ray":
        threads = min(cores, 2)
        stream = run_ray(cells, settings.time_limit, threads, seeds, settings.ray_address)
    else:
        workers = min(settings.workers, max(1, len(cells)))
        threads = max(1, cores // workers)
        stream = run_local(cells, settings.time_limit, threads, seeds, workers)
    skipped = len(finished)
    print(
        f"{len(cells)} cells to run ({skipped} already in {store.csv_path}), "
        f"{settings.time_limit:g} s each, {threads} solver thread(s) per cell"
    )
    progress = progress_bar("compare", len(cells), settings.quiet)
    interrupted = False
    try:
        for record in stream:
            store.append(record)
            step = record.get("step_time_s")
            shown = "—" if step is None else f"{step:.4f} s/step"
            print(
                f"  {record['instance']:<26} {record['solver']:<12} #{record['repeat']} "
                f"{record['status']:<10} "
                f"{shown} in {record.get('wall_time_s', 0):.1f} s",
                flush=True,
            )
            if progress is not None:
                progress.advance(progress.task_ids[0])
    except KeyboardInterrupt:
        interrupted = True
        print(
            "interrupted: finished cells are kept; rerun the same command to resume",
            file=sys.stderr,
        )
    finally:
        if progress is not None:
            progress.stop()
    write_reports(store, settings)
    return 130 if interrupted else 0


def write_reports(store: ResultStore, settings: BenchmarkSettings) -> None:
    """Fill in the gaps to the best bound and write summary.md and the two plots."""
    records = fill_gaps(store.records())
    if not records:
        return
    store.rewrite(records)
    write_text(
        os.path.join(settings.out, "summary.md"),
        render_summary(records, settings.solvers, settings.time_limit),
    )
    for name, writer in (
        (
            "performance_profile.png",
            lambda p: write_performance_profile(records, settings.solvers, p),
        ),
        (
            "gap_over_time.png",
            lambda p: write_gap_over_time(records, settings.solvers, settings.time_limit, p),
        ),
    ):
        target = os.path.join(settings.out, name)
        temporary = os.path.join(settings.out, f".tmp-{name}")
        writer(temporary)
        os.replace(temporary, target)
    print(
        f"wrote {store.csv_path}, summary.md, performance_profile.png, gap_over_time.png "
        f"in {settings.out}"
    )
