"""Shared test setup: the repository root on ``sys.path`` and an in-process CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture
def cli(capsys):
    """Run ``main.main(argv)`` in-process; returns (exit code, stdout, stderr)."""
    import main

    def run(*argv: object) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main.main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
