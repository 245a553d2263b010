"""Alpha-beta times of collectives and point-to-point transfers (docs/cost-model.md)."""

from __future__ import annotations


def allreduce_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """Ring all-reduce: ``2(p-1)*alpha + 2(p-1)/p * n * beta`` (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes * beta


def allgather_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """Ring all-gather (or reduce-scatter) of ``n`` bytes: ``(p-1)*alpha + (p-1)/p * n * beta``."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * alpha + (ranks - 1) / ranks * nbytes * beta


def p2p_time(nbytes: float, alpha: float, beta: float) -> float:
    """Point-to-point transfer: ``alpha + n * beta``."""
    return alpha + nbytes * beta


def hierarchical_alltoall_time(
    nbytes: float,
    ranks: int,
    peers: tuple[int, int, int],
    alphas: tuple[float, float, float],
    betas: tuple[float, float, float],
) -> float:
    """All-to-all of ``n`` bytes per rank whose peers sit at several levels.

    ``peers`` counts a rank's ``p-1`` peers by the level that joins them to it
    (same node, same rack, other racks); ``alphas`` and ``betas`` are those
    levels' latencies and seconds per byte. The rank sends ``n/p`` to each
    peer, and the levels' links carry their shares at once, so
    ``alpha_far + max over levels of (peers_l/p * n * beta_l)``, ``alpha_far``
    the latency of the farthest level that has a peer (0 for one rank). With
    every peer at one level ``l`` it is ``alpha_l + (p-1)/p * n * beta_l``.

    Expert-parallel dispatch runs so: NVLink to the node's peers beside RDMA to
    the other nodes' (deepseek-ai/DeepEP README at dd758ca, "Performance":
    EP 8 x 2 and EP 8 x 4 on H800 with CX7 reach 90 and 61 GB/s of "logical"
    bandwidth, local traffic included, over a ~50 GB/s NIC: the time is the
    off-node bytes, 1/2 and 3/4 of them, at the NIC's rate).

    One latency, not one per peer: NCCL (and the frameworks' all-to-all
    dispatchers built on it) posts every peer's send and receive in one group
    whose calls "can be seen as progressing independently" (NCCL User Guide,
    "Point-to-point communication", the all-to-all example). DeepEP's
    low-latency kernels scale so (its README before V2, H800 with 400 Gb/s
    InfiniBand, 128 tokens, top-8: dispatch 173 us at EP 64 and 194 us at
    EP 256, at 39-40 GB/s: the time is the bytes, not the peer count).
    """
    if ranks <= 1:
        return 0.0
    far = max(level for level, count in enumerate(peers) if count > 0)
    slowest = max(count * beta for count, beta in zip(peers, betas, strict=True))
    return alphas[far] + nbytes / ranks * slowest
