"""SIGINT and SIGTERM during a solve: stop, write the best plan so far, exit 0 (rpeg.stop).

Each test runs ``main.py solve`` in a child process through a small wrapper
that prints a marker line when the phase under test has started, then sends
the signal: no sleep decides when the signal arrives. The time limits are
600 s, so a run that ignored the signal would run into the 120 s timeout of
``communicate`` and fail.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PPO_16 = REPO / "instances" / "ppo_8b_1x2x8_h100.yaml"

#: Runs main.main with a marker on stderr when a phase starts:
#: "SEARCH cpsat" (CP-SAT searching), "SEARCH milp" (HiGHS running),
#: "SEARCH local" (the local search of the ``local`` backend).
WRAPPER = r"""
import contextlib, sys
sys.path.insert(0, {repo!r})
from rlplan.cli import app as main
from rlplan.rpeg import interrupts as stop
import rlplan.solvers.local as local

def say(phase):
    print(f"SEARCH {{phase}}", file=sys.stderr, flush=True)

original_on_stop = stop.on_stop
@contextlib.contextmanager
def on_stop(hook):
    with original_on_stop(hook):
        say("cpsat")
        yield
stop.on_stop = on_stop

original_solve_highs = stop.solve_highs
def solve_highs(highs):
    say("milp")
    return original_solve_highs(highs)
stop.solve_highs = solve_highs

original_improve = local.improve
def improve(*args, **kwargs):
    say("local")
    return original_improve(*args, **kwargs)
local.improve = improve

sys.exit(main.main(sys.argv[1:]))
"""


def start(solver: str, out: Path) -> subprocess.Popen:
    argv = [sys.executable, "-c", WRAPPER.format(repo=str(REPO)), "solve", str(PPO_16)]
    argv += ["--solver", solver, "--time-limit", "600", "--out", str(out), "--quiet"]
    argv += ["--evaluations", "2000"]  # a short warm-start search: the exact phase sooner
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


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
    wait_for(process, "SIGINT: stopping, writing the best plan so far (again to exit at once)")
    process.send_signal(signal.SIGINT)
    code, _, stderr = finish(process)
    assert code in (0, 128 + signal.SIGINT), stderr  # 0 if the outputs were already written
    assert "Traceback" not in stderr
    if out.exists():  # written before the second signal: complete
        assert {"result.json", "plan.json", "report.html"} <= {p.name for p in out.iterdir()}
