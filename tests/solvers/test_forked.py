"""A function in a forked child (rlplan.solvers.forked): its value, its error, its end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rlplan.solvers.forked import ForkedCall
from tests.test_signals import REPO, running

#: A parent that forks a sleeping child, names it, and leaves by ``os._exit``
#: (as a second signal makes a run leave): no clean-up of its own runs.
PARENT = r"""
import os, sys, time
sys.path.insert(0, {repo!r})
from rlplan.solvers.forked import ForkedCall
call = ForkedCall(lambda: (os.write(1, b"running\n"), time.sleep(3600)))
os.write(1, f"{{call.pid}}\n".encode())
sys.stdin.readline()
os._exit(0)
"""


def exit_three():
    os._exit(3)


def divide_by_zero():
    return 1 / 0


@pytest.mark.parametrize(
    ("function", "value", "error"),
    [
        (lambda: {"plan": [1, 2]}, {"plan": [1, 2]}, None),
        (divide_by_zero, None, "ZeroDivisionError: division by zero"),
        (exit_three, None, "the child process ended without a result (exit code 3)"),
        (lambda: lambda: 0, None, "the result could not be sent (AttributeError"),
    ],
)
def test_the_child_sends_its_value_or_why_not(function, value, error):
    call = ForkedCall(function)
    try:
        assert call.wait(60)
    finally:
        call.end()
    assert call.value == value
    assert (call.error is None) if error is None else call.error.startswith(error)


def test_end_terminates_a_running_child():
    call = ForkedCall(lambda: time.sleep(3600))
    assert not call.wait(0.0)
    call.end()
    assert not running(call.pid)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_child_dies_with_its_parent():
    """Break tried: no ``PR_SET_PDEATHSIG`` (the child sleeps on, an orphan)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(repo=str(REPO))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None and parent.stdin is not None
    # The child's pid, and "running" once the child is past its set-up, in either order.
    lines = sorted(parent.stdout.readline().strip() for _ in range(2))
    assert lines[1] == "running"
    child = int(lines[0])
    assert running(child)
    parent.stdin.write("\n")
    parent.stdin.flush()
    assert parent.wait(60) == 0
    deadline = time.monotonic() + 10  # the kernel's SIGKILL takes a moment
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = running(child)
    if alive:
        os.kill(child, 9)
    assert not alive
