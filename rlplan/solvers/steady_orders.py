"""The best cyclic order of one (placement, staleness) under the steady-state objective.

A plan's period is the largest cycle ratio of its event graph, whose only
free part is, per pair of vertices sharing a GPU, the offset q of their turns
(docs/simulator.md, "The steady-state period"). The exhaustive oracle tries
every cyclic order (every order of the vertices in a window, with every
shift a run may need) and keeps the smallest period; :func:`cyclic_order`
turns offsets into the cyclic order of one window [a_0, a_0 + T).

The exact models' turn offsets (:func:`rlplan.formulation.rows.turn_offsets`)
hold those of every such order: a pair's q is a difference of two shifts,
or one minus it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence

from rlplan.rpeg.evaluation.occupancy import Occupancy
from rlplan.rpeg.evaluation.period import (
    CycleEdge,
    cycle_edges,
    cycle_offsets,
    cycle_problem,
    max_cycle_ratio,
    periodic_starts,
)
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan


def best_cycle(
    problem: Problem, plan: Plan, incumbent: float, deadline: float = math.inf
) -> tuple[float, Plan | None, bool]:
    """The smallest period of ``plan``'s placement and staleness below ``incumbent``.

    Every cyclic order is tried: vertex 0 first at shift 0 (a window may
    start anywhere), the others in every order with shifts in
    :func:`shift_range`; one that is not topological is skipped.

    Returns
    -------
    tuple
        (period, the plan with its cyclic order, timed out), or (incumbent,
        None, ...) when no order beats it.
    """
    simulator = problem.simulator.for_plan(plan)
    occupancy = Occupancy.of(plan.placements)
    durations = simulator.durations(plan)
    count = len(durations)
    precedences = simulator.precedences(plan.staleness, simulator.lags(plan))
    shifts = shift_range(problem, precedences, count)
    best, best_plan = incumbent, None
    tried = 0
    for others in itertools.permutations(range(1, count)):
        for values in itertools.product(shifts, repeat=count - 1):
            tried += 1
            if tried % 256 == 0 and time.perf_counter() > deadline:
                return best, best_plan, True
            cycle = ((0, 0), *zip(others, values, strict=True))
            if cycle_problem(cycle, count, precedences) is not None:
                continue
            offsets = cycle_offsets(cycle, occupancy.cover)
            period = max_cycle_ratio(count, cycle_edges(durations, precedences, offsets))
            if period < best:
                best, best_plan = period, plan.with_order(_normalised(cycle))
    return best, best_plan, False


def shift_range(problem: Problem, precedences, count: int) -> range:
    """Shifts relative to vertex 0 that a cyclic order may need.

    Vertex 0 feeding every other in its step (a root), each run is placed
    no earlier than its step's first, and no later than 1 + σ windows after
    it (the pub edge into the next rollouts): 0..1 + σ; otherwise either way.
    """
    candidates = problem.instance.optimizer.staleness_candidates.values()
    reach = 1 + max((max(values) for values in candidates), default=0)
    root = all(dst != 0 for _, dst, _, steps in precedences if steps == 0)
    return range(0 if root else -reach, reach + 1)


def _normalised(cycle) -> tuple:
    """``cycle`` with its shifts from 0."""
    low = min(shift for _, shift in cycle)
    return tuple((vertex, shift - low) for vertex, shift in cycle)


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
