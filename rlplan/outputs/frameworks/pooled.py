"""Which GPU pool each vertex of a plan runs on, in the words the exporters write.

On a cluster of several pools (``hardware.pools``, docs/instance.md#pools)
every block lies inside one pool, so each vertex, and each framework role
(a Ray resource pool, worker group or placement group of its vertices),
runs on one pool's GPUs, of one GPU type and node shape. The exporters set
node counts and GPUs per node from the vertex's block, that is from its
pool; none of the four frameworks can ask Ray for a GPU type by a setting,
so each writes which pool (and GPU type) each role needs as comment lines
(docs/frameworks.md#on-a-cluster-of-several-gpu-pools). A one-pool instance writes none of this.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rlplan.outputs.frameworks.common import PlanFacts, pools_words
from rlplan.outputs.pool_groups import PoolSpan, pool_spans


def pooled(facts: PlanFacts) -> bool:
    """Whether the plan's instance has more than one GPU pool."""
    return len(facts.instance.pools) > 1


def span(facts: PlanFacts, name: str) -> PoolSpan:
    """The pool vertex ``name`` runs on (needs :func:`pooled`)."""
    return pool_spans(facts.instance.pools)[facts.block(name).pool]


def pool_words(facts: PlanFacts, name: str) -> str:
    """``pool wide (H20)``: the pool of vertex ``name`` and its GPU type."""
    where = span(facts, name)
    return f"pool {where.name} ({where.gpu_type})"


def cluster_words(facts: PlanFacts) -> str:
    """``pools fast 1 x 1 x 2 (H100), wide 1 x 2 x 1 (H20)``: every pool, shape and GPU type."""
    return pools_words(facts.instance.pools)


def roles_words(facts: PlanFacts, roles: Sequence[tuple[str, str]]) -> str:
    """``generation on pool wide (H20), training on pool fast (H100)``.

    Parameters
    ----------
    facts
        The plan.
    roles
        (role words, vertex) pairs; vertices the plan lacks are skipped.
    """
    return ", ".join(
        f"{words} on {pool_words(facts, name)}" for words, name in roles if facts.has(name)
    )


def spans_pools(facts: PlanFacts, names: Iterable[str]) -> bool:
    """Whether the named vertices (those the plan has) run on more than one pool."""
    return len({facts.block(name).pool for name in names if facts.has(name)}) > 1


def used_nodes(facts: PlanFacts, names: Iterable[str]) -> int:
    """Nodes (over every pool) the blocks of the named vertices have GPUs on."""
    cluster = facts.problem.directory.cluster
    nodes: set[int] = set()
    for name in names:
        if facts.has(name):
            nodes.update(cluster.nodes_of(facts.block(name)))
    return len(nodes)


def used_gpus(facts: PlanFacts) -> int:
    """GPUs (over every pool) the plan's blocks cover."""
    return len({gpu for block in facts.blocks.values() for gpu in block.gpus()})
