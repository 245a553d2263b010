"""What sliced blocks need of the cluster's geometry: their symmetries and rank order.

A sliced block (``placement.sliced_blocks``) is the same in-node range on each
node of an aligned group of nodes (:func:`rlplan.rpeg.schema.geometry.sliced_blocks`).
XOR-ing flat GPU indices maps it onto a block only when the GPU bits of the
mask map each in-node range onto one (:func:`slice_gpu_masks`); its ranks
run node by node (:func:`slice_place`). :class:`rlplan.rpeg.model.blocks.Cluster`
uses both (docs/plan-space.md#sliced-blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from rlplan.rpeg.schema.geometry import slice_ranges


@cache
def slice_gpu_masks(gpus_per_node: int) -> tuple[int, ...]:
    """The GPU bits ``m`` under which XOR maps every in-node range of a slice onto one.

    The rest of a node after a prefix (GPUs 2-7 of 8) is a range again only
    under ``m = 0`` and its reflection ``m = G - 1``; every ``m`` keeps the
    ranges of 2-GPU nodes. ``gpus_per_node`` is a power of two.
    """
    ranges = set(slice_ranges(gpus_per_node))

    def keeps(mask: int) -> bool:
        for g, width in ranges:
            image = sorted(x ^ mask for x in range(g, g + width))
            if image[-1] - image[0] + 1 != width or (image[0], width) not in ranges:
                return False
        return True

    return tuple(mask for mask in range(gpus_per_node) if keeps(mask))


def sliced_image(cluster: Any, block: Any, mask: int) -> tuple[int, int, int]:
    """The origin of a sliced ``block``'s image under ``i -> i ^ mask`` in ``cluster``.

    Its aligned group of nodes maps onto the group the node bits name, its
    in-node range onto the range of the GPU bits' images, its rack by the
    rack bits; the extent is kept. ``mask`` must be a symmetry.
    """
    rack, node, gpu = block.origin
    count, width = block.extent[1], block.extent[2]
    G = cluster.gpus_per_node
    node ^= (mask // G) % cluster.nodes_per_rack & ~(count - 1)
    gpu = min(x ^ (mask % G) for x in range(gpu, gpu + width))
    rack ^= mask // cluster.gpus_per_rack
    return (rack, node, gpu)


def slice_place(width: int, gpus_per_node: int) -> Callable[[int], int]:
    """Rank -> flat GPU of a sliced block ``width`` GPUs wide at GPU 0: node by node."""
    return lambda rank: (rank // width) * gpus_per_node + rank % width
