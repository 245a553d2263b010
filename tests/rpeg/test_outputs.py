"""Outputs get the mode any file the user writes gets (0644 under the usual umask 022)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlplan.outputs.files import write_json, write_text

TINY_PPO = Path(__file__).resolve().parents[2] / "instances" / "tiny_ppo_2gpu.yaml"


@pytest.fixture
def umask() -> Iterator[None]:
    """Run the test under umask 022, the usual one, and restore the process's afterwards."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_writes_get_0644(tmp_path, umask):
    write_text(str(tmp_path / "a.md"), "text\n")
    write_json(str(tmp_path / "b.json"), {"x": 1})
    assert mode(tmp_path / "a.md") == 0o644
    assert mode(tmp_path / "b.json") == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.md", "b.json"]


def test_atomic_writes_follow_a_stricter_umask(tmp_path):
    previous = os.umask(0o077)
    try:
        write_text(str(tmp_path / "private.md"), "text\n")
    finally:
        os.umask(previous)
    assert mode(tmp_path / "private.md") == 0o600


def test_compare_and_solve_outputs_are_0644(cli, tmp_path, umask):
    """summary.md (written atomically) and every other output of compare and solve."""
    bench, run = tmp_path / "bench", tmp_path / "run"
    argv = ("compare", TINY_PPO, "--solvers", "greedy", "--workers", "1", "--quiet")
    assert cli(*argv, "--time-limit", "10", "--out", bench)[0] == 0
    assert cli("solve", TINY_PPO, "--solver", "greedy", "--out", run, "--quiet")[0] == 0
    files = [*bench.iterdir(), *run.iterdir()]
    assert bench / "summary.md" in files and run / "report.md" in files
    assert {path.name: mode(path) for path in files} == {path.name: 0o644 for path in files}
