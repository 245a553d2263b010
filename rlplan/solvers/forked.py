"""A function run in a forked child process, only its return value sent back.

The exact portfolio (:mod:`rlplan.solvers.portfolio`) solves the MILP this
way beside CP-SAT: a child forked from the solving process inherits the
problem as built (its directory, simulator and warm start), so nothing but
the child's result crosses the pipe, pickled. The child:

* leaves the parent's stop handling alone: SIGINT is ignored (a Ctrl-C
  reaches the whole process group; the parent decides and ends the child),
  SIGTERM kills it at once, and the parent's signal wake-up pipe is
  detached, so a signal to the child is never read as one to the parent;
* dies with its parent (Linux ``PR_SET_PDEATHSIG``), so even a parent that
  leaves through ``os._exit`` (:mod:`rlplan.rpeg.interrupts`, a second
  signal) leaves no child behind;
* sends ``("value", result)`` or, when the function raises, ``("error",
  "Type: message")``; a child that dies without a word reads as an error
  naming its exit code.

:meth:`ForkedCall.end` terminates (then kills) the child if it still runs
and reaps it. See docs/solvers.md#the-exact-portfolio.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
from collections.abc import Callable
from typing import Any

#: Seconds a terminated child gets to exit before it is killed.
KILL_AFTER_S = 1.0

#: Linux prctl option: the signal a child gets when its parent dies.
_PR_SET_PDEATHSIG = 1


class ForkedCall:
    """``function()`` running in a forked child; its value arrives through :meth:`wait`.

    Parameters
    ----------
    function
        Called without arguments in the child; its return value must pickle.

    Attributes
    ----------
    value
        The child's return value once it arrived, else None.
    error
        Why no value came (the child raised, or died), else None.
    """

    def __init__(self, function: Callable[[], Any]) -> None:
        context = multiprocessing.get_context("fork")
        self._reader, writer = context.Pipe(duplex=False)
        parent = os.getpid()
        self._process = context.Process(
            target=_child_main, args=(function, writer, parent), daemon=True
        )
        self._process.start()
        writer.close()
        self.value: Any = None
        self.error: str | None = None
        self._answered = False

    @property
    def pid(self) -> int | None:
        """The child's process id."""
        return self._process.pid

    @property
    def answered(self) -> bool:
        """Whether the child's value or error has arrived."""
        return self._answered

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child's answer; whether it has come."""
        if self._answered:
            return True
        try:
            if not self._reader.poll(max(0.0, timeout)):
                return False
            kind, payload = self._reader.recv()
        except (EOFError, OSError):
            self._process.join(KILL_AFTER_S)
            code = self._process.exitcode
            self.error = f"the child process ended without a result (exit code {code})"
        else:
            if kind == "value":
                self.value = payload
            else:
                self.error = payload
        self._answered = True
        return True

    def end(self) -> None:
        """Terminate the child if it still runs (kill it if it lingers), and reap it."""
        process = self._process
        if process.is_alive():
            process.terminate()
            process.join(KILL_AFTER_S)
        if process.is_alive():
            process.kill()
        process.join()
        self._reader.close()


def _child_main(function: Callable[[], Any], writer, parent: int) -> None:
    """The child: detach from the parent's signals, run ``function``, send what it gave."""
    _detach_from_parent(parent)
    try:
        message = ("value", function())
    except BaseException as exc:  # the parent needs to know, whatever it was
        message = ("error", f"{type(exc).__name__}: {exc}")
    try:
        writer.send(message)
    except Exception as exc:  # e.g. a value that does not pickle
        writer.send(("error", f"the result could not be sent ({type(exc).__name__}: {exc})"))
    writer.close()


def _detach_from_parent(parent: int) -> None:
    """Ignore SIGINT, die on SIGTERM and with the parent, write to no wake-up pipe."""
    with contextlib.suppress(ValueError):  # only possible in the main thread
        signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
