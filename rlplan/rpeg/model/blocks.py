"""Devices, blocks and communication levels of the cluster.

GPUs have the flat index ``i = (r*N + n)*G + g``. A block is a contiguous
range of flat indices: an aligned power-of-two range inside a node, a run of
whole nodes inside a rack (every run, or only the aligned power-of-two
groups, as ``placement.node_blocks`` says), an aligned power-of-two group of
whole racks, or the whole cluster. Runs of nodes need not be nested: nodes
0-2 and 1-3 of a rack share nodes 1 and 2 (docs/plan-space.md#devices-and-blocks).
With ``placement.sliced_blocks`` a block may also be sliced: the same in-node
range on each node of a run of nodes, one contiguous piece per node
(:meth:`Block.pieces`; docs/plan-space.md#sliced-blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from rlplan.rpeg.errors import PlanError, describe
from rlplan.rpeg.model.shapes import tagged
from rlplan.rpeg.model.slices import slice_gpu_masks, slice_place, sliced_image
from rlplan.rpeg.schema.geometry import (
    block_words,
    effective_node_blocks,
    node_runs,
    plan_space_blocks,
)
from rlplan.rpeg.schema.hardware import Hardware

#: Communication levels, from fastest to slowest.
LEVEL_ORDER = {"g": 0, "n": 1, "r": 2}


class GroupLevels(NamedTuple):
    """The worst level of each parallel group of a strategy on a block shape.

    Indexable as the tuple ``(tp, pp, dp, cp, ep)`` of level names, plus the
    expert-parallel group's peers by level, which the all-to-all prices level
    by level (docs/cost-model.md#mixtures-of-experts).

    Attributes
    ----------
    tp, pp, dp, cp, ep
        ``g``, ``n`` or ``r``: the slowest link inside each group.
    ep_peers
        For the expert-parallel group's member with the most distant peers,
        its ``ep - 1`` peers counted by the level that joins them to it:
        ``(same node, same rack, other racks)``.
    """

    tp: str
    pp: str
    dp: str
    cp: str
    ep: str
    ep_peers: tuple[int, int, int] = (0, 0, 0)


@dataclass(frozen=True, order=True)
class Block:
    """A block of GPUs: ``origin`` (rack, node, gpu) and ``extent`` (racks, nodes, gpus).

    Attributes
    ----------
    start
        Flat index of the first GPU.
    size
        Number of GPUs.
    level
        ``g`` inside one node, ``n`` inside one rack, ``r`` across racks.
    pool
        Index of the GPU pool the block lies in (``hardware.pools``; 0 for a
        one-type cluster). ``origin`` is inside that pool, ``start`` counts
        the GPUs of the pools before it, and ``extent`` is tagged with the
        pool (:mod:`rlplan.rpeg.model.shapes`).
    stride
        For a sliced block (the in-node range ``extent[2]`` GPUs wide on each
        of ``extent[1]`` nodes), the flat distance between its nodes' pieces,
        its pool's GPUs per node; 0 for a contiguous block.
    """

    start: int
    size: int
    origin: tuple[int, int, int]
    extent: tuple[int, int, int]
    level: str
    pool: int = 0
    stride: int = 0

    @property
    def sliced(self) -> bool:
        """Whether the block's GPUs are one range on each of several nodes, not one range."""
        return self.stride > 0

    @property
    def end(self) -> int:
        """One past the last flat GPU index (a sliced block's GPUs do not fill up to it)."""
        if self.stride:
            return self.start + (self.extent[1] - 1) * self.stride + self.extent[2]
        return self.start + self.size

    def pieces(self) -> tuple[tuple[int, int], ...]:
        """The block's GPUs as disjoint ``(first, one past last)`` flat ranges, in order."""
        if not self.stride:
            return ((self.start, self.start + self.size),)
        width = self.extent[2]
        return tuple(
            (low, low + width)
            for low in range(self.start, self.start + self.extent[1] * self.stride, self.stride)
        )

    @property
    def shape(self) -> tuple[int, int, int]:
        """The block's extent; cost and memory depend on the shape only."""
        return self.extent

    @property
    def width(self) -> int:
        """GPUs of the block inside one node (tensor parallelism must divide it)."""
        return self.extent[2]

    def gpus(self) -> range | tuple[int, ...]:
        """Flat indices of the block's GPUs, in rank order (node by node for a sliced block)."""
        if not self.stride:
            return range(self.start, self.end)
        return tuple(gpu for low, high in self.pieces() for gpu in range(low, high))

    def holds(self, low: int, high: int) -> bool:
        """Whether the flat GPUs ``low..high-1`` all lie in this block."""
        return any(first <= low and high <= last for first, last in self.pieces())

    def intersects(self, other: Block) -> bool:
        """Whether the two blocks share a GPU."""
        if not (self.start < other.end and other.start < self.end):
            return False
        if not (self.stride or other.stride):
            return True
        return any(
            low < last and first < high
            for low, high in self.pieces()
            for first, last in other.pieces()
        )

    def contains(self, other: Block) -> bool:
        """Whether ``other`` lies inside this block."""
        if not (self.stride or other.stride):
            return self.start <= other.start and other.end <= self.end
        return all(self.holds(low, high) for low, high in other.pieces())

    def to_json(self) -> dict[str, list[int]]:
        """The block as written in plan files."""
        return {"origin": list(self.origin), "extent": list(self.extent)}

    def label(self) -> str:
        """Short human-readable form, e.g. ``gpus 0-7`` (``gpus 0-1,8-9`` when sliced)."""
        if self.size == 1:
            return f"gpu {self.start}"
        return "gpus " + ",".join(
            str(low) if high - low == 1 else f"{low}-{high - 1}" for low, high in self.pieces()
        )


def _distance(peers: tuple[int, int, int]) -> tuple[int, int, int]:
    """Sort key of peer counts by level: most peers in other racks, then nodes, then GPUs."""
    return (peers[2], peers[1], peers[0])


class Cluster:
    """The cluster's geometry: flat indices, blocks and group levels.

    Parameters
    ----------
    hardware
        The instance's hardware section.
    min_block_gpus
        Smallest block size in the plan space.
    node_blocks
        ``placement.node_blocks``: ``any`` (every run of whole nodes inside a
        rack is a block), ``aligned`` (only aligned power-of-two groups) or
        ``auto`` (``any`` in racks of up to 8 nodes, else ``aligned``).
    sliced
        ``placement.sliced_blocks``: whether sliced blocks are blocks too
        (:func:`rlplan.rpeg.schema.geometry.sliced_blocks`).
    pool, offset
        The GPU pool this geometry is (:class:`rlplan.rpeg.model.pools.PooledCluster`
        lays pools out one after another) and the flat index of its first GPU.
    """

    def __init__(
        self,
        hardware: Hardware,
        min_block_gpus: int = 1,
        node_blocks: str = "any",
        sliced: bool = False,
        *,
        pool: int = 0,
        offset: int = 0,
    ) -> None:
        self.pool = pool
        self.offset = offset
        self.racks = hardware.racks
        self.nodes_per_rack = hardware.nodes_per_rack
        self.gpus_per_node = hardware.gpus_per_node
        self.min_block_gpus = min_block_gpus
        #: ``any`` or ``aligned``: ``placement.node_blocks`` in this rack size.
        self.node_blocks = effective_node_blocks(node_blocks, hardware.nodes_per_rack)
        self.sliced = sliced
        self.num_gpus = hardware.num_gpus
        self.gpus_per_rack = hardware.gpus_per_rack
        self._group_levels: dict[tuple, GroupLevels] = {}

    def flat_index(self, rack: int, node: int, gpu: int) -> int:
        """Flat index of GPU (rack, node, gpu)."""
        return (rack * self.nodes_per_rack + node) * self.gpus_per_node + gpu

    def make_block(self, origin: tuple[int, int, int], extent: tuple[int, int, int]) -> Block:
        """Build the block with this origin and extent (not checked against the plan space)."""
        racks, nodes, gpus = extent
        start = self.offset + self.flat_index(*origin)
        size = racks * nodes * gpus
        level = "g" if racks == 1 and nodes == 1 else ("n" if racks == 1 else "r")
        stride = self.gpus_per_node if self.is_sliced_extent(extent) else 0
        return Block(
            start, size, tuple(origin), tagged(extent, self.pool), level, self.pool, stride
        )

    def is_sliced_extent(self, extent: tuple[int, int, int]) -> bool:
        """Whether a block of ``extent`` takes part of each of several nodes (is sliced)."""
        return extent[0] == 1 and extent[1] > 1 and extent[2] < self.gpus_per_node

    @cached_property
    def blocks(self) -> tuple[Block, ...]:
        """Every block of the plan space, by start then decreasing size."""
        return tuple(
            self.make_block(origin, extent)
            for origin, extent in plan_space_blocks(
                self.racks,
                self.nodes_per_rack,
                self.gpus_per_node,
                self.min_block_gpus,
                self.node_blocks,
                self.sliced,
            )
        )

    @cached_property
    def xor_symmetric(self) -> bool:
        """Whether XOR-ing flat GPU indices with some constants is a symmetry of the cluster.

        With power-of-two racks, nodes per rack and GPUs per node, the flat
        index is the concatenation of the rack, node and GPU bits, and
        ``i -> i ^ mask`` keeps which GPUs share a node or a rack: lags,
        memory and GPU exclusivity are unchanged when it maps blocks onto
        blocks of the same shape. It does for every aligned dyadic range,
        hence for every mask when all blocks are aligned; runs of nodes that
        are not (nodes 1-2 of 4) leave only the masks of :meth:`is_symmetry`.
        """
        return all(
            value & (value - 1) == 0
            for value in (self.racks, self.nodes_per_rack, self.gpus_per_node)
        )

    @cached_property
    def node_reflection_only(self) -> bool:
        """Whether the node bits of a symmetry mask must be all 0 or all 1.

        True when some block is a run of nodes that is not an aligned
        power-of-two group: XOR with node bits ``m`` maps the run of nodes
        ``n..n+k-1`` onto a run only for ``m = 0`` (itself) or ``m = N - 1``
        (its reflection ``N-n-k..N-n-1``), while GPU and rack bits stay free.
        """
        return any(
            count & (count - 1) or first % count
            for first, count in node_runs(self.nodes_per_rack, self.node_blocks)
        )

    @cached_property
    def gpu_masks(self) -> tuple[int, ...]:
        """The GPU bits of a symmetry mask that map every block onto a block.

        All of them without sliced blocks; with them, those of
        :func:`rlplan.rpeg.model.slices.slice_gpu_masks` (0 and ``G - 1``
        on nodes of 4 or more GPUs).
        """
        if not self.sliced or not self.xor_symmetric:
            return tuple(range(self.gpus_per_node))
        return slice_gpu_masks(self.gpus_per_node)

    def is_symmetry(self, mask: int) -> bool:
        """Whether ``i -> i ^ mask`` maps every block onto a block of the same shape."""
        if not self.xor_symmetric or not 0 <= mask < self.num_gpus:
            return False
        if self.sliced and mask % self.gpus_per_node not in self.gpu_masks:
            return False
        if not self.node_reflection_only:
            return True
        return (mask // self.gpus_per_node) % self.nodes_per_rack in (0, self.nodes_per_rack - 1)

    @cached_property
    def _block_at(self) -> dict[tuple[int, int], Block]:
        return {(block.start, block.size): block for block in self.blocks if not block.sliced}

    def mirror(self, block: Block, mask: int) -> Block:
        """The image of ``block`` under ``i -> i ^ mask`` (needs :meth:`is_symmetry`).

        ``i`` is the GPU's index inside this pool (its flat index less :attr:`offset`).
        """
        if block.sliced:
            return self._mirror_sliced(block, mask)
        local = block.start - self.offset
        if block.size & (block.size - 1) == 0 and local % block.size == 0:
            start = self.offset + (local ^ (mask & ~(block.size - 1)))
            return self._block_at[(start, block.size)]
        # A run of nodes that is not aligned: it lies in one rack and takes whole nodes.
        rack, node, _ = block.origin
        count = block.extent[1]
        if (mask // self.gpus_per_node) % self.nodes_per_rack:
            node = self.nodes_per_rack - node - count
        rack ^= mask // self.gpus_per_rack
        return self.block_index[((rack, node, 0), block.extent)]

    def _mirror_sliced(self, block: Block, mask: int) -> Block:
        """:meth:`mirror` of a sliced block (:func:`rlplan.rpeg.model.slices.sliced_image`)."""
        return self.block_index[(sliced_image(self, block, mask), block.extent)]

    def canonical_mask(self, block: Block) -> int:
        """A symmetry mask taking ``block`` to the block of its orbit that starts first.

        The rack and GPU bits of the mask are the block's own (its image lies
        in rack 0 at GPU 0 of its node); the node bits are the block's own
        too when every mask is a symmetry (its image starts at GPU 0), else
        0 or all ones, whichever puts the block's first node lower (for
        nodes 1-2 of 4, 0: no symmetry moves it to node 0). Needs
        :attr:`xor_symmetric`.
        """
        rack, node, gpu = block.origin
        count = block.extent[1]
        if self.sliced:
            return self._canonical_mask_sliced(block)
        if not self.node_reflection_only:
            bits = node
        else:
            bits = 0 if node <= self.nodes_per_rack - node - count else self.nodes_per_rack - 1
        return (rack * self.nodes_per_rack + bits) * self.gpus_per_node + gpu

    def _canonical_mask_sliced(self, block: Block) -> int:
        """:meth:`canonical_mask` with sliced blocks: the symmetry whose image starts first.

        The rack bits are the block's own; the node and GPU bits are tried
        among those of a symmetry (:attr:`gpu_masks`, and only 0 or all ones
        for the nodes when :attr:`node_reflection_only`).
        """
        N, G = self.nodes_per_rack, self.gpus_per_node
        nodes = (0, N - 1) if self.node_reflection_only else range(N)
        base = block.origin[0] * self.gpus_per_rack
        masks = [base + bits * G + gpu for bits in nodes for gpu in self.gpu_masks]
        return min(masks, key=lambda mask: (self.mirror(block, mask).start, mask))

    def is_canonical(self, block: Block) -> bool:
        """Whether ``block`` starts first in its orbit (:meth:`canonical_mask` keeps it)."""
        return self.mirror(block, self.canonical_mask(block)) == block

    @cached_property
    def block_index(self) -> dict[tuple[tuple[int, int, int], tuple[int, int, int]], Block]:
        """Blocks of the plan space by (origin, extent)."""
        return {(block.origin, block.extent): block for block in self.blocks}

    @cached_property
    def shapes(self) -> tuple[tuple[int, int, int], ...]:
        """Distinct block shapes, smallest first."""
        shapes = {block.extent for block in self.blocks}
        return tuple(sorted(shapes, key=lambda e: (e[0] * e[1] * e[2], e)))

    @cached_property
    def blocks_by_shape(self) -> dict[tuple[int, int, int], tuple[Block, ...]]:
        """Blocks of each shape, by start."""
        grouped: dict[tuple[int, int, int], list[Block]] = {}
        for block in self.blocks:
            grouped.setdefault(block.extent, []).append(block)
        return {shape: tuple(blocks) for shape, blocks in grouped.items()}

    def block_from_json(self, data: object, path: str) -> Block:
        """Parse ``{"origin": [r, n, g], "extent": [r, n, g]}`` into a block of the plan space.

        Raises
        ------
        PlanError
            If the block is malformed, leaves the cluster or is not one of
            the plan space's blocks.
        """
        if not isinstance(data, dict) or set(data) != {"origin", "extent"}:
            raise PlanError(path, 'must be {"origin": [r, n, g], "extent": [r, n, g]}')
        triples = []
        for key in ("origin", "extent"):
            value = data[key]
            if (
                not isinstance(value, list)
                or len(value) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in value)
            ):
                raise PlanError(f"{path}.{key}", f"must be three integers, got {describe(value)}")
            triples.append(tuple(value))
        origin, extent = triples
        limits = (self.racks, self.nodes_per_rack, self.gpus_per_node)
        if (
            any(x < 0 for x in origin)
            or any(x < 1 for x in extent)
            or any(o + e > limit for o, e, limit in zip(origin, extent, limits, strict=True))
        ):
            raise PlanError(
                path,
                f"origin {list(origin)} extent {list(extent)} lies outside the cluster "
                f"{self.racks}x{self.nodes_per_rack}x{self.gpus_per_node}",
            )
        block = self.block_index.get((origin, tagged(extent, self.pool)))
        if block is None and self.is_sliced_extent(extent) and not self.sliced:
            raise PlanError(
                path,
                f"origin {list(origin)} extent {list(extent)} is a sliced block (part of each "
                "of several nodes): allowed only with placement.sliced_blocks: true",
            )
        if block is None:
            raise PlanError(
                path,
                f"origin {list(origin)} extent {list(extent)} is not a block of the plan space "
                f"({block_words(self.node_blocks, self.sliced)}, or the cluster"
                + (f", at least {self.min_block_gpus} GPUs" if self.min_block_gpus > 1 else "")
                + ")",
            )
        return block

    def range_level(self, low: int, high: int) -> str:
        """Level of the smallest unit holding flat indices ``low..high`` (inclusive)."""
        if low // self.gpus_per_node == high // self.gpus_per_node:
            return "g"
        if low // self.gpus_per_rack == high // self.gpus_per_rack:
            return "n"
        return "r"

    def span_level(self, first: Block, second: Block) -> str:
        """Level spanning both blocks of this pool (for transfers between them)."""
        low = min(first.start, second.start) - self.offset
        return self.range_level(low, max(first.end, second.end) - 1 - self.offset)

    def group_levels(
        self,
        extent: tuple[int, int, int],
        dp: int,
        pp: int,
        tp: int,
        cp: int = 1,
        ep: int = 1,
        etp: int = 1,
    ) -> GroupLevels:
        """Worst level of the tp, pp, dp, cp and ep groups of a strategy on a block shape.

        Ranks are ordered tp fastest, then cp, then pp, then dp. The experts of
        a pipeline stage are folded over its ranks in that order (Megatron's
        MoE parallel folding): etp fastest, then ep, then the expert copies
        (docs/plan-space.md#expert-and-context-parallelism). The levels are
        computed as if the block started at GPU 0, which gives the same levels
        wherever it lies: an in-node block stays in one node, a run of nodes
        starts at a node boundary and stays in one rack, a group of racks
        starts at a rack boundary. They are cached per (shape, degrees),
        which many candidates share.
        """
        key = (extent, dp, pp, tp, cp, ep, etp)
        found = self._group_levels.get(key)
        if found is None:
            found = self._compute_group_levels(extent, dp, pp, tp, cp, ep, etp)
            self._group_levels[key] = found
        return found

    def _compute_group_levels(
        self,
        extent: tuple[int, int, int],
        dp: int,
        pp: int,
        tp: int,
        cp: int = 1,
        ep: int = 1,
        etp: int = 1,
    ) -> GroupLevels:
        """:meth:`group_levels` without the cache, walking every rank of a multi-node block."""
        size = extent[0] * extent[1] * extent[2]
        sliced = self.is_sliced_extent(extent)
        if size <= self.gpus_per_node and not sliced:
            return GroupLevels("g", "g", "g", "g", "g", (ep - 1, 0, 0))
        worst = dict.fromkeys(("tp", "pp", "dp", "cp", "ep"), "g")
        place = slice_place(extent[2], self.gpus_per_node) if sliced else None

        def update(key: str, low: int, high: int) -> None:
            if place is not None:
                # Rank order is node by node: the ranks between two lie between them.
                low, high = place(low), place(high)
            level = self.range_level(low, high)
            if LEVEL_ORDER[level] > LEVEL_ORDER[worst[key]]:
                worst[key] = level

        inner = cp * tp
        for replica in range(dp):
            for offset in range(inner):
                base = replica * pp * inner + offset
                update("pp", base, base + (pp - 1) * inner)
            for stage in range(pp):
                base = (replica * pp + stage) * inner
                for context in range(cp):
                    update("tp", base + context * tp, base + context * tp + tp - 1)
                for offset in range(tp):
                    update("cp", base + offset, base + offset + (cp - 1) * tp)
        for offset in range(pp * inner):
            update("dp", offset, offset + (dp - 1) * pp * inner)
        peers = (0, 0, 0)
        if ep > 1:
            peers = self._expert_levels(update, dp, pp, inner, ep, etp, place)
        return GroupLevels(worst["tp"], worst["pp"], worst["dp"], worst["cp"], worst["ep"], peers)

    def _expert_levels(
        self, update, dp: int, pp: int, inner: int, ep: int, etp: int, place=None
    ) -> tuple[int, int, int]:
        """Update the ep level with every expert-parallel group of the first stage.

        A stage's ranks, flattened tp fastest, then cp, then dp, hold the
        experts etp fastest, then ep: group (copy g, offset o) is the flat
        positions ``(g*ep + j)*etp + o``; every stage has the same spans.
        Returns the peers by level (:attr:`GroupLevels.ep_peers`) of the
        member whose peers are most distant (most in other racks, then in
        other nodes).
        """

        def rank(flat: int) -> int:
            replica, position = divmod(flat, inner)
            return replica * pp * inner + position

        farthest = (-1, -1, -1)
        for copy in range(dp * inner // (ep * etp)):
            for offset in range(etp):
                members = [rank((copy * ep + j) * etp + offset) for j in range(ep)]
                update("ep", members[0], members[-1])
                if place is not None:
                    members = [place(member) for member in members]
                farthest = max(farthest, self._peers_by_level(members), key=_distance)
        return farthest

    def _peers_by_level(self, members: list[int]) -> tuple[int, int, int]:
        """:attr:`GroupLevels.ep_peers` of one group of flat GPU indices (its farthest member)."""
        nodes: dict[int, int] = {}
        racks: dict[int, int] = {}
        for member in members:
            node, rack = member // self.gpus_per_node, member // self.gpus_per_rack
            nodes[node] = nodes.get(node, 0) + 1
            racks[rack] = racks.get(rack, 0) + 1
        farthest = (-1, -1, -1)
        for member in members:
            in_node = nodes[member // self.gpus_per_node]
            in_rack = racks[member // self.gpus_per_rack]
            peers = (in_node - 1, in_rack - in_node, len(members) - in_rack)
            farthest = max(farthest, peers, key=_distance)
        return farthest
