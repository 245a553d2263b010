"""OpenRLHF's Ray groups on a cluster of several GPU pools: which pool each group needs.

Each OpenRLHF group (the actor, reference, reward and critic DeepSpeed groups
and the vLLM engines) is a Ray placement group of ``{"GPU": 1, "CPU": 1}``
bundles under the ``PACK`` strategy (OpenRLHF/OpenRLHF v0.11.0, 3c3be623:
openrlhf/cli/train_ppo_ray.py, openrlhf/trainer/ray/launcher.py
``PPORayActorGroup``, openrlhf/trainer/ray/vllm_engine.py
``create_vllm_engines``). No flag names a GPU type, so Ray may put a group on
any node with free GPUs; the export names each group's pool and GPU type.
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import PlanFacts, Settings
from rlplan.outputs.frameworks.pooled import cluster_words, pooled, roles_words, span, used_gpus

#: Group -> its words in the pool line.
_WORDS = {
    "vllm": "the vLLM engines",
    "actor": "the actor group",
    "ref": "the reference group",
    "reward": "the reward group",
    "critic": "the critic group",
}
#: Where the groups' bundles are built (the release and commit read).
_BUNDLES = (
    "openrlhf/cli/train_ppo_ray.py, openrlhf/trainer/ray/launcher.py and "
    "openrlhf/trainer/ray/vllm_engine.py build them; OpenRLHF/OpenRLHF v0.11.0 3c3be623"
)


def cluster_line(facts: PlanFacts, out: Settings) -> bool:
    """The Ray cluster comment of a pooled instance; False (nothing written) for one pool."""
    if not pooled(facts):
        return False
    out.comment(
        f"cluster: the nodes of {cluster_words(facts)} in one Ray cluster (ray start --head "
        "on one node, ray start --address <head>:6379 on the others, each with its pool's "
        f"--num-gpus); the plan uses {used_gpus(facts)} of its GPUs"
    )
    return True


def pool_lines(facts: PlanFacts, out: Settings, anchors: dict[str, str]) -> None:
    """Which pool each group needs and how to pin it (several pools only)."""
    if not pooled(facts):
        return
    roles = [(_WORDS[group], name) for group, name in anchors.items()]
    pools = dict.fromkeys(span(facts, name).name for _, name in roles)
    starts = ", ".join(
        f"ray start --resources='{{\"{pool}\": 1}}' on pool {pool}'s nodes" for pool in pools
    )
    out.comment(
        f"{roles_words(facts, roles)}: OpenRLHF cannot pin a group to a GPU type (each is a "
        f"placement group of {{GPU, CPU}} bundles, PACK, on any node: {_BUNDLES}); to pin "
        f"them, {starts}, and add {{<pool>: 0.001}} to each group's bundles in code"
    )
