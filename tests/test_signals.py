"""SIGINT and SIGTERM during a solve: stop, write the best plan so far, exit 0 (rpeg.stop).

Each test runs ``main.py solve`` in a child process through a small wrapper
that prints a marker line when the phase under test has started, then sends
the signal: no sleep decides when the signal arrives. The time limits are
600 s, so a run that ignored the signal would run into the 120 s timeout of
``communicate`` and fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlplan.rpeg.interrupts import REPEAT_S

REPO = Path(__file__).resolve().parent.parent
PPO_16 = REPO / "instances" / "ppo_8b_1x2x8_h100.yaml"

STOPPING = "SIGINT: stopping, writing the best plan so far (again to exit at once)"

#: Runs main.main with a marker on stderr when a phase starts:
#: "SEARCH cpsat" (CP-SAT searching), "SEARCH milp" (HiGHS running),
#: "SEARCH local" (the local search of the ``local`` backend). With
#: SIGNAL_TEST_MODE=hold-writing the first staged output prints "WRITING" and waits
#: until a second signal has asked to exit; with SIGNAL_TEST_MODE=stuck-search the
#: local search never returns (a search slow to honour the stop request).
#: "CHILD pid" names the MILP child forked beside CP-SAT (the exact portfolio).
WRAPPER = r"""
import contextlib, os, sys, time
sys.path.insert(0, {repo!r})
from rlplan.cli import app as main
from rlplan.outputs.files import OutputBundle
from rlplan.rpeg import interrupts as stop
import rlplan.solvers.local as local

MODE = os.environ.get("SIGNAL_TEST_MODE", "")

def say(phase):
    print(f"SEARCH {{phase}}", file=sys.stderr, flush=True)

original_on_stop = stop.on_stop
@contextlib.contextmanager
def on_stop(hook, **kwargs):
    with original_on_stop(hook, **kwargs):
        say("cpsat")
        yield
stop.on_stop = on_stop

original_solve_highs = stop.solve_highs
def solve_highs(highs):
    say("milp")
    return original_solve_highs(highs)
stop.solve_highs = solve_highs

import rlplan.solvers.forked as forked
original_fork = forked.ForkedCall.__init__
def fork(self, function):
    original_fork(self, function)
    print(f"CHILD {{self.pid}}", file=sys.stderr, flush=True)
forked.ForkedCall.__init__ = fork

original_improve = local.improve
def improve(*args, **kwargs):
    say("local")
    while MODE == "stuck-search":
        time.sleep(0.05)
    return original_improve(*args, **kwargs)
local.improve = improve

original_write_json = OutputBundle.write_json
held = []
def write_json(self, name, document):
    if MODE == "hold-writing" and not held:
        held.append(name)
        print("WRITING", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 60
        while stop.exit_pending() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    return original_write_json(self, name, document)
OutputBundle.write_json = write_json

sys.exit(main.main(sys.argv[1:]))
"""


def start(solver: str, out: Path, mode: str = "") -> subprocess.Popen:
    argv = [sys.executable, "-c", WRAPPER.format(repo=str(REPO)), "solve", str(PPO_16)]
    argv += ["--solver", solver, "--time-limit", "600", "--out", str(out), "--quiet"]
    argv += ["--evaluations", "2000"]  # a short warm-start search: the exact phase sooner
    # auto runs the MILP beside CP-SAT on 16 GPUs too (by default from 32 on).
    env = {**os.environ, "SIGNAL_TEST_MODE": mode, "RLPLAN_PORTFOLIO_MIN_GPUS": "16"}
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_for(process: subprocess.Popen, marker: str) -> None:
    """Read the child's stderr until ``marker`` (fails if the child ends first)."""
    assert process.stderr is not None
    for line in process.stderr:
        if line.strip() == marker:
            return
    pytest.fail(f"the child ended before {marker!r}")


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    try:
        stdout, stderr = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("the solve did not stop after the signal")
    return process.returncode, stdout, stderr


@pytest.mark.parametrize(
    ("solver", "marker", "signum"),
    [
        ("cpsat", "SEARCH cpsat", signal.SIGINT),  # once ignored: the run went on 46 s
        ("milp", "SEARCH milp", signal.SIGINT),
        ("local", "SEARCH local", signal.SIGTERM),  # once lost all work
    ],
)
def test_a_signal_stops_the_search_and_writes_the_best_plan(tmp_path, solver, marker, signum):
    out = tmp_path / "run"
    process = start(solver, out)
    wait_for(process, marker)
    process.send_signal(signum)
    code, stdout, stderr = finish(process)
    assert code == 0, stderr
    assert "status" in stdout
    assert "Traceback" not in stderr
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    name = signal.Signals(signum).name
    assert result["message"].startswith(f"interrupted by {name}")
    assert result["stats"]["interrupted_by"] == name
    assert result["status"] in ("FEASIBLE", "OPTIMAL", "OPTIMAL_WITHIN_GAP")
    assert result["bound_makespan_s"] is not None
    for file in ("plan.json", "trace.json", "gantt.png", "report.md"):
        assert (out / file).exists()
    assert f"{name}: stopping" in stderr


def test_a_second_signal_exits_at_once_without_a_partial_folder(tmp_path):
    """Two SIGINTs once exited with -2 (killed by the signal)."""
    out = tmp_path / "run"
    process = start("cpsat", out)
    wait_for(process, "SEARCH cpsat")
    process.send_signal(signal.SIGINT)
    wait_for(process, STOPPING)
    process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    assert code in (0, 128 + signal.SIGINT), stderr  # 0 if the outputs were already written
    assert "Traceback" not in stderr
    if out.exists():  # written before the second signal: complete
        assert {"result.json", "plan.json", "report.html"} <= {p.name for p in out.iterdir()}


def complete_outputs(out: Path) -> dict:
    """The run folder's result document, after checking every output is there and whole."""
    names = {p.name for p in out.iterdir()}
    assert {"result.json", "plan.json", "trace.json", "report.md", "report.html"} <= names
    assert "gantt.png" in names
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["vertices"]
    return json.loads((out / "result.json").read_text(encoding="utf-8"))


def no_staging_left(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith((".staging-", ".replaced-"))]


def test_the_same_signal_again_at_once_is_one_request(tmp_path):
    """``timeout`` signals the process, then its group: once the second copy exited 130 with
    nothing written (2 runs in 6). A repeat within REPEAT_S of the first is the same request."""
    out = tmp_path / "run"
    process = start("cpsat", out)
    wait_for(process, "SEARCH cpsat")
    process.send_signal(signal.SIGINT)
    wait_for(process, STOPPING)
    process.send_signal(signal.SIGINT)
    code, stdout, stderr = finish(process)
    assert code == 0, stderr
    assert complete_outputs(out)["stats"]["interrupted_by"] == "SIGINT"
    assert "wrote " in stdout
    assert no_staging_left(tmp_path)


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_while_writing_exits_once_the_outputs_are_complete(tmp_path, second):
    out = tmp_path / "run"
    process = start("cpsat", out, mode="hold-writing")
    wait_for(process, "SEARCH cpsat")
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    wait_for(process, "WRITING")
    # Past the window in which the same signal again counts as the first delivered twice.
    time.sleep(max(0.0, sent + REPEAT_S + 0.2 - time.monotonic()))
    process.send_signal(second)
    code, stdout, stderr = finish(process)
    assert code == 128 + second, stderr
    assert "Traceback" not in stderr
    assert f"{signal.Signals(second).name}: exiting once the outputs" in stderr
    result = complete_outputs(out)
    assert result["message"].startswith("interrupted by SIGINT")
    assert "wrote " in stdout
    assert no_staging_left(tmp_path)


def test_a_second_signal_during_the_search_exits_at_once(tmp_path):
    """A search that does not stop on the first signal: the second ends the run, nothing
    written (the previous folder, here none, is left as it was)."""
    out = tmp_path / "run"
    process = start("local", out, mode="stuck-search")
    wait_for(process, "SEARCH local")
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    wait_for(process, STOPPING)
    time.sleep(max(0.0, sent + REPEAT_S + 0.2 - time.monotonic()))
    process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    assert code == 128 + signal.SIGINT, stderr
    assert not out.exists()
    assert no_staging_left(tmp_path)


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("signals", [1, 2])
def test_a_signal_during_the_portfolio_leaves_no_milp_child(tmp_path, signals):
    """auto forks the MILP beside CP-SAT: a signal ends the solve and the child with it,
    also when a second signal makes the run exit once its outputs are written."""
    out = tmp_path / "run"
    # Two signals: the first output is held until the second has asked to exit, so the
    # second lands while the run folder is being written (the solve itself ends within
    # a fraction of a second of the first, sooner than a repeat is told apart).
    process = start("auto", out, mode="hold-writing" if signals == 2 else "")
    assert process.stderr is not None
    children = []
    for line in process.stderr:
        if line.startswith("CHILD "):
            children.append(int(line.split()[1]))
        if line.strip() == "SEARCH cpsat" and children:
            break
    else:
        pytest.fail("the child ended before CP-SAT searched beside a MILP child")
    assert running(children[-1])
    process.send_signal(signal.SIGINT)
    if signals == 2:
        sent = time.monotonic()
        wait_for(process, "WRITING")
        time.sleep(max(0.0, sent + REPEAT_S + 0.2 - time.monotonic()))
        process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    assert code == (0 if signals == 1 else 128 + signal.SIGINT), stderr
    assert "Traceback" not in stderr
    deadline = time.monotonic() + 10  # the kernel's SIGKILL to an orphan takes a moment
    while any(running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in children)
