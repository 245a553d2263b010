"""Block pins: ``placement.pin.<vertex>.block``, a block's origin, extent and pool.

:func:`parse_block_pin` reads one and checks that some block of the plan
space matches it (:mod:`rlplan.rpeg.schema.pins` parses the rest of a pin);
:func:`rlplan.rpeg.model.pinning.pin_allows_block` applies it to blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import check_keys, mapping
from rlplan.rpeg.schema.geometry import block_words, plan_space_blocks
from rlplan.rpeg.schema.pools import Pool, pool_named

if TYPE_CHECKING:
    from rlplan.rpeg.schema.hardware import Hardware
    from rlplan.rpeg.schema.instance import PlacementConfig


def _triple(raw: Any, path: str, minimum: int) -> tuple[int, int, int]:
    if (
        not isinstance(raw, list | tuple)
        or len(raw) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in raw)
    ):
        kind = "positive integers" if minimum > 0 else "integers >= 0"
        raise InstanceError(path, f"must be three {kind} [rack, node, gpu], got {describe(raw)}")
    return (raw[0], raw[1], raw[2])


def parse_block_pin(
    raw: Any, path: str, pools: tuple[Pool, ...], placement: PlacementConfig
) -> dict[str, Any]:
    """Origin, extent and pool of a block pin; together they must match some block.

    The block is one of the plan space's in the pinned pool, or in any pool
    when no pool is pinned (``pool`` needs ``hardware.pools``).
    """
    section = mapping(raw, path)
    check_keys(section, ("pool", "origin", "extent"), path)
    if not section:
        raise InstanceError(path, "pin origin, extent, pool or a combination")
    origin = (
        None if section.get("origin") is None else _triple(section["origin"], f"{path}.origin", 0)
    )
    extent = (
        None if section.get("extent") is None else _triple(section["extent"], f"{path}.extent", 1)
    )
    chosen = range(len(pools))
    if section.get("pool") is not None:
        chosen = (pool_named(pools, section["pool"], f"{path}.pool"),)
    matching = [
        (block_origin, block_extent)
        for index in chosen
        for block_origin, block_extent in _pool_blocks(pools[index].hardware, placement)
        if (origin is None or block_origin == origin) and (extent is None or block_extent == extent)
    ]
    if not matching:
        where = f"{path}.extent" if origin is None else f"{path}.origin" if extent is None else path
        described = " ".join(
            f"{key} {list(value)}"
            for key, value in (("origin", origin), ("extent", extent))
            if value
        )
        raise InstanceError(
            where,
            f"no block of the plan space has {described} (blocks are "
            f"{block_words(placement.node_blocks, placement.sliced_blocks)}, "
            f"or the whole {_wholes(pools, chosen)}"
            + (
                f", at least {placement.min_block_gpus} GPUs"
                if placement.min_block_gpus > 1
                else ""
            )
            + ")",
        )
    pool = None if section.get("pool") is None else pools[chosen[0]].name
    return {"origin": origin, "extent": extent, "pool": pool}


def _wholes(pools: tuple[Pool, ...], chosen: Sequence[int]) -> str:
    """The shapes of the pools a block pin may lie in, e.g. ``1x2x8 cluster``."""
    shapes = []
    for index in chosen:
        hardware, name = pools[index].hardware, pools[index].name
        shape = f"{hardware.racks}x{hardware.nodes_per_rack}x{hardware.gpus_per_node}"
        shapes.append(shape + (f" pool {name!r}" if name is not None else " cluster"))
    return " or ".join(shapes)


def _pool_blocks(
    hardware: Hardware, placement: PlacementConfig
) -> tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...]:
    """The plan space's blocks of one pool as (origin, extent) pairs."""
    return plan_space_blocks(
        hardware.racks,
        hardware.nodes_per_rack,
        hardware.gpus_per_node,
        placement.min_block_gpus,
        placement.node_blocks,
        placement.sliced_blocks,
    )
