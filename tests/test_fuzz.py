"""Mutation fuzzing of the shipped instances (compare.fuzz): ``check`` keeps its contract.

Hypothesis draws a few hundred mutants (derandomised: the same cases on
every run) and runs ``main.py check`` in-process on each: the exit code is
0, 1 or 2, nothing raises (no traceback), exit 2 prints one line, no inf or
nan is printed and numpy warns of no overflow. The time per case is
measured as the process's CPU time, which the load of other processes does
not inflate, and must stay within 5 s. ``python -m benchmarks.fuzz`` runs the
larger campaign in fresh processes.
"""

from __future__ import annotations

import contextlib
import io
import random
import tempfile
import time
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz import make_case
from rlplan.cli import app as main

#: CPU seconds a case may take (``check`` answers in well under 2 s of wall time).
CASE_CPU_LIMIT_S = 5.0


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rng=st.randoms(use_true_random=False))
def test_check_keeps_its_contract_on_mutated_instances(rng: random.Random):
    source, text, applied = make_case(rng)
    stdout, stderr = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / source.name
        path.write_text(text, encoding="utf-8")
        started = time.process_time()
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            warnings.simplefilter("error", RuntimeWarning)  # numpy overflow, invalid values
            code = main.main(["check", str(path)])
        seconds = time.process_time() - started
    out, err = stdout.getvalue(), stderr.getvalue()
    context = f"{source.name} {applied}: {err[-300:]}"
    assert code in (0, 1, 2), context
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and len(err.strip()) <= 300, context
    words = out.replace("(", " ").replace(")", " ").split()
    assert "inf" not in words and "nan" not in words, context
    assert seconds <= CASE_CPU_LIMIT_S, f"{seconds:.1f} s of CPU: {context}"
