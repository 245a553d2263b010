"""Shared test setup: the repository root on ``sys.path`` and an in-process CLI runner."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Hypothesis runs derandomised (the same examples on every run, no example database,
# no deadline) unless HYPOTHESIS_PROFILE names another profile, e.g. "explore" to
# search with fresh random examples locally.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def cli(capsys):
    """Run ``main.main(argv)`` in-process; returns (exit code, stdout, stderr)."""
    from rlplan.cli import app as main

    def run(*argv: object) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main.main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
