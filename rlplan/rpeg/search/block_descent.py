"""Coordinate descent over each vertex's strategies on its own block.

The annealing draws one strategy change at a time and samples ``k_x``
candidates of a block; a plan whose blocks are right can still have a
vertex a few strategies away from its best on that block. The descent tries
every candidate of every vertex's block shape, keeping each change that
improves the objective, until a round changes nothing (docs/solvers.md#local).
It keeps every block, so it costs one round of the vertices' candidates, far
less than the end polish's every (block, candidate).
"""

from __future__ import annotations

from collections.abc import Callable

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search.state import SearchState

#: Rounds of the descent at most (each tries every vertex's candidates once).
MAX_ROUNDS = 4


def descend_on_blocks(
    start: SearchState,
    directory: CandidateDirectory,
    evaluate: Callable[[Plan], SearchState],
    out_of_time: Callable[[], bool],
    score_eps: float,
) -> SearchState:
    """The first-improvement descent from ``start``; the best feasible state it reached.

    Parameters
    ----------
    start
        A feasible state.
    directory
        The candidate directory of ``start``'s template.
    evaluate
        The search's evaluation of a plan (it counts the evaluation).
    out_of_time
        Whether to stop now; the state reached so far is returned.
    score_eps
        Relative improvement of the objective a change must bring.
    """
    best = start
    for _ in range(MAX_ROUNDS):
        improved = False
        for vertex in range(len(best.plan.placements)):
            block = best.plan.placements[vertex].block
            for candidate in directory.options[vertex].get(block.extent, ()):
                if out_of_time():
                    return best
                if candidate.strategy == best.plan.placements[vertex].strategy:
                    continue
                state = evaluate(
                    best.plan.with_placement(vertex, Placement(block, candidate.strategy))
                )
                if state.feasible and state.objective < best.objective * (1 - score_eps):
                    best, improved = state, True
        if not improved:
            break
    return best
