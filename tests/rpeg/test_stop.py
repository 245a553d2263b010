"""An abandoned native solver's threads stop competing with the writing of the best plan."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from rlplan.rpeg import interrupts as stop


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities")
def test_abandoned_native_threads_get_the_lowest_priority(monkeypatch):
    # A stand-in for a solver's native thread: a thread the function must treat
    # as not Python's own (threading.enumerate() is made to list only the main thread).
    release = threading.Event()
    worker = threading.Thread(target=release.wait, daemon=True)
    worker.start()
    main = threading.main_thread()
    before = os.getpriority(os.PRIO_PROCESS, main.native_id)
    monkeypatch.setattr(threading, "enumerate", lambda: [main])
    # Only these two threads are looked at (the test process's other threads keep theirs).
    tids = [str(worker.native_id), str(main.native_id)]
    monkeypatch.setattr(os, "listdir", lambda path: tids)
    try:
        stop._yield_native_threads()
        assert os.getpriority(os.PRIO_PROCESS, worker.native_id) == 19
        assert os.getpriority(os.PRIO_PROCESS, main.native_id) == before
    finally:
        release.set()
        worker.join()


def test_a_stop_before_cp_sat_has_started_still_ends_its_search():
    """CP-SAT's ``stop_search`` is a no-op until ``solve`` has set the search up, so a
    request in that moment was lost and the solve ran to its time limit (a signal test
    once waited 300 s). With the hook retried, a solve entered with the stop already
    requested ends at once: the model below (a 70-item subset sum of 12-digit weights,
    no solution callback) keeps CP-SAT at UNKNOWN for its whole 20 s limit when nothing
    stops it."""
    import random

    from ortools.sat.python import cp_model

    rng = random.Random(1)
    model = cp_model.CpModel()
    weights = [rng.randrange(10**11, 10**12) for _ in range(70)]
    items = [model.new_bool_var(f"x{i}") for i in range(70)]
    model.add(sum(w * x for w, x in zip(weights, items, strict=True)) == sum(weights) // 2)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 20
    solver.parameters.num_workers = 1
    stop.reset()
    stop.request()
    try:
        with stop.on_stop(solver.stop_search, retry=0.05):
            solver.solve(model)
    finally:
        stop.reset()
    assert solver.wall_time < 10


def test_a_retried_hook_runs_again_until_its_block_ends():
    """``retry`` calls the hook every ``retry`` seconds from the request on, and no more
    once the block has ended."""
    calls = []
    stop.reset()
    try:
        with stop.on_stop(lambda: calls.append(1), retry=0.01):
            stop.request()
            deadline = threading.Event()
            for _ in range(500):
                if len(calls) >= 3:
                    break
                deadline.wait(0.01)
        assert len(calls) >= 3
        ended = len(calls)
        threading.Event().wait(0.1)
        assert len(calls) <= ended + 1  # at most one call already under way
    finally:
        stop.reset()
