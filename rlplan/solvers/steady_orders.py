"""The best cyclic order of one (placement, staleness) under the steady-state objective.

A plan's period is the largest cycle ratio of its event graph, whose only
free part is, per pair of vertices sharing a GPU, the offset q of their turns
(docs/simulator.md, "The steady-state period"). The exhaustive oracle tries
every q in ``-Q..Q + 1``, with Q = 2 + the largest staleness candidate, keeps
the smallest period, and turns the best offsets into a cyclic order: the runs
of one window [a_0, a_0 + T) of the periodic schedule, by start.

The range (:func:`rlplan.formulation.rows.turn_offsets`, the exact models'
too) holds every order that can be optimal: a pair's q is the number of
periods between two runs that share a GPU, and one step's runs lie within
1 + σ periods of one another (each pub edge closes the step's path within
that many), so larger offsets only stretch the cycles through the pair.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from rlplan.formulation.rows import turn_offsets
from rlplan.rpeg.evaluation.occupancy import Occupancy
from rlplan.rpeg.evaluation.period import (
    CycleEdge,
    cycle_edges,
    max_cycle_ratio,
    periodic_starts,
)
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan


def offset_range(problem: Problem) -> tuple[int, ...]:
    """The offsets q the oracle tries for a pair sharing a GPU (those of the exact models)."""
    return turn_offsets(problem.instance.optimizer.staleness_candidates)


def best_cycle(problem: Problem, plan: Plan, incumbent: float) -> tuple[float, Plan | None]:
    """The smallest period of ``plan``'s placement and staleness below ``incumbent``.

    Returns (period, the plan with its cyclic order), or (incumbent, None)
    when no order beats it.
    """
    simulator = problem.simulator.for_plan(plan)
    occupancy = Occupancy.of(plan.placements)
    durations = simulator.durations(plan)
    precedences = simulator.precedences(plan.staleness, simulator.lags(plan))
    pairs = [(u, v) for u in range(len(durations)) for v in occupancy.cover[u] if v > u]
    best, best_plan = incumbent, None
    for values in itertools.product(offset_range(problem), repeat=len(pairs)):
        edges = cycle_edges(durations, precedences, dict(zip(pairs, values, strict=True)))
        try:
            period = max_cycle_ratio(len(durations), edges)
        except ValueError:
            continue  # some cycle has no period: the turns deadlock
        if period < best:
            best, best_plan = period, plan.with_order(cyclic_order(len(durations), edges, period))
    return best, best_plan


def cyclic_order(vertices: int, edges: Sequence[CycleEdge], period: float) -> tuple:
    """(vertex, shift) by start in the window [a_0, a_0 + T) of the earliest periodic schedule.

    Run (v, t) starts at a_v + t*T (:func:`periodic_starts`); the window's
    run of v is the one of step t_v, shift -t_v (shifts from 0).
    """
    start = periodic_starts(vertices, edges, period)
    steps = [math.ceil((start[0] - start[v]) / period - 1e-9) for v in range(vertices)]
    shift = min(-t for t in steps)
    runs = sorted(range(vertices), key=lambda v: (start[v] + steps[v] * period, v))
    return tuple((v, -steps[v] - shift) for v in runs)
