"""Where cells run: a local process pool, or Ray tasks (locally or on a cluster)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from compare.cells import run_cell
from rpeg.errors import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: A unit of work: ``task(cell, time_limit, threads, seed) -> record``; a
#: module-level function so that it pickles to a worker process or Ray task.
Task = Callable[[Hashable, float, int, int], dict]


def run_local(
    cells: Sequence[Hashable],
    time_limit: float,
    threads: int,
    seeds: dict,
    workers: int,
    task: Task = run_cell,
) -> Iterator[dict]:
    """Run cells in a pool of ``workers`` processes; yields records as cells finish.

    ``task`` solves one cell (default :func:`compare.cells.run_cell`).
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    pending = set()
    try:
        queue = list(cells)
        while queue and len(pending) < workers:
            cell = queue.pop(0)
            pending.add(pool.submit(task, cell, time_limit, threads, seeds[cell]))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                if queue:
                    cell = queue.pop(0)
                    pending.add(pool.submit(task, cell, time_limit, threads, seeds[cell]))
                yield future.result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=False, cancel_futures=True)


def run_ray(
    cells: Sequence[Hashable],
    time_limit: float,
    threads: int,
    seeds: dict,
    address: str | None,
    task: Task = run_cell,
) -> Iterator[dict]:
    """Submit every cell as a Ray task (``num_cpus = threads``); yields records as they finish.

    ``task`` solves one cell (default :func:`compare.cells.run_cell`).

    Without ``address`` a local Ray instance is started; with one, the
    driver joins that cluster and ships this project's code to it.
    """
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor", "ray is not installed; install the extra with: pip install -e '.[ray]'"
        ) from None
    if address:
        runtime_env = {"working_dir": ROOT, "excludes": [".git", "runs", "*.png", "__pycache__"]}
    else:
        runtime_env = {"env_vars": {"PYTHONPATH": ROOT}}
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            runtime_env=runtime_env,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    remote = ray.remote(task)
    references = {
        remote.options(num_cpus=threads).remote(cell, time_limit, threads, seeds[cell]): cell
        for cell in cells
    }
    try:
        while references:
            done, _ = ray.wait(list(references), num_returns=1)
            for reference in done:
                references.pop(reference)
                yield ray.get(reference)
    finally:
        for reference in references:
            ray.cancel(reference, force=True)
        if started_here:
            ray.shutdown()
