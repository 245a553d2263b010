"""The cluster of one or more GPU pools: blocks, nodes and levels over every pool.

Pools (``hardware.pools``, :mod:`rlplan.rpeg.schema.pools`) are laid out one
after another in the flat GPU index: pool ``p``'s GPUs follow those of pools
``0..p-1``, and so do its nodes in the flat node index. Each pool has its
own geometry (a :class:`~rlplan.rpeg.model.blocks.Cluster` of its node
shape, offset), and every block lies inside one pool: the blocks of a pool
are today's blocks of its shape, moved by its offset. Two blocks of one pool
are joined at that pool's levels ``g``, ``n``, ``r``; blocks of two pools by
the inter-pool link, level ``x`` (docs/plan-space.md#pools). A one-type
cluster is one pool at offset 0, whose blocks, levels and nodes are exactly
those of its :class:`Cluster`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from rlplan.rpeg.errors import PlanError, describe, did_you_mean
from rlplan.rpeg.model.blocks import Block, Cluster
from rlplan.rpeg.schema.pools import INTER_POOL, Pool


class PooledCluster:
    """Every pool's geometry, laid out one after another.

    Parameters
    ----------
    pools
        The instance's pools (:attr:`Instance.pools
        <rlplan.rpeg.schema.instance.Instance.pools>`), at least one.
    min_block_gpus
        Smallest block size in the plan space.
    node_blocks
        ``placement.node_blocks`` (:class:`~rlplan.rpeg.model.blocks.Cluster`), for every pool.
    sliced
        ``placement.sliced_blocks``, for every pool.

    Attributes
    ----------
    pools
        One :class:`Cluster` per pool, offset to its first GPU.
    names
        The pools' names (None for the one pool of a one-type section).
    """

    def __init__(
        self,
        pools: Sequence[Pool],
        min_block_gpus: int = 1,
        node_blocks: str = "any",
        sliced: bool = False,
    ) -> None:
        geometries, offset = [], 0
        for index, pool in enumerate(pools):
            geometry = Cluster(
                pool.hardware, min_block_gpus, node_blocks, sliced, pool=index, offset=offset
            )
            geometries.append(geometry)
            offset += pool.hardware.num_gpus
        self.pools: tuple[Cluster, ...] = tuple(geometries)
        self.names: tuple[str | None, ...] = tuple(pool.name for pool in pools)
        self.host_capacities = tuple(pool.hardware.host_memory_per_node for pool in pools)
        self.min_block_gpus = min_block_gpus
        self.num_gpus = offset
        first_nodes, count = [], 0
        for geometry in self.pools:
            first_nodes.append(count)
            count += geometry.num_gpus // geometry.gpus_per_node
        #: Flat index of each pool's first node, and the nodes of every pool.
        self.first_nodes = tuple(first_nodes)
        self.num_nodes = count

    @property
    def pooled(self) -> bool:
        """Whether the cluster has more than one pool."""
        return len(self.pools) > 1

    def _single(self) -> Cluster:
        """The one pool's geometry (refused for a cluster of several pools)."""
        if self.pooled:
            raise ValueError("the cluster has several pools: ask the pool's geometry")
        return self.pools[0]

    def __getattr__(self, name: str):
        """Anything else of a one-pool cluster's :class:`Cluster` (``group_levels``, ...)."""
        if name.startswith("__") or name == "pools":
            raise AttributeError(name)
        single = self.__dict__["pools"]
        if len(single) > 1:
            raise AttributeError(f"{name}: the cluster has several pools; ask the pool's geometry")
        return getattr(single[0], name)

    @property
    def racks(self) -> int:
        """Racks of a one-pool cluster."""
        return self._single().racks

    @property
    def nodes_per_rack(self) -> int:
        """Nodes per rack of a one-pool cluster."""
        return self._single().nodes_per_rack

    @property
    def gpus_per_node(self) -> int:
        """GPUs per node of a one-pool cluster."""
        return self._single().gpus_per_node

    # -- blocks ------------------------------------------------------------------------

    @cached_property
    def blocks(self) -> tuple[Block, ...]:
        """Every block of the plan space, by start then decreasing size (pool after pool)."""
        return tuple(block for geometry in self.pools for block in geometry.blocks)

    @cached_property
    def block_index(self) -> dict[tuple[tuple[int, int, int], tuple[int, int, int]], Block]:
        """Blocks by (origin, pool-tagged extent): origins repeat across pools, tags do not."""
        return {(block.origin, block.extent): block for block in self.blocks}

    @cached_property
    def shapes(self) -> tuple[tuple[int, int, int], ...]:
        """Distinct (pool-tagged) block shapes, smallest first, then by pool."""
        if not self.pooled:
            return self.pools[0].shapes
        found = {block.extent: block.pool for block in self.blocks}
        return tuple(sorted(found, key=lambda e: (e[0] * e[1] * e[2], tuple(e), found[e])))

    @cached_property
    def blocks_by_shape(self) -> dict[tuple[int, int, int], tuple[Block, ...]]:
        """Blocks of each (pool-tagged) shape, by start."""
        grouped: dict[tuple[int, int, int], tuple[Block, ...]] = {}
        for geometry in self.pools:
            grouped.update(geometry.blocks_by_shape)
        return grouped

    def whole_blocks(self) -> tuple[Block, ...]:
        """Each pool's block of all its GPUs, by pool (a pool below ``min_block_gpus`` has none)."""
        return tuple(
            geometry.blocks[0]
            for geometry in self.pools
            if geometry.blocks and geometry.blocks[0].size == geometry.num_gpus
        )

    @property
    def xor_symmetric(self) -> bool:
        """Whether XOR-ing flat GPU indices is a symmetry (a one-pool cluster's, else no)."""
        return not self.pooled and self.pools[0].xor_symmetric

    @cached_property
    def symmetric_pools(self) -> tuple[int, ...]:
        """Pools whose own shape is XOR-symmetric (:attr:`Cluster.xor_symmetric`), by index.

        XOR-ing the GPU indices inside one such pool with one of its masks
        (:meth:`Cluster.is_symmetry`), every other pool left as it is, is a
        symmetry of the whole cluster: it maps the pool's blocks onto blocks
        of the same shape and its nodes and racks onto its own, so levels
        inside the pool, memory, host memory and GPU exclusivity are kept,
        and a link between two pools is level ``x`` wherever its ends lie
        (docs/formulation.md#symmetry-breaking). A mask across a pool
        boundary is none: it would swap GPUs of two types.
        """
        return tuple(geometry.pool for geometry in self.pools if geometry.xor_symmetric)

    def mirror(self, block: Block, mask: int, pool: int = 0) -> Block:
        """The image of ``block`` under ``i -> i ^ mask`` on pool ``pool``'s own GPU indices.

        Blocks of the other pools are their own image. Needs
        ``pool`` in :attr:`symmetric_pools` and ``mask`` one of its symmetries.
        """
        if block.pool != pool:
            return block
        return self.pools[pool].mirror(block, mask)

    def span_level(self, first: Block, second: Block) -> str:
        """Level joining two blocks: their pool's level, or ``x`` between two pools."""
        if first.pool != second.pool:
            return INTER_POOL
        return self.pools[first.pool].span_level(first, second)

    def pool_name(self, block: Block) -> str | None:
        """The name of the pool ``block`` lies in (None for a one-type cluster's)."""
        return self.names[block.pool]

    # -- nodes ---------------------------------------------------------------------------

    def nodes_of(self, block: Block) -> range:
        """Flat indices of the nodes ``block`` has GPUs on."""
        geometry = self.pools[block.pool]
        width, first = geometry.gpus_per_node, self.first_nodes[block.pool]
        low, high = block.start - geometry.offset, block.end - 1 - geometry.offset
        return range(first + low // width, first + high // width + 1)

    def gpus_on_node(self, block: Block, node: int) -> int:
        """GPUs of ``block`` on flat node ``node``."""
        geometry = self.pools[block.pool]
        width = geometry.gpus_per_node
        base = geometry.offset + (node - self.first_nodes[block.pool]) * width
        return sum(max(0, min(high, base + width) - max(low, base)) for low, high in block.pieces())

    def node_ranges(self, block: Block) -> tuple[tuple[int, int, int], ...]:
        """``(flat node, first GPU, one past last GPU)`` of ``block``'s GPUs on each of its nodes.

        A block's GPUs on one node are one range, whether it is contiguous or sliced.
        """
        geometry = self.pools[block.pool]
        width, first = geometry.gpus_per_node, self.first_nodes[block.pool]
        found = []
        for node in self.nodes_of(block):
            base = geometry.offset + (node - first) * width
            for low, high in block.pieces():
                low, high = max(low, base), min(high, base + width)
                if low < high:
                    found.append((node, low, high))
        return tuple(found)

    def node_widths(self) -> tuple[int, ...]:
        """GPUs per node of each pool."""
        return tuple(geometry.gpus_per_node for geometry in self.pools)

    def node_capacities(self) -> tuple[float, ...]:
        """``host_memory_per_node`` of every flat node."""
        return tuple(
            self.host_capacities[index]
            for index, geometry in enumerate(self.pools)
            for _ in range(geometry.num_gpus // geometry.gpus_per_node)
        )

    def pool_of_gpu(self, gpu: int) -> int:
        """The pool holding flat GPU ``gpu``."""
        for geometry in reversed(self.pools):
            if gpu >= geometry.offset:
                return geometry.pool
        raise ValueError(f"no GPU {gpu}")

    # -- plan files ------------------------------------------------------------------------

    def block_from_json(self, data: object, path: str) -> Block:
        """Parse ``{"pool": name, "origin": [r, n, g], "extent": [r, n, g]}`` into a block.

        ``pool`` is required when the cluster has several pools and allowed
        when its one pool has a name; origin and extent are inside the pool.

        Raises
        ------
        PlanError
            For a missing or unknown pool, a block that leaves its pool (a
            block lies inside one pool) or any problem
            :meth:`Cluster.block_from_json` names.
        """
        if not isinstance(data, dict) or "pool" not in data:
            if self.pooled and isinstance(data, dict):
                raise PlanError(
                    f"{path}.pool",
                    f"missing: the cluster has pools {', '.join(map(str, self.names))}; "
                    "name the one the block lies in",
                )
            return self.pools[0].block_from_json(data, path)
        geometry = self.pools[self._pool_index(data["pool"], f"{path}.pool")]
        rest = {key: value for key, value in data.items() if key != "pool"}
        if isinstance(rest.get("origin"), list) and isinstance(rest.get("extent"), list):
            self._check_inside(geometry, rest["origin"], rest["extent"], path)
        return geometry.block_from_json(rest, path)

    def _pool_index(self, name: object, path: str) -> int:
        """Index of the pool called ``name``, or a :class:`PlanError` at ``path``."""
        names = tuple(n for n in self.names if n is not None)
        if not names:
            raise PlanError(path, "the instance has no hardware.pools to name")
        if name not in self.names:
            raise PlanError(
                path,
                f"no pool is named {describe(name)}{did_you_mean(str(name), names)} "
                f"(pools: {', '.join(names)})",
            )
        return self.names.index(name)  # type: ignore[arg-type]

    def _check_inside(self, geometry: Cluster, origin: list, extent: list, path: str) -> None:
        """Refuse a block whose origin and extent leave its pool."""
        limits = (geometry.racks, geometry.nodes_per_rack, geometry.gpus_per_node)
        if len(origin) != 3 or len(extent) != 3:
            return
        if not all(isinstance(x, int) for x in (*origin, *extent)):
            return
        if any(o + e > limit for o, e, limit in zip(origin, extent, limits, strict=True)):
            shape = "x".join(map(str, limits))
            raise PlanError(
                path,
                f"origin {list(origin)} extent {list(extent)} leaves pool "
                f"{self.names[geometry.pool]!r} ({shape}): a block lies inside one pool",
            )
