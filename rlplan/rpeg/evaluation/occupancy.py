"""Which placed blocks share GPUs, and the memory checks that follow (docs/simulator.md).

Two placed blocks share a GPU when their ranges meet: one holds the other, or
two runs of nodes overlap in part; a sliced block (one range on each of
several nodes) meets another when one of its pieces does. A plan's
:class:`Occupancy` lists, for every vertex, the vertices
whose blocks meet its own (itself included, in template order). The
simulator reads from it whether a rollout engine is colocated, when a
vertex's GPUs are free during scheduling (:mod:`rlplan.rpeg.evaluation.schedule`)
and the worst GPU overflow; it is computed once per plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlplan.rpeg.model.plan import Placement


@dataclass(frozen=True, slots=True)
class Occupancy:
    """The GPU ranges of a plan's vertices and which of them meet.

    Attributes
    ----------
    lows, highs
        First GPU and one past the last GPU of each vertex's block.
    cover
        ``cover[v]``: the vertices whose blocks share a GPU with ``v``'s,
        ``v`` included, in increasing index order.
    pools
        The GPU pool of each vertex's block.
    pieces
        With a sliced block in the plan, each vertex's block as disjoint
        ``(first, one past last)`` ranges (:meth:`Block.pieces
        <rlplan.rpeg.model.blocks.Block.pieces>`); empty otherwise, when
        ``lows`` and ``highs`` are the blocks' ranges.
    sizes
        GPUs of each vertex's block.
    """

    lows: tuple[int, ...]
    highs: tuple[int, ...]
    cover: tuple[tuple[int, ...], ...]
    pools: tuple[int, ...] = ()
    pieces: tuple[tuple[tuple[int, int], ...], ...] = ()
    sizes: tuple[int, ...] = ()

    @classmethod
    def of(cls, placements: Sequence[Placement]) -> Occupancy:
        """The occupancy of ``placements`` (one per template vertex)."""
        if any(placement.block.sliced for placement in placements):
            return cls._of_sliced(placements)
        lows: list[int] = []
        highs: list[int] = []
        pools: list[int] = []
        for placement in placements:
            block = placement.block
            lows.append(block.start)
            highs.append(block.start + block.size)
            pools.append(block.pool)
        count = len(lows)
        cover: list[list[int]] = [[] for _ in range(count)]
        for first in range(count):
            low, high = lows[first], highs[first]
            row = cover[first]
            row.append(first)
            for second in range(first + 1, count):
                if lows[second] < high and low < highs[second]:
                    row.append(second)
                    cover[second].append(first)
        return cls(tuple(lows), tuple(highs), tuple(map(tuple, cover)), tuple(pools))

    @classmethod
    def _of_sliced(cls, placements: Sequence[Placement]) -> Occupancy:
        """:meth:`of` for a plan with a sliced block: blocks meet when some pieces do."""
        blocks = [placement.block for placement in placements]
        cover: list[list[int]] = [[] for _ in blocks]
        for first, block in enumerate(blocks):
            cover[first].append(first)
            for second in range(first + 1, len(blocks)):
                if block.intersects(blocks[second]):
                    cover[first].append(second)
                    cover[second].append(first)
        return cls(
            tuple(block.start for block in blocks),
            tuple(block.end for block in blocks),
            tuple(map(tuple, cover)),
            tuple(block.pool for block in blocks),
            tuple(block.pieces() for block in blocks),
            tuple(block.size for block in blocks),
        )

    def holds(self, vertex: int, gpu: int) -> bool:
        """Whether flat GPU ``gpu`` is one of ``vertex``'s block."""
        if self.pieces:
            return any(low <= gpu < high for low, high in self.pieces[vertex])
        return self.lows[vertex] <= gpu < self.highs[vertex]

    def shares(self, vertex: int) -> bool:
        """Whether another vertex's block shares a GPU with ``vertex``'s."""
        return len(self.cover[vertex]) > 1

    def gpu_overflow(
        self, candidates: Sequence, model_of: Sequence[int], capacities: Sequence[float]
    ) -> float:
        """Worst per-GPU overflow in bytes under the static residency rule (0 when all fit).

        ``capacities`` is the usable memory per GPU of each pool: a block's
        GPUs have its pool's.

        A GPU's peak grows with the set of blocks covering it, and every block
        covering GPU x also covers the first GPU of the one among them that
        starts last: checking the first GPU of each placed block suffices, for
        nested blocks and for runs of nodes that overlap in part (nodes 0-2 and
        1-3 are both checked at node 1's first GPU). A sliced block is one
        range per node, so the same argument over pieces holds: every piece
        covering GPU x holds the first GPU of the covering piece that starts
        last, and the first GPU of every piece is checked. The vertices holding that
        GPU are those of the block's cover whose range contains it. Each model
        keeps its largest resident bytes, the largest transient adds
        (docs/simulator.md, "Memory feasibility"). Models are summed in the
        order of their first holder, as :meth:`Simulator.peak_memory
        <rlplan.rpeg.evaluation.simulator.Simulator.peak_memory>` does.
        """
        if self.pieces:
            return self._sliced_overflow(candidates, model_of, capacities)
        lows, highs, pools = self.lows, self.highs, self.pools
        single = capacities[0] if len(capacities) == 1 else None
        seen: set[int] = set()
        worst = 0.0
        for vertex, holders in enumerate(self.cover):
            start = lows[vertex]
            if start in seen:
                continue
            seen.add(start)
            resident: dict[int, float] = {}
            transient = 0.0
            for index in holders:
                if lows[index] <= start < highs[index]:
                    candidate = candidates[index]
                    model = model_of[index]
                    if candidate.resident > resident.get(model, 0.0):
                        resident[model] = candidate.resident
                    if candidate.transient > transient:
                        transient = candidate.transient
            capacity = single if single is not None else capacities[pools[vertex]]
            overflow = sum(resident.values()) + transient - capacity
            if overflow > worst:
                worst = overflow
        return worst

    def _sliced_overflow(
        self, candidates: Sequence, model_of: Sequence[int], capacities: Sequence[float]
    ) -> float:
        """:meth:`gpu_overflow` with a sliced block: checked at the first GPU of every piece."""
        seen: set[int] = set()
        worst = 0.0
        for vertex, holders in enumerate(self.cover):
            for start, _ in self.pieces[vertex]:
                if start in seen:
                    continue
                seen.add(start)
                resident: dict[int, float] = {}
                transient = 0.0
                for index in holders:
                    if self.holds(index, start):
                        candidate = candidates[index]
                        model = model_of[index]
                        if candidate.resident > resident.get(model, 0.0):
                            resident[model] = candidate.resident
                        transient = max(transient, candidate.transient)
                overflow = sum(resident.values()) + transient - capacities[self.pools[vertex]]
                worst = max(worst, overflow)
        return worst

    def host_bound(self, hosts: Sequence[float], widths: Sequence[int]) -> float:
        """An upper bound on every node's host bytes: Σ_v host(v) · min(|block v|, G).

        A node holds at most the sum over vertices of their host bytes per
        GPU times their GPUs on it (a model keeps only its largest term), and
        a block has at most ``min(size, G)`` GPUs on one node, ``G`` its pool's
        GPUs per node (``widths``, per pool). When the bound
        fits, no node overflows and the exact per-node terms
        (:func:`rlplan.rpeg.evaluation.host_memory.node_terms`) need not be
        built.
        """
        bound = 0.0
        for vertex, host in enumerate(hosts):
            if host > 0:
                size = self.sizes[vertex] if self.sizes else self.highs[vertex] - self.lows[vertex]
                width = widths[self.pools[vertex]]
                bound += host * (size if size < width else width)
        return bound
