"""Shared fixtures: problems of the shipped instances, built once per session."""

from __future__ import annotations

import functools
import glob
import os

import pytest

from rlplan.rpeg.evaluation.problem import Problem

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = sorted(
    os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "instances", "tiny_*.yaml"))
)


@functools.cache
def load_problem(name: str) -> Problem:
    """The problem of ``instances/<name>`` (cached across tests)."""
    return Problem.load(os.path.join(ROOT, "instances", name))


@pytest.fixture(params=TINY)
def tiny_problem(request) -> Problem:
    """Each tiny instance in turn."""
    return load_problem(request.param)
