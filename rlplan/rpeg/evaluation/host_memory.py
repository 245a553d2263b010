"""Host memory of each node: offloaded states and sleeping engines (docs/simulator.md).

On each node the static rule is

    host(n) = Σ over models m of max over m's vertices v of host(v) · GPUs of v on n
              + Σ over colocated rollout engines g of host(g) · GPUs of g on n

where host(v) is the bytes per GPU a vertex keeps on the host
(:attr:`rlplan.rpeg.model.candidates.Candidate.host`): the training states of
an offloaded train vertex, the weight shard of an offloaded infer vertex, and
a sleeping engine's weights (level 1). As on a GPU, a model keeps its largest
host footprint (its states are moved, not copied); an engine's sleeping
weights are a copy of their own. The plan is feasible when host(n) ≤
``hardware.host_memory_per_node`` on every node (its pool's, with GPU pools:
nodes are numbered pool after pool, :class:`~rlplan.rpeg.model.pools.PooledCluster`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.pools import PooledCluster


@dataclass(frozen=True)
class HostOverflow:
    """A node whose host memory the plan overflows.

    Attributes
    ----------
    node
        Flat node index (``rack * nodes_per_rack + node``, after the nodes of
        the pools before the node's).
    needed, capacity
        Host bytes the plan needs there and its ``host_memory_per_node``.
    vertices
        The vertices holding host memory on the node, in template order.
    """

    node: int
    needed: float
    capacity: float
    vertices: tuple[str, ...]

    @property
    def excess(self) -> float:
        """Bytes beyond the capacity."""
        return self.needed - self.capacity


def node_terms(
    blocks: Sequence[Block],
    hosts: Sequence[float],
    engines: Sequence[bool],
    models: Sequence[int],
    cluster: PooledCluster,
) -> dict[int, tuple[float, list[int]]]:
    """Host bytes and the vertices holding them, on every node some vertex holds bytes on.

    Parameters
    ----------
    blocks, hosts
        Every vertex's block and host bytes per GPU.
    engines
        Whether each vertex is a colocated rollout engine (its bytes add
        apart from its model's); a rollout that is not colocated holds
        nothing and must have host 0 here.
    models
        Each vertex's model index.
    cluster
        The cluster, whose nodes the blocks' GPUs lie on.
    """
    per_node: dict[int, tuple[dict[int, float], float, list[int]]] = {}
    for vertex, (block, host) in enumerate(zip(blocks, hosts, strict=True)):
        if host <= 0:
            continue
        for node in cluster.nodes_of(block):
            held = host * cluster.gpus_on_node(block, node)
            largest, engine, holders = per_node.setdefault(node, ({}, 0.0, []))
            holders.append(vertex)
            if engines[vertex]:
                per_node[node] = (largest, engine + held, holders)
            elif held > largest.get(models[vertex], 0.0):
                largest[models[vertex]] = held
    return {
        node: (sum(largest.values()) + engine, holders)
        for node, (largest, engine, holders) in per_node.items()
    }


def worst_overflow(terms: dict[int, tuple[float, list[int]]], capacities: Sequence[float]) -> float:
    """Largest host overflow over the nodes in bytes (0 when every node fits).

    ``capacities`` is the host memory of every flat node.
    """
    return max([0.0, *(needed - capacities[node] for node, (needed, _) in terms.items())])
