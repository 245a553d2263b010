"""NeMo RL's cluster on one or several GPU pools, and which pool each role needs.

NeMo RL reserves ``cluster.num_nodes`` nodes of ``cluster.gpus_per_node``
GPUs (``setup`` in nemo_rl/algorithms/grpo.py, NVIDIA-NeMo/RL v0.7.0): the
policy's train cluster, generation apart (``policy.generation.colocated``)
and a reward model each a Ray placement group of ``{CPU, GPU}`` bundles
(nemo_rl/distributed/virtual_cluster.py ``RayVirtualCluster``). On several
pools the cluster is the nodes the plan uses; no setting names a GPU type.
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import PlanFacts, Settings
from rlplan.outputs.frameworks.pooled import pooled, roles_words, span, used_nodes
from rlplan.rpeg.model.frameworks.nemo_rl import RELEASE

#: The release and its commit, as the GPU-pool lines cite them.
_AT_COMMIT = f"NVIDIA-NeMo/RL {RELEASE} 81aa43dd"


#: The vertices that take GPUs of their own in NeMo RL's cluster.
_PLACED = ("actor.train", "actor.generate", "reward.infer")


def cluster(facts: PlanFacts) -> tuple[int, int, int]:
    """NeMo RL's ``cluster``: (num_nodes, gpus_per_node, its GPUs).

    One pool: the instance's cluster. Several pools: the nodes the plan's
    blocks cover, of the training pool's width (``cluster.gpus_per_node`` is
    one number, which generation apart on more than one node must match:
    ``setup`` in nemo_rl/algorithms/grpo.py asserts it; the framework rule
    ``one-node-width`` keeps the plan to pools of that width).
    """
    if not pooled(facts):
        nodes, width = facts.cluster_nodes()
        return nodes, width, facts.instance.hardware.num_gpus
    nodes = used_nodes(facts, _PLACED)
    width = span(facts, "actor.train").pool.hardware.gpus_per_node
    return nodes, width, nodes * width


def gpu_pools(facts: PlanFacts, out: Settings) -> None:
    """Which GPU pool the policy, generation and a reward model need (several pools only)."""
    if not pooled(facts):
        return
    roles = (
        ("training (the policy's train cluster)", "actor.train"),
        ("generation", "actor.generate"),
        ("the reward model", "reward.infer"),
    )
    pools = dict.fromkeys(span(facts, name).name for name in _PLACED if facts.has(name))
    starts = ", ".join(
        f"ray start --resources='{{\"{pool}\": 1}}' on pool {pool}'s nodes" for pool in pools
    )
    out.comment(
        f"{roles_words(facts, roles)}; NeMo RL cannot pin a role to a GPU type: its train and "
        "inference clusters are Ray placement groups of {CPU, GPU} bundles on any node "
        f"(nemo_rl/distributed/virtual_cluster.py RayVirtualCluster, {_AT_COMMIT}), so start "
        "the Ray cluster on the plan's nodes only; to pin them, "
        f"{starts}, and pass node_resource_constraints=[{{<pool>: 0.001}}] per node to each "
        "RayVirtualCluster in nemo_rl/algorithms/grpo.py setup (it merges them into the "
        "node's bundles; no configuration key sets them)"
    )
