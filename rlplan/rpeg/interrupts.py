"""Stop requests: how SIGINT and SIGTERM end a solve early with its best plan.

One process-wide stop flag. :func:`handle_signals` installs the handlers of
``solve``: the first SIGINT or SIGTERM sets the flag, and every search polls
it (the local search's stopping criterion, the exact models' build
deadline) or is stopped through a hook (:func:`on_stop`: CP-SAT's
``StopSearch``, HiGHS's interrupt callback), so the solve returns within a
moment with the best plan so far, which is written out as usual. A second
signal exits at once (code 128 + signal number); outputs are swapped in
whole, so the files already written are complete and none is half written.

The flag is also set from a watcher thread woken through
:func:`signal.set_wakeup_fd`: Python runs signal handlers only in the main
thread between bytecodes, and the main thread may sit in a native solver
call for the whole time limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

_requested = threading.Event()
_lock = threading.Lock()
_hooks: list[Callable[[], None]] = []
_signals_seen: list[int] = []
_critical = 0
_exit_pending: int | None = None

#: The signals :func:`handle_signals` turns into stop requests.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def requested() -> bool:
    """Whether a stop was requested (a search should return its best plan now)."""
    return _requested.is_set()


def reason() -> str:
    """The signal that asked to stop (``"SIGINT"``), or ``""``."""
    return signal.Signals(_signals_seen[0]).name if _signals_seen else ""


def request() -> None:
    """Ask every search to stop and run the registered hooks (each at most once)."""
    with _lock:
        if _requested.is_set():
            return
        _requested.set()
        hooks = list(_hooks)
    for hook in hooks:
        with contextlib.suppress(Exception):
            hook()


def reset() -> None:
    """Clear the flag and the signals seen (between solves of one process, in tests)."""
    global _exit_pending
    with _lock:
        _requested.clear()
        _signals_seen.clear()
        _abandoned.clear()
        _exit_pending = None


@contextlib.contextmanager
def on_stop(hook: Callable[[], None]) -> Iterator[None]:
    """Call ``hook`` (from any thread) if a stop is requested while the block runs.

    Parameters
    ----------
    hook
        A thread-safe way to end a native search early, e.g. CP-SAT's
        ``solver.StopSearch``. Called at once if a stop is already requested.
    """
    with _lock:
        _hooks.append(hook)
        already = _requested.is_set()
    if already:
        with contextlib.suppress(Exception):
            hook()
    try:
        yield
    finally:
        with _lock:
            _hooks.remove(hook)


def attach_highs(highs) -> None:
    """Make a ``highspy.Highs`` stop at its next interrupt check once a stop is requested."""

    def interrupt(event) -> None:
        if _requested.is_set():
            event.interrupt()

    for callback in (highs.cbMipInterrupt, highs.cbSimplexInterrupt, highs.cbIpmInterrupt):
        callback.subscribe(interrupt)


#: Seconds a native solver may take to honour a stop request before it is abandoned.
GRACE_S = 0.5

_abandoned = threading.Event()


def abandoned() -> bool:
    """Whether a native solver was left running in a daemon thread after a stop request."""
    return _abandoned.is_set()


def solve_highs(highs) -> bool:
    """Run ``highs.solve()`` in HiGHS's own thread until it ends or a stop is requested.

    HiGHS checks its interrupt callbacks (:func:`attach_highs`) during the
    search but not during presolve, which can take many seconds on a large
    model: if it has not ended :data:`GRACE_S` seconds after a stop request,
    it is abandoned (it runs on in a daemon thread, its results unread).

    Returns
    -------
    bool
        True when HiGHS ended (its results can be read), False when it was abandoned.
    """
    highs.startSolve()
    asked = None
    while True:
        done, _ = highs.wait(0.1)
        if done:
            return True
        if _requested.is_set():
            asked = asked or time.perf_counter()
            if time.perf_counter() - asked > GRACE_S:
                _abandoned.set()
                _yield_native_threads()
                return False


def _yield_native_threads() -> None:
    """Give an abandoned solver's threads the lowest CPU priority (Linux; else nothing).

    They run on until the process exits; at nice 19 they no longer slow the
    writing of the best plan, which is all the process does from then on.
    Python's own threads (the signal watcher among them) keep their priority.
    """
    tasks = "/proc/self/task"
    if not hasattr(os, "setpriority") or not os.path.isdir(tasks):
        return
    own = {thread.native_id for thread in threading.enumerate()}
    for name in os.listdir(tasks):
        if name.isdigit() and int(name) not in own:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, int(name), 19)


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """Defer the exit of a second signal until the block ends (moving outputs into place)."""
    global _critical
    with _lock:
        _critical += 1
    try:
        yield
    finally:
        with _lock:
            _critical -= 1
            pending = _exit_pending if _critical == 0 else None
        if pending is not None:
            os._exit(pending)


def _on_signal(signum: int) -> None:
    """First signal: request a stop; second: exit now (after any critical block)."""
    global _exit_pending
    with _lock:
        _signals_seen.append(signum)
        second = len(_signals_seen) > 1
        if second:
            _exit_pending = 128 + _signals_seen[-1]
            if _critical:
                return
    if second:
        os._exit(128 + signum)
    request()


@contextlib.contextmanager
def handle_signals(on_first: Callable[[int], None] | None = None) -> Iterator[None]:
    """Turn SIGINT and SIGTERM into stop requests while the block runs.

    Parameters
    ----------
    on_first
        Called with the signal number on the first signal (e.g. to print a
        line saying the run is stopping).

    Notes
    -----
    Only the main thread may install signal handlers; elsewhere (a worker
    thread of a test runner) the block runs with the handlers unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    previous_handlers = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    done = threading.Event()

    def handler(signum, frame) -> None:
        # Runs in the main thread when it next executes Python; the watcher
        # below has usually acted on this signal already.
        pass

    def watch() -> None:
        while not done.is_set():
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            for signum in data:
                if signum in STOP_SIGNALS and not done.is_set():
                    first = not _signals_seen
                    _on_signal(signum)
                    if first and on_first is not None:
                        with contextlib.suppress(Exception):
                            on_first(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    watcher = threading.Thread(target=watch, name="stop-signal-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(previous_fd)
        for sig, previous in previous_handlers.items():
            signal.signal(sig, previous)
        os.close(write_end)  # the watcher's read returns end-of-file
        watcher.join(timeout=1.0)
        os.close(read_end)
