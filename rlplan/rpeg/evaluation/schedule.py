"""Serial schedule generation over a plan's runs (docs/simulator.md, "Serial schedule generation").

A run r of vertex v starts at the latest of its predecessors' ends plus
their lags and the time every GPU of v's block is free, and holds the block
until it ends. GPU g is free at the end of the last run placed on a block
holding g, which is the latest end of those runs (each starts after the
previous one on its GPUs ends); so the GPUs of v's block are free at the
latest end of the runs placed on the vertices of v's cover
(:attr:`Occupancy.cover <rlplan.rpeg.evaluation.occupancy.Occupancy.cover>`).
The schedulers keep that time per vertex: one look-up per ready run instead
of a maximum over the block's GPUs.

``lags`` holds the lag of every template edge followed by the chain edges'
0.0, which a chain edge (template edge -1) reads as ``lags[-1]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunGraph:
    """The runs of ``k_eval`` steps under one staleness (:func:`rlplan.rpeg.templates.unroll`).

    Attributes
    ----------
    preds
        Per run: (predecessor run, template edge; -1 for a chain edge).
    succs
        Per run: its successor runs.
    indegree
        Per run: its number of predecessors.
    vertex_of
        Per run: its vertex (run id ``step * vertices + vertex``).
    sources
        The runs without predecessors, by id.
    """

    preds: tuple[tuple[tuple[int, int], ...], ...]
    succs: tuple[tuple[int, ...], ...]
    indegree: tuple[int, ...]
    vertex_of: tuple[int, ...]
    sources: tuple[int, ...]


class NotTopological(Exception):
    """A run order that puts ``run`` before its predecessor ``pred`` (run ids)."""

    def __init__(self, run: int, pred: int) -> None:
        super().__init__(run, pred)
        self.run, self.pred = run, pred


def _release(cover, free: list[float], vertex: int, finish: float) -> None:
    """Record that a run of ``vertex`` holds its block's GPUs until ``finish``."""
    for other in cover[vertex]:
        if finish > free[other]:
            free[other] = finish


def list_schedule(
    graph: RunGraph,
    cover: Sequence[Sequence[int]],
    durations: Sequence[float],
    lags: Sequence[float],
) -> tuple[list[float], list[float], list[int]]:
    """Start, end and placing order of every run in list order.

    Among the ready runs (every predecessor placed) the one that can start
    earliest goes next, ties by run id. A run's ready time is fixed when its
    last predecessor is placed.
    """
    preds, succs, vertex_of = graph.preds, graph.succs, graph.vertex_of
    num_runs = len(preds)
    free = [0.0] * len(cover)
    start = [0.0] * num_runs
    end = [0.0] * num_runs
    remaining = list(graph.indegree)
    ready_time = [0.0] * num_runs
    ready = list(graph.sources)
    placed: list[int] = []
    while ready:
        best_run, best_start = -1, 0.0
        for run in ready:
            gpu_free = free[vertex_of[run]]
            begin = ready_time[run]
            if gpu_free > begin:
                begin = gpu_free
            if best_run < 0 or begin < best_start or (begin == best_start and run < best_run):
                best_run, best_start = run, begin
        ready.remove(best_run)
        vertex = vertex_of[best_run]
        finish = best_start + durations[vertex]
        start[best_run], end[best_run] = best_start, finish
        _release(cover, free, vertex, finish)
        placed.append(best_run)
        for succ in succs[best_run]:
            remaining[succ] -= 1
            if remaining[succ] == 0:
                arrival = 0.0
                for pred, edge in preds[succ]:
                    value = end[pred] + lags[edge]
                    if value > arrival:
                        arrival = value
                ready_time[succ] = arrival
                ready.append(succ)
    return start, end, placed


def ordered_schedule(
    graph: RunGraph,
    cover: Sequence[Sequence[int]],
    durations: Sequence[float],
    lags: Sequence[float],
    sequence: Sequence[int],
) -> tuple[list[float], list[float]]:
    """Start and end of every run, placed in ``sequence`` (run ids).

    Raises
    ------
    NotTopological
        If ``sequence`` puts a run before one of its predecessors.
    """
    preds, vertex_of = graph.preds, graph.vertex_of
    num_runs = len(preds)
    position = [0] * num_runs
    for index, run in enumerate(sequence):
        position[run] = index
    free = [0.0] * len(cover)
    start = [0.0] * num_runs
    end = [0.0] * num_runs
    for index, run in enumerate(sequence):
        ready = 0.0
        for pred, edge in preds[run]:
            if position[pred] > index:
                raise NotTopological(run, pred)
            arrival = end[pred] + lags[edge]
            if arrival > ready:
                ready = arrival
        vertex = vertex_of[run]
        gpu_free = free[vertex]
        begin = ready if ready > gpu_free else gpu_free
        finish = begin + durations[vertex]
        start[run], end[run] = begin, finish
        _release(cover, free, vertex, finish)
    return start, end
