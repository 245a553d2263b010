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


def alltoall_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """All-to-all of ``n`` bytes per rank: ``alpha + (p-1)/p * n * beta`` (0 for one rank).

    Each rank sends ``n/p`` to each of the ``p-1`` others. NCCL (and the
    frameworks' all-to-all dispatchers built on it) posts every peer's send
    and receive in one group whose calls "can be seen as progressing
    independently" (NCCL User Guide, "Point-to-point communication",
    docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html, the
    all-to-all example), so the peers' latencies overlap: one ``alpha``, and
    the off-rank ``(p-1)/p`` of the bytes at the link's rate (a latency per
    peer, ``(p-1)*alpha``, would price them as if they ran one after another).
    DeepSeek's expert-parallel kernels scale so (deepseek-ai/DeepEP README,
    low-latency kernels, H800 with 400 Gb/s InfiniBand, 128 tokens, top-8:
    dispatch 173 us at EP 64 and 194 us at EP 256, at 39-40 GB/s: the time is
    the bytes, not the peer count).
    """
    if ranks <= 1:
        return 0.0
    return alpha + (ranks - 1) / ranks * nbytes * beta
