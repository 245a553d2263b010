"""Busy windows: the runs between two runs hold their GPUs in the time between them.

A valid inequality both exact backends write (family ``busy_windows``,
docs/formulation.md#busy-windows); like ``gpu_area`` it is implied by GPU
exclusivity and the precedences, and it counts the idle time before a
window's first run and after its last, which the area row does not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rlplan.formulation.model import Formulation
from rlplan.formulation.rows import chain_rows, pub_run_pairs


@dataclass(frozen=True)
class WindowRow:
    """A busy window: the runs between two runs hold their GPUs inside it.

    Every run of the window descends from ``after`` and precedes ``before``
    through precedences that hold in every plan (chain, data and synchronous
    pub edges), so it runs between the end of ``after`` (the schedule's start
    when None) and the start of ``before`` (the makespan when None), on GPUs
    no other run holds meanwhile:
    ``gpus x (start[before] - end[after]) >= Σ coefficient x choose``.
    """

    after: int | None
    before: int | None
    gpus: int
    #: ``(vertex, index, GPU x time units)`` of the window's runs, per assignment.
    terms: tuple[tuple[int, int, int], ...]


#: At most this many terms over all busy-window rows, taken in order: the windows
#: from the start, to the makespan, then between two runs, each while it fits
#: (docs/formulation.md#busy-windows).
WINDOW_TERM_BUDGET = 40_000


def window_rows(f: Formulation) -> list[WindowRow]:
    """The busy windows of the unrolled steps (none under the steady-state objective).

    One row per window ``(after, before)`` holding at least one run, except
    the whole schedule (``gpu_area``): windows from the start to each run,
    from each run to the makespan, and between two runs, within
    :data:`WINDOW_TERM_BUDGET` terms (``RLPLAN_WINDOW_TERMS`` sets another
    budget). ``RLPLAN_NO_WINDOWS=1`` leaves them out of both backends (for
    A/B benchmarks).
    """
    if f.steady or os.environ.get("RLPLAN_NO_WINDOWS") == "1":
        return []
    successors = _fixed_successors(f)
    below = [_reachable(successors, run) for run in range(f.num_runs)]
    above = [{r for r in range(f.num_runs) if run in below[r]} for run in range(f.num_runs)]
    everything = set(range(f.num_runs))
    heads = [(None, r, above[r]) for r in range(f.num_runs)]
    tails = [(r, None, below[r]) for r in range(f.num_runs)]
    middles = [(a, b, below[a] & above[b]) for a in range(f.num_runs) for b in below[a] if a != b]
    gpus = f.problem.directory.cluster.num_gpus
    budget = int(os.environ.get("RLPLAN_WINDOW_TERMS", WINDOW_TERM_BUDGET))
    chosen: list[WindowRow] = []
    for after, before, runs in (*heads, *tails, *middles):
        if not runs or runs == everything:
            continue
        size = sum(len(f.assignments[v]) for v in {run % f.num_vertices for run in runs})
        if size <= budget:
            budget -= size
            chosen.append(_window(f, after, before, runs, gpus))
    return chosen


def _window(
    f: Formulation, after: int | None, before: int | None, runs: set[int], gpus: int
) -> WindowRow:
    """The row of the window ``(after, before)`` holding ``runs``."""
    count: dict[int, int] = {}
    for run in runs:
        vertex = run % f.num_vertices
        count[vertex] = count.get(vertex, 0) + 1
    terms = tuple(
        (vertex, index, times * a.block.size * a.duration)
        for vertex, times in sorted(count.items())
        for index, a in enumerate(f.assignments[vertex])
    )
    return WindowRow(after, before, gpus, terms)


def _fixed_successors(f: Formulation) -> list[set[int]]:
    """Each run's successors by the precedences every plan keeps (chain, data, synchronous pub)."""
    successors: list[set[int]] = [set() for _ in range(f.num_runs)]
    for row in chain_rows(f):
        successors[row.before].add(row.after)
    for step in range(f.k_eval):
        for src, dst in f.data_edges:
            successors[f.run(src, step)].add(f.run(dst, step))
    for _, _, _, chosen, before, after, periods in pub_run_pairs(f):
        if not chosen and not periods:
            successors[before].add(after)
    return successors


def _reachable(successors: list[set[int]], run: int) -> set[int]:
    """The runs reachable from ``run`` (itself excluded)."""
    seen: set[int] = set()
    stack = list(successors[run])
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(successors[current])
    return seen
