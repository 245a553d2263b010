"""Which blocks the plan space has, as (origin, extent) triples of a cluster's shape.

A block is an aligned power-of-two range of GPUs inside a node, an aligned
power-of-two group of whole nodes inside a rack, an aligned power-of-two
group of whole racks, or the whole node, rack or cluster; blocks smaller than
``placement.min_block_gpus`` are left out. :class:`rlplan.rpeg.model.blocks.Cluster`
builds its blocks from this list; pins check a pinned block against it when
the instance is parsed.
"""

from __future__ import annotations

Triple = tuple[int, int, int]


def _powers_of_two(limit: int) -> list[int]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def plan_space_blocks(
    racks: int, nodes_per_rack: int, gpus_per_node: int, min_block_gpus: int = 1
) -> tuple[tuple[Triple, Triple], ...]:
    """Every block of the plan space as ``(origin, extent)``, by first GPU then decreasing size.

    Parameters
    ----------
    racks, nodes_per_rack, gpus_per_node
        The cluster's shape.
    min_block_gpus
        Smallest block size in the plan space.

    Returns
    -------
    tuple
        ``((rack, node, gpu), (racks, nodes, gpus))`` pairs; a GPU range two
        forms reach (a whole node of a one-node rack) appears once, in the
        first form.
    """
    R, N, G = racks, nodes_per_rack, gpus_per_node
    found: dict[tuple[int, int], tuple[Triple, Triple]] = {}

    def add(origin: Triple, extent: Triple) -> None:
        size = extent[0] * extent[1] * extent[2]
        if size >= min_block_gpus:
            start = (origin[0] * N + origin[1]) * G + origin[2]
            found.setdefault((start, size), (origin, extent))

    for r in range(R):
        for n in range(N):
            for size in _powers_of_two(G):
                for g in range(0, G - size + 1, size):
                    add((r, n, g), (1, 1, size))
            add((r, n, 0), (1, 1, G))
        for count in _powers_of_two(N):
            for n in range(0, N - count + 1, count):
                add((r, n, 0), (1, count, G))
        add((r, 0, 0), (1, N, G))
    for count in _powers_of_two(R):
        for r in range(0, R - count + 1, count):
            add((r, 0, 0), (count, N, G))
    add((0, 0, 0), (R, N, G))
    return tuple(found[key] for key in sorted(found, key=lambda key: (key[0], -key[1])))
