"""The local-search move over expert and context layouts: ``change_expert_layout``.

docs/plan-space.md#expert-and-context-parallelism. The move is registered with
the others in :data:`rlplan.rpeg.search.moves.DEFAULT_MOVES`; the search leaves it
out on plan spaces with a single (ep, etp, cp) (:func:`expert_layouts_vary`).
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search.state import SearchState

if TYPE_CHECKING:
    from rlplan.rpeg.search.moves import MoveContext


def _expert_layout(strategy) -> tuple[int, int, int]:
    return (strategy.ep, strategy.etp, strategy.cp)


def change_expert_layout(
    state: SearchState, context: MoveContext, rng: random.Random
) -> list[Plan]:
    """Another (ep, etp, cp) for one vertex on its block, among the directory's candidates.

    A vertex whose block's shape offers candidates of another expert and
    context layout is drawn (by run time, or uniformly with ``uniform_vertex``),
    then one such layout; the move proposes up to ``k_x`` of its candidates,
    those closest to the current strategy first (fewest other fields changed:
    dp, pp and tp are kept when a candidate keeps them), fastest first among
    equals (docs/plan-space.md#expert-and-context-parallelism).
    """
    plan = state.plan
    options = context.directory.options
    movable = [
        vertex
        for vertex, placement in enumerate(plan.placements)
        if any(
            _expert_layout(c.strategy) != _expert_layout(placement.strategy)
            for c in options[vertex].get(placement.block.extent, ())
        )
    ]
    if not movable:
        return []
    if context.knobs.uniform_vertex:
        vertex = rng.choice(movable)
    else:
        weights = [context.vertex_weights[v] for v in movable]
        vertex = rng.choices(movable, weights=weights)[0]
    placement = plan.placements[vertex]
    current = placement.strategy
    others = [
        c
        for c in options[vertex][placement.block.extent]
        if _expert_layout(c.strategy) != _expert_layout(current)
    ]
    target = rng.choice(sorted({_expert_layout(c.strategy) for c in others}))
    chosen = [c for c in others if _expert_layout(c.strategy) == target]
    fields = [f.name for f in dataclasses.fields(current) if f.init]
    chosen.sort(key=lambda c: sum(getattr(c.strategy, f) != getattr(current, f) for f in fields))
    return [
        plan.with_placement(vertex, Placement(placement.block, c.strategy))
        for c in chosen[: context.knobs.k_x]
    ]


def expert_layouts_vary(directory: CandidateDirectory) -> bool:
    """Whether some vertex's plan space has more than one (ep, etp, cp): a mixture of
    experts with more than one listed ``expert_parallel`` or ``expert_tensor_parallel``
    value, or more than one ``context_parallel`` value."""
    placement = directory.instance.placement
    if len(placement.cp) > 1:
        return True
    moe = directory.instance.has_moe
    return moe and (len(placement.ep) > 1 or len(placement.etp) > 1)
