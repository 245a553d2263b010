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
from rlplan.rpeg.templates import Template, unroll

#: Search nodes expanded before the search returns its open nodes' bound.
NODE_LIMIT = 20_000


@dataclass(frozen=True)
class Choice:
    """One candidate time of a vertex: its time (s), GPU-seconds and pool."""

    time: float
    area: float
    pool: int


def vertex_choices(directory: CandidateDirectory) -> list[tuple[Choice, ...]]:
    """Per vertex, the (time, GPU-seconds) Pareto front of its shapes, per pool.

    A shape's time is its fastest candidate's (the directory keeps them
    fastest first); a choice is dropped when another of the same pool is no
    slower and uses no more GPU-seconds.
    """
    choices = []
    for per_shape in directory.options:
        raw = sorted(
            (
                candidates[0].time,
                shape[0] * shape[1] * shape[2] * candidates[0].time,
                pool_of(shape),
            )
            for shape, candidates in per_shape.items()
            if candidates
        )
        front: list[Choice] = []
        for time, area, pool in raw:
            if not any(c.pool == pool and c.area <= area for c in front):
                front.append(Choice(time, area, pool))
        choices.append(tuple(front))
    return choices


def path_bound(template: Template, k_eval: int, staleness: dict[str, int]) -> Callable:
    """The longest path of ``k_eval`` unrolled steps as a function of the vertices' times.

    Transfer lags are left out; a data edge's fixed delay (a rule reward's
    stage) is counted, as every plan pays it.
    """
    count = len(template.vertices)
    delays = template.data_delays
    predecessors: list[list[tuple[int, float]]] = [[] for _ in range(count * k_eval)]
    for edge in unroll(template, k_eval, staleness):
        delay = delays[edge.template_edge] if 0 <= edge.template_edge < len(delays) else 0.0
        predecessors[edge.dst].append((edge.src, delay))

    def longest(times: Sequence[float]) -> float:
        finish = [0.0] * (count * k_eval)
        for run, before in enumerate(predecessors):  # run ids are a topological order
            ready = max((finish[p] + delay for p, delay in before), default=0.0)
            finish[run] = ready + times[run % count]
        return max(finish, default=0.0)

    return longest


def area_path_bound(
    choices: Sequence[tuple[Choice, ...]],
    path: Callable[[Sequence[float]], float],
    pool_gpus: Sequence[int],
    k_eval: int,
    node_limit: int = NODE_LIMIT,
) -> float:
    """min over one choice per vertex of max(path(times), k_eval x GPU-seconds / GPUs).

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
        pool_area = [0.0] * len(pool_gpus)
        rest = sum(least_area[v] for v in order[len(assigned) :])
        for vertex, index in zip(order, assigned, strict=False):
            choice = choices[vertex][index]
            times[vertex] = choice.time
            pool_area[choice.pool] += choice.area
        area = max(
            (sum(pool_area) + rest) / total_gpus,
            max(a / g for a, g in zip(pool_area, pool_gpus, strict=True)),
        )
        return max(path(times), k_eval * area)

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
