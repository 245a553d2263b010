"""Where cells run: a local process pool, or Ray tasks (locally or on a cluster)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from rlplan.compare.cells import run_cell
from rlplan.paths import SOURCE_ROOT
from rlplan.rpeg.errors import InputError

ROOT = str(SOURCE_ROOT)

#: A unit of work: ``task(cell, time_limit, threads, seed) -> record``; a
#: module-level function so that it pickles to a worker process or Ray task.
Task = Callable[[Hashable, float, int, int], dict]


#: Seconds between two checks of the worker's parent by the watchdog thread.
WATCHDOG_PERIOD_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Make this worker process end when ``parent_pid`` ends, however it ends.

    A pool's workers must not outlive ``compare`` (killed with ``kill -9``,
    its terminal closed): they would keep solving and hold the caller's pipe.
    On Linux the kernel sends the worker SIGKILL when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon thread checks every
    :data:`WATCHDOG_PERIOD_S` seconds that the parent is still the same
    process and exits otherwise.

    Parameters
    ----------
    parent_pid
        Process id of the process that made the pool.
    """
    import signal
    import sys
    import threading
    import time

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still ends the worker
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the request took effect

    def watchdog() -> None:
        while True:
            time.sleep(WATCHDOG_PERIOD_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watchdog, name="parent-watchdog", daemon=True).start()


def run_local(
    cells: Sequence[Hashable],
    time_limit: float,
    threads: int,
    seeds: dict,
    workers: int,
    task: Task = run_cell,
) -> Iterator[dict]:
    """Run cells in a pool of ``workers`` processes; yields records as cells finish.

    ``task`` solves one cell (default :func:`rlplan.compare.cells.run_cell`).
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
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
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM) or failed: end the running cells now
        # rather than wait for them at exit.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        raise
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

    ``task`` solves one cell (default :func:`rlplan.compare.cells.run_cell`).

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
