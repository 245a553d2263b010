"""Stop requests: how SIGINT and SIGTERM end a solve early with its best plan.

One process-wide stop flag. :func:`handle_signals` installs the handlers of
``solve``: the first SIGINT or SIGTERM sets the flag, and every search polls
it (the local search's stopping criterion, the exact models' build
deadline) or is stopped through a hook (:func:`on_stop`: CP-SAT's
``StopSearch``, HiGHS's interrupt callback), so the solve returns within a
moment with the best plan so far, which is written out as usual.

A second signal exits (code 128 + signal number): at once while the search
runs, and only once the outputs are complete while they are written (the
block :func:`critical` guards), so an exit never loses the plan being
written and never leaves a file half written. The same signal again within
:data:`REPEAT_S` seconds of the first is that first signal delivered twice
and is ignored: ``timeout``, job schedulers and ``kill`` of a process group
send a signal to the process and then to its group, a moment apart.

The flag is also set from a watcher thread woken through
:func:`signal.set_wakeup_fd`: Python runs signal handlers only in the main
thread between bytecodes, and the main thread may sit in a native solver
call for the whole time limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

_requested = threading.Event()
_lock = threading.Lock()
_hooks: list[Callable[[], None]] = []
_signals_seen: list[int] = []
_first_seen_at = 0.0
_critical = 0
_exit_pending: int | None = None

#: Seconds within which the first signal again is the same request delivered twice.
REPEAT_S = 0.5

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
    global _exit_pending, _first_seen_at
    with _lock:
        _requested.clear()
        _signals_seen.clear()
        _abandoned.clear()
        _exit_pending = None
        _first_seen_at = 0.0


@contextlib.contextmanager
def on_stop(hook: Callable[[], None], retry: float | None = None) -> Iterator[None]:
    """Call ``hook`` (from any thread) if a stop is requested while the block runs.

    Parameters
    ----------
    hook
        A thread-safe way to end a native search early, e.g. CP-SAT's
        ``solver.StopSearch``. Called at once if a stop is already requested.
    retry
        Seconds between further calls of ``hook`` once a stop is requested,
        until the block ends; ``None``: one call. For a solver whose stop call
        is lost when it comes before its search has started (CP-SAT's
        ``StopSearch`` is a no-op until ``Solve`` has set its search up), so
        a request arriving in that moment would leave the search running to
        its time limit.
    """
    with _lock:
        _hooks.append(hook)
        already = _requested.is_set()
    if already:
        with contextlib.suppress(Exception):
            hook()
    done = threading.Event()
    if retry is not None:
        threading.Thread(target=_repeat_hook, args=(hook, retry, done), daemon=True).start()
    try:
        yield
    finally:
        done.set()
        with _lock:
            _hooks.remove(hook)


@contextlib.contextmanager
def when_set(
    event: threading.Event | None, hook: Callable[[], None], retry: float
) -> Iterator[None]:
    """Call ``hook`` every ``retry`` seconds once ``event`` is set, until the block ends.

    A local stop, unlike :func:`request`: one search is asked to end (e.g.
    CP-SAT once the MILP beside it has proven the optimum) and the rest of the
    solve goes on. ``event`` None: the block runs as is.
    """
    if event is None:
        yield
        return
    done = threading.Event()
    threading.Thread(
        target=_repeat_hook, args=(hook, retry, done, event), name="local-stop", daemon=True
    ).start()
    try:
        yield
    finally:
        done.set()


def _repeat_hook(
    hook: Callable[[], None],
    retry: float,
    done: threading.Event,
    event: threading.Event = _requested,
) -> None:
    """Call ``hook`` every ``retry`` seconds from the moment ``event`` (default: a stop
    request) is set until ``done``."""
    while not done.is_set():
        if event.wait(retry) and not done.is_set():
            with contextlib.suppress(Exception):
                hook()
            done.wait(retry)


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


def exit_pending() -> int | None:
    """The exit code a second signal asked for while outputs were written, or None."""
    return _exit_pending


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """Defer the exit of a second signal until the block ends (outputs are being written).

    When the outermost block ends and a second signal came during it, the
    process exits with that signal's code (after flushing stdout and stderr),
    whether the block ended normally or not.
    """
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
            _exit_now(pending)


def _exit_now(code: int) -> None:
    """Leave the process at once with ``code``, what was printed flushed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


#: What :func:`_on_signal` did with a signal.
FIRST, REPEAT, DEFERRED = "first", "repeat", "deferred"


def _on_signal(signum: int) -> str:
    """First signal: request a stop; second: exit now, or after the critical block.

    Returns
    -------
    str
        :data:`FIRST` (a stop was requested), :data:`REPEAT` (the first
        signal delivered twice, ignored) or :data:`DEFERRED` (the exit waits
        for the outputs); a second signal outside a critical block does not
        return.
    """
    global _exit_pending, _first_seen_at
    now = time.monotonic()
    with _lock:
        first = not _signals_seen
        if first:
            _first_seen_at = now
        elif signum == _signals_seen[0] and now - _first_seen_at <= REPEAT_S:
            return REPEAT
        _signals_seen.append(signum)
        if not first:
            _exit_pending = 128 + signum
            if _critical:
                return DEFERRED
    if not first:
        _exit_now(128 + signum)
    request()
    return FIRST


@contextlib.contextmanager
def handle_signals(
    on_first: Callable[[int], None] | None = None,
    on_deferred: Callable[[int], None] | None = None,
) -> Iterator[None]:
    """Turn SIGINT and SIGTERM into stop requests while the block runs.

    Parameters
    ----------
    on_first
        Called with the signal number on the first signal (e.g. to print a
        line saying the run is stopping).
    on_deferred
        Called with the signal number on a second signal whose exit waits
        for a :func:`critical` block (e.g. to say the outputs are finished first).

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
                    action = _on_signal(signum)
                    callback = {FIRST: on_first, DEFERRED: on_deferred}.get(action)
                    if callback is not None:
                        with contextlib.suppress(Exception):
                            callback(signum)

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
