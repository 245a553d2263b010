"""The area-and-path bound: per vertex one candidate, its time on the path, its GPU-seconds.

Every run of a plan occupies its block's GPUs exclusively for at least its
candidate's time (docs/simulator.md, "Serial schedule generation"), so for
the candidates ``c_v`` a plan chooses

* the makespan is at least the longest path of the unrolled graph with each
  vertex at ``time(c_v)`` (the critical path with the plan's own times), and
* ``k_eval`` steps of GPU-seconds, ``k_eval * sum_v gpus(c_v) * time(c_v)``,
  fit in ``makespan x`` the GPUs of the cluster, and those of each pool in
  that pool's GPUs.

The bound is the minimum over every choice of one candidate per vertex of
the larger of the two (docs/cost-model.md#lower-bounds). It is at least the
critical-path bound, which takes every vertex at its fastest candidate and
ignores the area; it is tighter when the fastest candidates are wide, so
that running them all would not fit beside one another. Only the Pareto
front of (time, GPU-seconds) per vertex and pool can be the minimum's
choice. The minimum is found by a best-first search over the vertices'
choices; a search that reaches ``node_limit`` returns the smallest bound
of the choices it left open, which is still a lower bound.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.templates import Kind, Template, unroll

#: Search nodes expanded before the search returns its open nodes' bound.
NODE_LIMIT = 20_000


@dataclass(frozen=True)
class Choice:
    """One candidate time of a vertex: its time (s), GPU-seconds and pool.

    ``whole``: the shape is every GPU of the cluster, so every other vertex's
    block shares its GPUs. ``extra``: for a rollout engine, the seconds its
    shape's least time grows by when the engine is colocated (the least of
    time + wake + sleep over the shape's candidates, minus ``time``).
    """

    time: float
    area: float
    pool: int
    whole: bool = False
    extra: float = 0.0

    @property
    def gpus(self) -> float:
        """GPUs of the shape (``area / time``)."""
        return self.area / self.time if self.time > 0 else 0.0

    def dominates(self, other: Choice) -> bool:
        """No slower, no more GPU-seconds, colocated or not, and forces no more colocation."""
        return (
            self.pool == other.pool
            and self.time <= other.time
            and self.area <= other.area
            and self.time + self.extra <= other.time + other.extra
            and self.gpus * (self.time + self.extra) <= other.gpus * (other.time + other.extra)
            and (other.whole or not self.whole)
        )


def vertex_choices(
    directory: CandidateDirectory, switch: Callable | None = None
) -> list[tuple[Choice, ...]]:
    """Per vertex, the (time, GPU-seconds) Pareto front of its shapes, per pool.

    A shape's time is its fastest candidate's (the directory keeps them
    fastest first); a choice is dropped when another of the same pool is no
    slower and uses no more GPU-seconds. With ``switch`` (the simulator's
    ``switch(vertex, strategy, pool)``: an engine's wake and sleep when
    colocated), a rollout engine on a block of every GPU of a one-pool
    cluster is colocated in every plan (every other vertex's block shares its
    GPUs), so its shape's time is its candidates' least time + wake + sleep
    (docs/cost-model.md#lower-bounds).
    """
    instance = directory.instance
    several = len(directory.template.vertices) > 1
    choices = []
    for vertex, per_shape in enumerate(directory.options):
        engine = switch is not None and directory.template.vertices[vertex].kind is Kind.GENERATE
        raw = []
        for shape, candidates in per_shape.items():
            if not candidates:
                continue
            gpus = shape[0] * shape[1] * shape[2]
            # A block never spans pools: one of every GPU exists only on a one-pool cluster.
            whole = gpus == instance.num_gpus
            time, extra = candidates[0].time, 0.0
            if engine:
                colocated = min(c.time + sum(switch(vertex, c.strategy, 0)) for c in candidates)
                if whole and several:
                    time = colocated  # colocated in every plan
                else:
                    extra = colocated - time
            raw.append((time, gpus * time, pool_of(shape), whole, extra))
        raw.sort()
        front: list[Choice] = []
        for time, area, pool, whole, extra in raw:
            choice = Choice(time, area, pool, whole, extra)
            if not any(kept.dominates(choice) for kept in front):
                front.append(choice)
        choices.append(tuple(front))
    return choices


def unrolled_edges(
    template: Template, k_eval: int, staleness: dict[str, int]
) -> list[tuple[int, int, float]]:
    """(source run, destination run, fixed delay) of the graph unrolled over ``k_eval`` steps.

    A data edge's fixed delay (a rule reward's stage) is counted, as every
    plan pays it; pub and chain edges have none.
    """
    delays = template.data_delays
    return [
        (
            edge.src,
            edge.dst,
            delays[edge.template_edge] if 0 <= edge.template_edge < len(delays) else 0.0,
        )
        for edge in unroll(template, k_eval, staleness)
    ]


def path_bound(template: Template, k_eval: int, staleness: dict[str, int]) -> Callable:
    """The longest path of ``k_eval`` unrolled steps as a function of the vertices' times.

    Transfer lags are left out; a data edge's fixed delay (a rule reward's
    stage) is counted, as every plan pays it.
    """
    count = len(template.vertices)
    predecessors: list[list[tuple[int, float]]] = [[] for _ in range(count * k_eval)]
    for source, destination, delay in unrolled_edges(template, k_eval, staleness):
        predecessors[destination].append((source, delay))

    def longest(times: Sequence[float]) -> float:
        finish = [0.0] * (count * k_eval)
        for run, before in enumerate(predecessors):  # run ids are a topological order
            ready = max((finish[p] + delay for p, delay in before), default=0.0)
            finish[run] = ready + times[run % count]
        return max(finish, default=0.0)

    return longest


def window_bound(template: Template, k_eval: int, staleness: dict[str, int]) -> Callable:
    """The busy-window bound of ``k_eval`` unrolled steps (:func:`busy_window_bound`).

    Its edges are those of :func:`path_bound`: data edges with their fixed
    delays, pub edges at ``staleness`` and each vertex's chain of runs.
    """
    edges = unrolled_edges(template, k_eval, staleness)
    return busy_window_bound(len(template.vertices), k_eval, edges)


def busy_window_bound(
    count: int, k_eval: int, edges: Sequence[tuple[int, int, float]]
) -> Callable[..., float]:
    """A makespan bound from the runs that must share a window, a function of their choices.

    A run cannot start before its *head* (the longest path into it) and is
    followed by at least its *tail* (the longest path out of it), both at
    the chosen times with the edges' fixed delays and no transfer lag. The
    runs whose heads are at least h and tails at least t all run inside
    [h, makespan - t] and hold their GPUs exclusively there, so

        makespan >= h + t + (their GPU-seconds) / GPUs

    for every h and t, on the cluster and, for the runs of one pool, on that
    pool's GPUs (docs/cost-model.md#lower-bounds). With h = t = 0 it is the
    area bound.

    Parameters
    ----------
    count
        Vertices per step; run ``r`` is vertex ``r % count`` of step ``r // count``.
    k_eval
        Steps.
    edges
        (source run, destination run, fixed delay) with sources before
        destinations in run order.

    Returns
    -------
    Callable
        ``bound(times, areas, pools, pool_gpus)``: per vertex its time,
        GPU-seconds and pool (None: not known, counted on the cluster only),
        and the GPUs per pool; the largest h + t + area / GPUs.
    """
    runs = count * k_eval
    predecessors: list[list[tuple[int, float]]] = [[] for _ in range(runs)]
    successors: list[list[tuple[int, float]]] = [[] for _ in range(runs)]
    for source, destination, delay in edges:
        predecessors[destination].append((source, delay))
        successors[source].append((destination, delay))

    def bound(times, areas, pools, pool_gpus) -> float:
        head = [0.0] * runs
        for run in range(runs):  # run ids are a topological order
            head[run] = max(
                (head[p] + times[p % count] + delay for p, delay in predecessors[run]),
                default=0.0,
            )
        tail = [0.0] * runs
        for run in reversed(range(runs)):
            tail[run] = max(
                (delay + times[s % count] + tail[s] for s, delay in successors[run]),
                default=0.0,
            )
        by_tail = sorted(range(runs), key=lambda r: -tail[r])
        total = sum(pool_gpus)
        best = 0.0
        for h in sorted(set(head)):
            area = 0.0
            pool_area = [0.0] * len(pool_gpus)
            for run in by_tail:
                if head[run] < h:
                    continue
                vertex = run % count
                area += areas[vertex]
                best = max(best, h + tail[run] + area / total)
                pool = pools[vertex]
                if pool is not None and len(pool_gpus) > 1:
                    pool_area[pool] += areas[vertex]
                    best = max(best, h + tail[run] + pool_area[pool] / pool_gpus[pool])
        return best

    return bound


def area_path_bound(
    choices: Sequence[tuple[Choice, ...]],
    path: Callable[[Sequence[float]], float],
    pool_gpus: Sequence[int],
    k_eval: int,
    node_limit: int = NODE_LIMIT,
    window: Callable | None = None,
) -> float:
    """min over one choice per vertex of max(path, k_eval x GPU-seconds / GPUs, busy window).

    Parameters
    ----------
    choices
        Per vertex, its choices (:func:`vertex_choices`).
    path
        The makespan bound of given vertex times (:func:`path_bound`, or the
        steady-state cycle bound times ``k_eval``).
    pool_gpus
        GPUs per pool, in pool order.
    k_eval
        Steps whose GPU-seconds must fit.
    node_limit
        Nodes expanded before the smallest open bound is returned.
    window
        The busy-window bound (:func:`busy_window_bound`) of the same graph,
        taken as a third term; None: path and area only.
    """
    if any(not options for options in choices):
        return float("inf")
    fastest = [min(c.time for c in options) for options in choices]
    least_area = [min(c.area for c in options) for options in choices]
    # Widest choices first: their area decides most.
    order = sorted(range(len(choices)), key=lambda v: -max(c.area for c in choices[v]))
    total_gpus = sum(pool_gpus)

    def node_bound(assigned: tuple[int, ...]) -> float:
        times = list(fastest)
        areas, pools = list(least_area), [None] * len(choices)
        picked = [
            (vertex, choices[vertex][index]) for vertex, index in zip(order, assigned, strict=False)
        ]
        wide = [vertex for vertex, choice in picked if choice.whole]
        for vertex, choice in picked:
            times[vertex], areas[vertex], pools[vertex] = choice.time, choice.area, choice.pool
            if choice.extra > 0 and any(other != vertex for other in wide):
                # Another vertex holds every GPU: this engine is colocated, it wakes and sleeps.
                times[vertex] += choice.extra
                areas[vertex] += choice.gpus * choice.extra
        pool_area = [0.0] * len(pool_gpus)
        for vertex, _ in picked:
            pool_area[pools[vertex]] += areas[vertex]
        rest = sum(least_area[v] for v in order[len(assigned) :])
        area = max(
            (sum(pool_area) + rest) / total_gpus,
            max(a / g for a, g in zip(pool_area, pool_gpus, strict=True)),
        )
        value = max(path(times), k_eval * area)
        if window is not None:
            value = max(value, window(times, areas, pools, pool_gpus))
        return value

    heap = [(node_bound(()), 0, ())]
    pushed = expanded = 0
    while heap:
        bound, _, assigned = heapq.heappop(heap)
        if len(assigned) == len(order) or expanded >= node_limit:
            return bound
        expanded += 1
        for index in range(len(choices[order[len(assigned)]])):
            child = (*assigned, index)
            pushed += 1
            heapq.heappush(heap, (node_bound(child), pushed, child))
    return float("inf")  # pragma: no cover - the root always has children
