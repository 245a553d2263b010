"""Cluster shapes for a GPU count, derived from an instance's node and rack widths."""

from __future__ import annotations

from rlplan.rpeg.errors import InputError


def parse_counts(text: str, option: str = "--gpus") -> list[int]:
    """GPU counts from ``8,16,32``: distinct positive integers, in the order given.

    Raises
    ------
    InputError
        For an empty list, a non-integer, a count below 1 or a repeated count.
    """
    counts: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            count = int(item)
        except ValueError:
            raise InputError(option, f"{item!r} is not a whole number of GPUs") from None
        if count < 1:
            raise InputError(option, f"GPU counts must be positive, got {count}")
        if count in counts:
            raise InputError(option, f"{count} is given twice")
        counts.append(count)
    if not counts:
        raise InputError(option, "give at least one GPU count, e.g. --gpus 8,16,32")
    return counts


def rack_width(racks: int, nodes_per_rack: int) -> int | None:
    """How many nodes a rack of the explored shapes holds; None: as many as needed.

    A cluster of one node says nothing of how many nodes its rack could
    hold: its shapes keep that node and grow in nodes of one rack. Any
    other cluster's ``nodes_per_rack`` is its rack width.

    Parameters
    ----------
    racks, nodes_per_rack
        The instance's (or GPU type's) cluster.
    """
    return None if racks == 1 and nodes_per_rack == 1 else nodes_per_rack


def cluster_shape(
    gpus: int, gpus_per_node: int, nodes_per_rack: int | None
) -> tuple[int, int, int]:
    """The ``(racks, nodes_per_rack, gpus_per_node)`` of a cluster of ``gpus`` GPUs.

    Nodes keep the instance's width ``G = gpus_per_node`` and racks hold at
    most ``N = nodes_per_rack`` nodes (:func:`rack_width`): nodes grow
    before racks.

    * ``gpus < G``: one node of ``gpus`` GPUs;
    * ``gpus = k G`` with ``k <= N`` (any ``k`` when ``N`` is None): one
      rack of ``k`` nodes;
    * ``gpus = m N G``: ``m`` racks of ``N`` nodes.

    Parameters
    ----------
    gpus
        The GPU count.
    gpus_per_node, nodes_per_rack
        Node and rack widths of the instance (or GPU type); a rack width of
        None bounds no rack.

    Raises
    ------
    InputError
        For a count that is none of these (e.g. 12 GPUs with 8 per node, or
        3 nodes with 2 per rack).
    """
    if gpus < 1:
        raise InputError("--gpus", f"GPU counts must be positive, got {gpus}")
    if gpus < gpus_per_node:
        return (1, 1, gpus)
    if gpus % gpus_per_node:
        raise InputError(
            "--gpus",
            f"{gpus} GPUs cannot be shaped: not a whole number of {gpus_per_node}-GPU nodes",
        )
    nodes = gpus // gpus_per_node
    if nodes_per_rack is None or nodes <= nodes_per_rack:
        return (1, nodes, gpus_per_node)
    if nodes % nodes_per_rack:
        raise InputError(
            "--gpus",
            f"{gpus} GPUs cannot be shaped: {nodes} nodes are not a whole number of "
            f"{nodes_per_rack}-node racks",
        )
    return (nodes // nodes_per_rack, nodes_per_rack, gpus_per_node)
