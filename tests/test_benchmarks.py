"""The developer benchmarks point at files that exist: a move of a module must move them too."""

from __future__ import annotations

from pathlib import Path

from benchmarks.mutation import DEFAULT_TESTS, MUTATED, NAMED_MUTANTS

ROOT = Path(__file__).resolve().parent.parent


def test_mutation_benchmark_targets_exist():
    """Each scored module and test path exists, and each named mutant's text is in its file
    (otherwise ``named`` reports it "not applicable" and guards nothing)."""
    for path in (*MUTATED, *DEFAULT_TESTS):
        assert (ROOT / path).exists(), path
    for name, path, original, _ in NAMED_MUTANTS:
        assert original in (ROOT / path).read_text(encoding="utf-8"), name
