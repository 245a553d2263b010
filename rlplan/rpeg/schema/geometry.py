"""Which blocks the plan space has, as (origin, extent) triples of a cluster's shape.

A block is an aligned power-of-two range of GPUs inside a node, a run of
whole nodes inside a rack, an aligned power-of-two group of whole racks, or
the whole node, rack or cluster; blocks smaller than
``placement.min_block_gpus`` are left out. ``placement.node_blocks`` says
which runs of nodes count (docs/plan-space.md#devices-and-blocks):
``aligned``, the aligned power-of-two groups of nodes (nodes 0-1, 2-3, 0-3 of
a 4-node rack); ``any``, every run of consecutive nodes of the rack (also
nodes 1-2, 0-2 and 1-3); ``auto``, the default, ``any`` in racks of at most
:data:`AUTO_ANY_NODES` nodes and ``aligned`` in larger ones.
:class:`rlplan.rpeg.model.blocks.Cluster` builds its blocks from this list;
pins check a pinned block against it when the instance is parsed.
"""

from __future__ import annotations

Triple = tuple[int, int, int]

#: Values of ``placement.node_blocks``, the default first.
NODE_BLOCKS = ("auto", "any", "aligned")
#: The largest rack in which ``auto`` takes every run of nodes. A rack of N nodes
#: has N(N+1)/2 runs against about 2N aligned groups: 36 against 15 at 8 nodes,
#: 528 against 63 at 32, where `check` on the 256-GPU DeepSeek-V3 instance takes
#: 4 x as long (docs/plan-space.md#devices-and-blocks).
AUTO_ANY_NODES = 8


def effective_node_blocks(node_blocks: str, nodes_per_rack: int) -> str:
    """``any`` or ``aligned``: what ``node_blocks`` means in a rack of ``nodes_per_rack``."""
    if node_blocks != "auto":
        return node_blocks
    return "any" if nodes_per_rack <= AUTO_ANY_NODES else "aligned"


def _powers_of_two(limit: int) -> list[int]:
    values, value = [], 1
    while value <= limit:
        values.append(value)
        value *= 2
    return values


def node_runs(nodes_per_rack: int, node_blocks: str = "any") -> tuple[tuple[int, int], ...]:
    """``(first node, node count)`` of the groups of whole nodes a rack's blocks take.

    Parameters
    ----------
    nodes_per_rack
        Nodes of one rack.
    node_blocks
        ``any``: every run of consecutive nodes; ``aligned``: the aligned
        power-of-two groups, plus the whole rack; ``auto``: see
        :func:`effective_node_blocks`.

    Returns
    -------
    tuple
        Runs by count, then first node; the whole rack is always one.
    """
    if effective_node_blocks(node_blocks, nodes_per_rack) == "any":
        counts = range(1, nodes_per_rack + 1)
        return tuple((n, k) for k in counts for n in range(nodes_per_rack - k + 1))
    runs = [
        (n, k) for k in _powers_of_two(nodes_per_rack) for n in range(0, nodes_per_rack - k + 1, k)
    ]
    if (0, nodes_per_rack) not in runs:
        runs.append((0, nodes_per_rack))
    return tuple(runs)


def slice_ranges(gpus_per_node: int) -> tuple[tuple[int, int], ...]:
    """``(first GPU, width)`` of the in-node ranges a sliced block repeats on each of its nodes.

    The aligned power-of-two ranges narrower than a node, and the complement
    of each aligned power-of-two prefix ``[0, a)`` or suffix ``[G - a, G)``
    (``[a, G)`` and ``[0, G - a)``): with 8 GPUs per node the splits 1 + 7,
    2 + 6 and 4 + 4 of every node exist. By first GPU, then decreasing width.
    """
    G = gpus_per_node
    found = {(g, size) for size in _powers_of_two(G - 1) for g in range(0, G - size + 1, size)}
    for size in _powers_of_two(G - 1):
        found.update({(size, G - size), (0, G - size)})
    return tuple(sorted(found, key=lambda item: (item[0], -item[1])))


def sliced_blocks(nodes_per_rack: int, gpus_per_node: int) -> tuple[tuple[Triple, Triple], ...]:
    """Rack 0's sliced blocks as ``((0, node, gpu), (1, nodes, width))``.

    Every in-node range of :func:`slice_ranges` on every aligned power-of-two
    group of at least two nodes and on the whole rack (:func:`node_runs` with
    ``aligned``, whatever ``placement.node_blocks`` says): 18 ranges of an
    8-GPU node on 1, 3 and 7 groups of a 2-, 4- and 8-node rack, 18, 54 and
    126 blocks, where every run of nodes would give 18, 108 and 504
    (docs/plan-space.md#sliced-blocks).
    """
    return tuple(
        ((0, first, g), (1, count, width))
        for first, count in node_runs(nodes_per_rack, "aligned")
        if count >= 2
        for g, width in slice_ranges(gpus_per_node)
    )


def plan_space_blocks(
    racks: int,
    nodes_per_rack: int,
    gpus_per_node: int,
    min_block_gpus: int = 1,
    node_blocks: str = "any",
    sliced: bool = False,
) -> tuple[tuple[Triple, Triple], ...]:
    """Every block of the plan space as ``(origin, extent)``, by first GPU then decreasing size.

    Parameters
    ----------
    racks, nodes_per_rack, gpus_per_node
        The cluster's shape.
    min_block_gpus
        Smallest block size in the plan space.
    node_blocks
        Which runs of whole nodes inside a rack are blocks (:func:`node_runs`).
    sliced
        ``placement.sliced_blocks``: add the sliced blocks of every rack
        (:func:`sliced_blocks`). A sliced block of the same first GPU and
        size as a contiguous one comes after it.

    Returns
    -------
    tuple
        ``((rack, node, gpu), (racks, nodes, gpus))`` pairs; a GPU range two
        forms reach (a whole node of a one-node rack) appears once, in the
        first form.
    """
    R, N, G = racks, nodes_per_rack, gpus_per_node
    found: dict[tuple[int, ...], tuple[Triple, Triple]] = {}

    def add(origin: Triple, extent: Triple) -> None:
        size = extent[0] * extent[1] * extent[2]
        if size >= min_block_gpus:
            start = (origin[0] * N + origin[1]) * G + origin[2]
            # A sliced block's GPUs are no range: its key also holds its width.
            key = (start, size) if extent[2] == G or extent[1] == 1 else (start, size, extent[2])
            found.setdefault(key, (origin, extent))

    runs = node_runs(N, node_blocks)
    for r in range(R):
        for n in range(N):
            for size in _powers_of_two(G):
                for g in range(0, G - size + 1, size):
                    add((r, n, g), (1, 1, size))
            add((r, n, 0), (1, 1, G))
        for first, count in runs:
            add((r, first, 0), (1, count, G))
    for count in _powers_of_two(R):
        for r in range(0, R - count + 1, count):
            add((r, 0, 0), (count, N, G))
    add((0, 0, 0), (R, N, G))
    if sliced:
        for r in range(R):
            for (_, node, g), extent in sliced_blocks(N, G):
                add((r, node, g), extent)
    return tuple(found[key] for key in sorted(found, key=lambda key: (key[0], -key[1], *key[2:])))


def block_words(node_blocks: str = "any", sliced: bool = False) -> str:
    """What a block of the plan space is, in words (for messages naming a missing block)."""
    nodes = {
        "any": "runs of whole nodes in a rack",
        "aligned": "aligned power-of-two groups of nodes in a rack",
        "auto": (
            f"runs of whole nodes in a rack of up to {AUTO_ANY_NODES} nodes (aligned "
            "power-of-two groups of nodes in a larger rack)"
        ),
    }[node_blocks]
    words = f"aligned power-of-two GPUs in a node, {nodes}, aligned power-of-two groups of racks"
    if sliced:
        words += (
            ", sliced blocks (one in-node range, aligned or the rest of a node after an "
            "aligned prefix or before an aligned suffix, on each node of an aligned "
            "power-of-two group of two or more nodes or of the whole rack)"
        )
    return words


def plan_space_note(node_blocks: str = "any", sliced: bool = False) -> str:
    """What the plan space of an optimality claim is, in one sentence's words."""
    return (
        f"blocks of {block_words(node_blocks, sliced)} or the whole cluster, the strategies and "
        "microbatch counts of the instance, and its staleness candidates"
    )
