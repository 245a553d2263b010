"""The local-search move across GPU pools: ``change_pool``.

docs/solvers.md#local and docs/plan-space.md#pools. Every block lies inside one
pool, and the shapes that key the candidate directory are tagged with their
pool, so the block moves that look up blocks by shape (``move_block``,
``resize_block``) keep a vertex in its pool. ``change_pool`` moves one vertex
to a block of another pool. The move is registered with the others in
:data:`rlplan.rpeg.search.moves.DEFAULT_MOVES`; the search leaves it out on a
one-pool cluster (:func:`pools_vary`), so there its random draws are those of
the other moves.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search.state import SearchState

if TYPE_CHECKING:
    from rlplan.rpeg.search.moves import MoveContext


def pool_targets(context: MoveContext, vertex: int, block: Block) -> dict[int, tuple[Block, ...]]:
    """Per other pool, the blocks ``vertex`` may move to from ``block``.

    In each pool other than ``block``'s, the blocks whose shape has
    candidates for ``vertex`` and that its pins and the framework allow, of
    ``block``'s GPU count if there are any, else of the nearest GPU count
    (the smaller of two equally near). A pool with no such block is left out.
    """
    directory = context.directory
    found: dict[int, tuple[Block, ...]] = {}
    for geometry in directory.cluster.pools:
        if geometry.pool == block.pool:
            continue
        usable = [
            b
            for b in geometry.blocks
            if directory.options[vertex].get(b.extent) and directory.allows(vertex, b)
        ]
        if not usable:
            continue
        size = min({b.size for b in usable}, key=lambda s: (abs(s - block.size), s))
        found[geometry.pool] = tuple(b for b in usable if b.size == size)
    return found


def change_pool(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Move one vertex to a block of another pool, of its block's GPU count or the nearest.

    The vertex is drawn as for the other block moves (by run time, or
    uniformly with ``uniform_vertex``), then a pool among those with a block
    it may use (:func:`pool_targets`), then one of that pool's blocks; the
    move proposes up to ``k_x`` candidates of the block's shape, the fastest
    among them, as ``resize_block`` and ``separate`` do.
    """
    plan = state.plan
    vertex = context.pick_vertex(rng, plan)
    targets = pool_targets(context, vertex, plan.placements[vertex].block)
    if not targets:
        return []
    target = rng.choice(targets[rng.choice(sorted(targets))])
    return [
        plan.with_placement(vertex, Placement(target, candidate.strategy))
        for candidate in context.sample_candidates(vertex, target.extent, rng)
    ]


def pools_vary(directory: CandidateDirectory) -> bool:
    """Whether the cluster has more than one GPU pool (``hardware.pools``)."""
    return directory.cluster.pooled
