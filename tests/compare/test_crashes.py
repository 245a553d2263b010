"""``compare`` after a crash: resume repairs a torn last row; pool workers die with the parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlplan.compare.store import ResultStore

REPO = Path(__file__).resolve().parents[2]


def record(instance: str, step: float) -> dict:
    return {
        "instance": instance,
        "solver": "greedy",
        "repeat": 0,
        "seed": 0,
        "status": "FEASIBLE",
        "step_time_s": step,
        "wall_time_s": 0.5,
    }


def test_resume_repairs_a_torn_last_row(tmp_path):
    """A row cut mid-number, then a resumed run's append, once made every later resume crash
    (``could not convert string to float: '5.6775tiny_dpo_2gpu'``)."""
    store = ResultStore(str(tmp_path))
    store.append(record("tiny_ppo_2gpu", 1.25))
    with open(store.csv_path, "a", encoding="utf-8") as handle:
        handle.write("tiny_grpo_2gpu,greedy,0,0,FEASIBLE,5.6775")  # the crash cut the row here
    with open(store.history_path, "a", encoding="utf-8") as handle:
        handle.write('{"instance": "tiny_grpo_2gpu", "sol')
    resumed = ResultStore(str(tmp_path))
    assert resumed.repaired == 1
    resumed.append(record("tiny_dpo_2gpu", 2.5))
    again = ResultStore(str(tmp_path))
    assert again.repaired == 0
    rows = again.records()
    assert [(r["instance"], r["step_time_s"]) for r in rows] == [
        ("tiny_ppo_2gpu", 1.25),
        ("tiny_dpo_2gpu", 2.5),
    ]
    assert again.finished() == {("tiny_ppo_2gpu", "greedy", 0), ("tiny_dpo_2gpu", "greedy", 0)}
    lines = Path(again.history_path).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(line.startswith("{") for line in lines)


def sleeping_cell(cell: str, time_limit: float, threads: int, seed: int) -> dict:
    """A cell that records its worker's pid in the file ``cell`` and then sleeps."""
    Path(cell).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(time_limit)
    return {}


PARENT = r"""
import sys
sys.path.insert(0, {repo!r})
from rlplan.compare.executors import run_local
from tests.compare.test_crashes import sleeping_cell
cells = {cells!r}
for _ in run_local(cells, 300.0, 1, {{cell: 0 for cell in cells}}, 2, task=sleeping_cell):
    pass
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_pool_workers_die_when_compare_is_killed(tmp_path):
    """After ``kill -9`` of compare its workers once lived on for 10+ minutes."""
    cells = [str(tmp_path / f"worker{index}.pid") for index in range(2)]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(repo=str(REPO), cells=cells)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not all(Path(cell).exists() and Path(cell).read_text() for cell in cells):
            assert time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.05)
        workers = [int(Path(cell).read_text(encoding="utf-8")) for cell in cells]
        assert all(alive(pid) for pid in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30  # they die at once (PDEATHSIG); 30 s is a hang guard
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers)
    finally:
        if parent.poll() is None:
            parent.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_sigterm_ends_compare_and_its_running_cell_at_once(tmp_path):
    """SIGTERM once left compare waiting for its running cells to end (up to the time limit)."""
    instance = REPO / "instances" / "ppo_8b_1x2x8_h100.yaml"
    argv = [sys.executable, str(REPO / "main.py"), "compare", str(instance), "--solvers", "local"]
    argv += ["--time-limit", "600", "--workers", "1", "--out", str(tmp_path / "bench"), "--quiet"]
    parent = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        # Wait until the worker is solving its cell: several CPU seconds used.
        while not workers or max(cpu_seconds(pid) for pid in workers) < 3.0:
            assert time.monotonic() < deadline and parent.poll() is None, "no cell started"
            children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
            workers = [int(pid) for pid in children.read_text().split()]
            time.sleep(0.1)
        parent.send_signal(signal.SIGTERM)
        _, stderr = parent.communicate(timeout=60)  # the cell alone would run for 600 s
        assert "Traceback" not in stderr and "rerun the same command to resume" in stderr
        deadline = time.monotonic() + 30  # a hang guard: they end at once
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in workers)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
