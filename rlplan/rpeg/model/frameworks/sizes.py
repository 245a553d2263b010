"""Each GPU pool's GPUs and node width, as the framework rules that read the cluster take them.

:class:`~rlplan.rpeg.model.frameworks.rules.WholeCluster` compares a block
with its pool's GPUs, :class:`~rlplan.rpeg.model.frameworks.rules.SameNodeWidth`
two vertices' pools' GPUs per node. A one-pool cluster may be given by its
GPU count alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PoolSizes:
    """Each GPU pool's GPUs and GPUs per node, in pool order (one entry: one pool).

    Attributes
    ----------
    gpus
        GPUs of each pool.
    widths
        GPUs per node of each pool (0 where unknown: a one-pool cluster given
        by its GPU count, which no width rule reads).
    """

    gpus: tuple[int, ...]
    widths: tuple[int, ...]


def pool_sizes(cluster: Any) -> PoolSizes:
    """The :class:`PoolSizes` of ``cluster``: a GPU count (one pool), or anything with ``pools``.

    Parameters
    ----------
    cluster
        An ``int`` (the GPUs of a one-pool cluster), a :class:`PoolSizes`, or a
        :class:`~rlplan.rpeg.model.pools.PooledCluster` (each pool's
        ``num_gpus`` and ``gpus_per_node``).
    """
    if isinstance(cluster, PoolSizes):
        return cluster
    if isinstance(cluster, int):
        return PoolSizes((cluster,), (0,))
    pools = cluster.pools
    return PoolSizes(
        tuple(pool.num_gpus for pool in pools), tuple(pool.gpus_per_node for pool in pools)
    )
