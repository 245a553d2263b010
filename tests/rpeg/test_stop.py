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
