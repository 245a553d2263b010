"""The steady-state period of a plan (docs/simulator.md, "The steady-state period").

A plan repeated without end runs every vertex once per period T: run (v, t)
starts at ``a_v + t*T``. Its *cyclic order* lists every vertex once with a
step shift: window w of the unrolled sequence places, in list order, the run
(v, w - shift_v) of every entry. Fed that sequence, the simulator's serial
schedule is a max-plus linear recursion, and its long-run mean step is the
largest cycle ratio of the plan's *event graph*: nodes are the vertices, and
an edge u -> v of weight W (seconds) and height h (periods) stands for
``a_v + h*T >= a_u + W``:

* a data edge: W = duration(u) + lag, h = 0;
* a pub edge into a user at staleness σ: W = duration(source) + lag, h = 1 + σ;
* a vertex's chain: W = duration(v), h = 1;
* two vertices whose blocks share a GPU, u listed before v: (u, t) ends
  before (v, t + q) starts, which ends before (u, t + 1) starts, with
  q = shift_u - shift_v; so u -> v (duration(u), q) and v -> u
  (duration(v), 1 - q).

The period is the largest W(C) / h(C) over the cycles C of that graph
(every cycle has h(C) >= 1 when the cyclic order is topological).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Relative slack of a positive-cycle test: float noise is not a cycle.
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class CycleEdge:
    """``a_dst + height*T >= a_src + weight``: an edge of the event graph."""

    src: int
    dst: int
    weight: float
    height: int


def _positive_cycle(
    nodes: int, edges: Sequence[CycleEdge], period: float, slack: float
) -> list[CycleEdge] | None:
    """A cycle whose weight exceeds ``period`` times its height (by more than ``slack``), or None.

    Bellman-Ford longest paths from a virtual source joined to every node:
    a relaxation still possible after ``nodes`` rounds lies on or behind a
    positive cycle, found by walking the predecessor edges back.
    """
    distance = [0.0] * nodes
    parent: list[CycleEdge | None] = [None] * nodes
    changed = -1
    for _ in range(nodes + 1):
        changed = -1
        for edge in edges:
            value = distance[edge.src] + edge.weight - period * edge.height
            if value > distance[edge.dst] + slack:
                distance[edge.dst] = value
                parent[edge.dst] = edge
                changed = edge.dst
        if changed < 0:
            return None
    node = changed
    for _ in range(nodes):
        node = parent[node].src
    cycle = []
    current = node
    while True:
        edge = parent[current]
        cycle.append(edge)
        current = edge.src
        if current == node:
            return cycle[::-1]


def max_cycle_ratio(nodes: int, edges: Sequence[CycleEdge]) -> float:
    """The largest weight / height over the cycles of the graph (0 without cycles).

    Raises
    ------
    ValueError
        If a cycle of positive weight has height <= 0 (no period fits it).

    Notes
    -----
    Dinkelbach's iteration: start from the largest ratio of a self-loop and,
    while some cycle is heavier than the current ratio times its height,
    take that cycle's ratio (strictly larger each time, and there are
    finitely many simple cycles).
    """
    period = max(
        (e.weight / e.height for e in edges if e.src == e.dst and e.height > 0), default=0.0
    )
    scale = max((abs(e.weight) for e in edges), default=1.0)
    while True:
        cycle = _positive_cycle(nodes, edges, period, _EPS * max(1.0, scale))
        if cycle is None:
            return period
        weight = sum(e.weight for e in cycle)
        height = sum(e.height for e in cycle)
        if height <= 0:
            raise ValueError("a cycle of positive weight and no period: the order deadlocks")
        ratio = weight / height
        if ratio <= period:
            return period
        period = ratio


def periodic_starts(vertices: int, edges: Sequence[CycleEdge], period: float) -> list[float]:
    """Offsets a_v of the earliest periodic schedule at ``period`` (the first at 0 or later).

    Longest paths at weights W - h*T from a source joined to every vertex:
    with ``period`` at least the largest cycle ratio no cycle is positive,
    so ``vertices`` rounds settle them.
    """
    start = [0.0] * vertices
    slack = _EPS * max(1.0, period)
    for _ in range(vertices):
        changed = False
        for edge in edges:
            value = start[edge.src] + edge.weight - period * edge.height
            if value > start[edge.dst] + slack:
                start[edge.dst], changed = value, True
        if not changed:
            break
    return start


def cyclic_sequence(cycle: Sequence[tuple[int, int]], vertices: int, steps: int) -> list[int]:
    """Run ids (step-major) of ``steps`` steps placed window after window in the cyclic order.

    ``cycle`` holds (vertex, shift) per vertex; window w places, in list
    order, the run (v, w - shift) of every entry whose step lies in
    0..steps-1.
    """
    low = min(shift for _, shift in cycle)
    high = max(shift for _, shift in cycle)
    sequence = []
    for window in range(low, steps + high):
        for vertex, shift in cycle:
            step = window - shift
            if 0 <= step < steps:
                sequence.append(step * vertices + vertex)
    return sequence


def cycle_edges(
    durations: Sequence[float],
    precedences: Sequence[tuple[int, int, float, int]],
    offsets: dict[tuple[int, int], int],
) -> list[CycleEdge]:
    """The event graph of a periodic schedule (module docstring).

    Parameters
    ----------
    durations
        Seconds of each vertex's runs.
    precedences
        (source, user, lag seconds, step lag) of every template edge: step
        lag 0 for a data edge, 1 + σ for a pub edge.
    offsets
        Per pair (u, v) of vertices whose blocks share a GPU: q such that
        (u, t) goes before (v, t + q), which goes before (u, t + 1).
    """
    edges = [CycleEdge(v, v, durations[v], 1) for v in range(len(durations))]
    for src, dst, lag, steps in precedences:
        edges.append(CycleEdge(src, dst, durations[src] + lag, steps))
    for (first, second), q in offsets.items():
        edges.append(CycleEdge(first, second, durations[first], q))
        edges.append(CycleEdge(second, first, durations[second], 1 - q))
    return edges


def cycle_offsets(
    cycle: Sequence[tuple[int, int]], cover: Sequence[Sequence[int]]
) -> dict[tuple[int, int], int]:
    """The offset q of every pair sharing a GPU under a cyclic order (:func:`cycle_edges`).

    u listed before v: (u, t) and (v, t + shift_u - shift_v) share a window.
    """
    position = {vertex: index for index, (vertex, _) in enumerate(cycle)}
    shift = dict(cycle)
    offsets = {}
    for first, _ in cycle:
        for second in cover[first]:
            if second != first and position[second] > position[first]:
                offsets[(first, second)] = shift[first] - shift[second]
    return offsets


def sequence_offsets(
    sequence: Sequence[int], vertices: int, steps: int, cover: Sequence[Sequence[int]]
) -> dict[tuple[int, int], int] | None:
    """The offset q of every pair sharing a GPU in the middle of a placing sequence.

    For u < v sharing a GPU, (v, s + q) is the first run of v placed after
    (u, s), at the middle step s; None when the next step does not repeat
    the pattern, or the sequence is too short to read one.
    """
    position = [0] * (vertices * steps)
    for index, run in enumerate(sequence):
        position[run] = index
    middle = steps // 2
    offsets = {}
    for first in range(vertices):
        for second in cover[first]:
            if second <= first:
                continue
            found = []
            for step in (middle, middle + 1):
                after = position[step * vertices + first]
                later = [t for t in range(steps) if position[t * vertices + second] > after]
                if not later or min(later) in (0, steps - 1):
                    return None
                found.append(min(later) - step)
            if found[0] != found[1]:
                return None
            offsets[(first, second)] = found[0]
    return offsets


def cycle_problem(
    cycle: Sequence[tuple[int, int]],
    vertices: int,
    precedences: Sequence[tuple[int, int, float, int]],
) -> str | None:
    """Why ``cycle`` is not a cyclic order of the plan, or None when it is one.

    Every vertex must be listed once, and every edge's source run must be
    placed before its user's: for an edge of step lag h from u to v, the
    window of (u, t - h), t - h + shift_u, is before that of (v, t), t +
    shift_v, or the same with u listed first.
    """
    listed = [vertex for vertex, _ in cycle]
    if sorted(listed) != list(range(vertices)):
        return f"a steady-state order lists every vertex once ({vertices}), got {len(listed)} runs"
    position = {vertex: index for index, vertex in enumerate(listed)}
    shift = dict(cycle)
    for src, dst, _, steps in precedences:
        before, after = shift[src] - steps, shift[dst]
        if before > after or (before == after and position[src] > position[dst]):
            return f"vertex {dst} is placed before its predecessor vertex {src}"
    return None
