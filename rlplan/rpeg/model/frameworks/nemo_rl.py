"""The plan space NeMo RL can express (docs/plan-space.md#framework-plan-spaces).

Read from NVIDIA-NeMo/RL at tag v0.7.0 (2026-07-29), the newest tag; the
``nemo-rl`` package on PyPI is a 0.0.0 placeholder, so the release is a git
checkout of that tag. Paths below are in that repository.

What NeMo RL allows without a rule: ZeRO-1 (Megatron with the distributed
optimizer) or ZeRO-3 (DTensor FSDP2) training with any tp, and pp under
Megatron; full activation checkpointing on or off; vLLM generation with any
tp and pp, ``gpu_memory_utilization`` and ``max_num_seqs``
(``policy.generation.vllm_kwargs``); any actor staleness s >= 1 as async GRPO
(``grpo.async_grpo.max_trajectory_age_steps: s``, a positive int). Mixtures of
experts: Megatron's ``expert_model_parallel_size``,
``expert_tensor_parallel_size`` and ``context_parallel_size`` of
``policy.megatron_cfg`` (nemo_rl/models/megatron/setup.py ``_apply_moe_config``
and ``_apply_parallelism_config``), which old and reference log-probs share
(their :class:`SameLayout` rules compare ep, etp and cp too), DTensor's
``dtensor_cfg.expert_parallel_size`` and ``context_parallel_size``
(nemo_rl/models/automodel/setup.py), and the rollout's
``vllm_cfg.expert_parallel_size``, a multiple of tp (vLLM's EP = DP x TP:
nemo_rl/models/generation/vllm/vllm_generation.py).

What the rule kinds cannot say yet, so the exporter writes it as a "not
expressible" line:

* without colocated generation the policy takes every GPU that generation
  and a reward model leave, and on more than one node they take whole nodes
  (``setup`` in nemo_rl/algorithms/grpo.py): the blocks tile the cluster;
* DTensor has no pipeline stages (``create_device_mesh(..., pp_size=1)`` in
  nemo_rl/models/automodel/setup.py): pp > 1 needs ZeRO-1, a rule on two
  fields of one vertex;
* apart from generation the policy's training states stay on its GPUs
  (``refit_policy_generation`` offloads only when colocated): offload false,
  the counterpart of ``train-offload-beside-rollout`` for unshared blocks;
* old and reference log-probs share one ``policy.logprob_batch_size``: equal
  micro-batches of two vertices;
* Megatron context parallelism needs sequence packing (``_apply_parallelism_config``
  asserts it), an engine setting of the instance;
* a rollout with ep above tp runs vLLM's data parallelism inside one engine,
  which ``VllmGeneration.__init__`` allows only without ``async_engine``, and
  async GRPO and vLLM pp > 1 need ``async_engine``: a rule on a field and the
  staleness;
* DTensor (ZeRO-3) has no expert tensor parallel setting: etp 1 under ZeRO-3,
  a rule on two fields of one vertex.

On a cluster of several GPU pools, generation apart and training are on
different nodes, so NeMo RL's cluster spans more than one node and
generation's nodes have ``cluster.gpus_per_node`` GPUs, the training's
number: the rule ``one-node-width`` keeps them (and the value model, on the
policy's cluster) to pools of one node width. The exporter's
``cluster.num_nodes`` is then the nodes the plan uses, over its pools.
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldValues,
    FieldWhenShared,
    Framework,
    NotSliced,
    SameBlock,
    SameLayout,
    SameNodeWidth,
    SameOrDisjoint,
    Unsupported,
)
from rlplan.rpeg.strategy import Sharding

RELEASE = "v0.7.0"
_AT = f"NVIDIA-NeMo/RL {RELEASE}"

_ALGORITHMS = (
    Unsupported(
        name="no-online-dpo",
        words="GRPO and PPO only: NeMo RL's DPO trains offline on a preference data set",
        need="an online DPO loop that samples and scores pairs every step",
        source=f"{_AT}, nemo_rl/algorithms/dpo.py (dpo_train over a preference dataloader), "
        "examples/run_dpo.py",
        applies=lambda instance: instance.algorithm == "dpo",
    ),
    Unsupported(
        name="no-fused-actor-critic",
        words="the policy and the value model are separate models (no AC-share template)",
        need="one backbone with a policy head and a value head",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (setup builds a Policy and a Value worker "
        "group), nemo_rl/models/value/lm_value.py",
        applies=lambda instance: instance.fused,
    ),
    Unsupported(
        name="ppo-recomputes-logprobs",
        words="PPO always computes old log-probs on the policy (an actor.infer vertex)",
        need="PPO reading the rollout's log-probs (engine.recompute_logprobs false)",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (ppo_train calls policy.get_logprobs every "
        "step; only grpo_train skips it under loss_fn.force_on_policy_ratio)",
        applies=lambda instance: (
            instance.algorithm == "ppo" and not instance.engine.recompute_logprobs
        ),
    ),
)

_LOGPROBS = (
    SameLayout(
        name="logprobs-on-policy",
        words="actor.infer runs on actor.train's block with its tp, pp, dp, ep, etp and cp",
        need="old log-probs could run on other GPUs or in another layout",
        source=f"{_AT}, nemo_rl/models/policy/lm_policy.py (Policy.get_logprobs on the "
        "policy's worker group), nemo_rl/algorithms/grpo.py (grpo_train)",
        leader="actor.train",
        follower="actor.infer",
    ),
    SameLayout(
        name="reference-on-policy",
        words="reference.infer runs on actor.train's block with its tp, pp, dp, ep, etp and cp",
        need="a reference worker group of its own",
        source=f"{_AT}, nemo_rl/models/policy/lm_policy.py "
        "(Policy.get_reference_policy_logprobs), use_reference_model in "
        "nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py and "
        "megatron_policy_worker.py (the reference weights swapped into the policy's model)",
        leader="actor.train",
        follower="reference.infer",
    ),
    FieldValues(
        name="reference-on-host",
        words="reference.infer has offload true: its weights stay in host memory and are "
        "copied in for each pass",
        need="reference weights kept on the GPUs",
        source=f"{_AT}, nemo_rl/models/automodel/setup.py (setup_reference_model_state: "
        "get_cpu_state_dict(..., pin_memory=True)), megatron_policy_worker.py "
        "(use_reference_model)",
        field="offload",
        allowed=frozenset({True}),
        vertices=("reference.infer",),
        fixed=True,
    ),
    FieldValues(
        name="logprobs-use-policy-weights",
        words="actor.infer has offload false: it reads the policy's own weights, whose moves "
        "to and from the host are actor.train's offload",
        need="a log-prob copy of the weights kept apart from the policy's",
        source=f"{_AT}, prepare_for_lp_inference in "
        "nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py and megatron_policy_worker.py",
        field="offload",
        allowed=frozenset({False}),
        vertices=("actor.infer",),
        fixed=True,
    ),
)

_GENERATION = (
    SameOrDisjoint(
        name="generation-colocated-or-apart",
        words="actor.generate runs on actor.train's block or on GPUs it does not share",
        need="generation on part of the policy's GPUs",
        source=f"{_AT}, nemo_rl/algorithms/grpo.py (setup: policy.generation.colocated.enabled "
        "gives one RayVirtualCluster for both, otherwise a cluster of their own each)",
        vertices=("actor.generate", "actor.train"),
    ),
    FieldWhenShared(
        name="train-offload-beside-rollout",
        words="actor.train has offload true when it shares GPUs with actor.generate",
        need="training states that stay on the GPUs beside a sleeping rollout",
        source=f"{_AT}, nemo_rl/algorithms/grpo.py (refit_policy_generation calls "
        "policy.offload_before_refit and offload_after_refit when colocated)",
        vertex="actor.train",
        other="actor.generate",
        field="offload",
        allowed=frozenset({True}),
    ),
    SameNodeWidth(
        name="one-node-width",
        words="actor.train, actor.generate and critic.train run on pools of one GPUs per node "
        "(cluster.gpus_per_node)",
        need="a GPUs-per-node setting per cluster role (training, generation, value model)",
        source=f"{_AT}, nemo_rl/algorithms/grpo.py (setup: the train cluster takes "
        "cluster.gpus_per_node per node, and generation apart on more than one node asserts "
        "policy.generation.colocated.resources.gpus_per_node == cluster.gpus_per_node), "
        "nemo_rl/algorithms/ppo.py (setup: one cluster of cluster.gpus_per_node per node)",
        vertices=("actor.train", "actor.generate", "critic.train"),
    ),
    NotSliced(
        name="generation-on-one-node-or-whole-nodes",
        words="actor.generate and actor.train take no sliced block: apart, generation takes "
        "GPUs of one node or whole nodes, and the policy the rest",
        need="generation on part of each of several nodes",
        source=f"{_AT}, nemo_rl/algorithms/grpo.py (setup: generation apart gets "
        "generation.colocated.resources gpus_per_node on one node, whole nodes on more)",
        vertices=("actor.generate", "actor.train"),
    ),
    DisjointWhenStale(
        name="async-generation-apart",
        words="with actor staleness 1 or more, actor.generate shares no GPU with actor.train",
        need="async GRPO with colocated generation",
        source=f"{_AT}, nemo_rl/algorithms/grpo.py (async_grpo_train asserts not "
        "colocated_inference)",
        model="actor",
        first="actor.generate",
        second="actor.train",
    ),
)

#: No kind says "shares no GPU"; a :class:`FieldWhenShared` rule allowing no
#: value says it exactly (any shared GPU breaks it).
_REWARD = (
    FieldWhenShared(
        name="reward-model-apart-from-policy",
        words="reward.infer shares no GPU with actor.train",
        need="a reward model on the policy's GPUs",
        source=f"{_AT}, nemo_rl/environments/reward_model_environment.py (its own "
        "RayVirtualCluster from env.reward_model.resources), nemo_rl/algorithms/grpo.py "
        "(setup subtracts those GPUs from the policy's)",
        vertex="reward.infer",
        other="actor.train",
        field="offload",
        allowed=frozenset(),
    ),
    FieldWhenShared(
        name="reward-model-apart-from-generation",
        words="reward.infer shares no GPU with actor.generate",
        need="a reward model on the rollout's GPUs",
        source=f"{_AT}, nemo_rl/environments/reward_model_environment.py (RayVirtualCluster "
        "grpo_reward_model_cluster), nemo_rl/algorithms/grpo.py (setup)",
        vertex="reward.infer",
        other="actor.generate",
        field="offload",
        allowed=frozenset(),
    ),
    FieldValues(
        name="reward-model-dtensor",
        words="reward.infer has pp 1 (the reward model runs under DTensor)",
        need="a Megatron reward model",
        source=f"{_AT}, nemo_rl/environments/reward_model_environment.py (asserts "
        "dtensor_cfg.enabled), nemo_rl/models/automodel/setup.py (create_device_mesh pp_size=1)",
        field="pp",
        allowed=frozenset({1}),
        vertices=("reward.infer",),
    ),
    FieldValues(
        name="reward-model-resident",
        words="reward.infer has offload false",
        need="a reward model offloaded between passes",
        source=f"{_AT}, nemo_rl/environments/reward_model_environment.py (asserts not "
        "dtensor_cfg.cpu_offload; the environment's Policy is never moved to the host)",
        field="offload",
        allowed=frozenset({False}),
        vertices=("reward.infer",),
        fixed=True,
    ),
)

_VALUE = (
    SameBlock(
        name="value-on-policy-cluster",
        words="critic.train runs on actor.train's block",
        need="a value model on GPUs of its own",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (setup: Value(cluster=train_cluster))",
        leader="actor.train",
        follower="critic.train",
    ),
    SameBlock(
        name="ppo-generation-colocated",
        words="in PPO, actor.generate runs on critic.train's block (the policy's)",
        need="PPO with generation on GPUs of its own",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (setup asserts "
        "policy.generation.colocated.enabled: 'Non-colocated PPO is not yet supported')",
        leader="critic.train",
        follower="actor.generate",
    ),
    SameLayout(
        name="values-on-value-workers",
        words="critic.infer runs on critic.train's block with its tp, pp, dp, ep, etp and cp",
        need="values computed on other GPUs or in another layout",
        source=f"{_AT}, nemo_rl/models/value/lm_value.py (Value.get_values on the value "
        "model's worker group)",
        leader="critic.train",
        follower="critic.infer",
    ),
    FieldValues(
        name="value-model-on-host",
        words="critic.train and critic.infer have offload true: the value model goes to the "
        "host after each pass",
        need="a value model kept on the GPUs",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (value_model.finish_training and "
        "finish_inference), nemo_rl/models/value/workers/megatron_value_worker.py",
        field="offload",
        allowed=frozenset({True}),
        vertices=("critic.train", "critic.infer"),
        fixed=True,
    ),
    FieldValues(
        name="value-model-packs-under-megatron",
        words="critic.train has sharding zero1: a ZeRO-3 (DTensor) value model cannot pack "
        "sequences",
        need="sequence packing for the DTensor value model",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (setup asserts "
        "value.sequence_packing.enabled is False unless value.megatron_cfg.enabled)",
        field="sharding",
        allowed=frozenset({Sharding.ZERO1}),
        vertices=("critic.train",),
    ),
    DisjointWhenStale(
        name="value-on-policy",
        words="critic staleness 0 (PPO is synchronous: with the rollout on the value model's "
        "GPUs a stale critic breaks this rule)",
        need="an off-policy value model",
        source=f"{_AT}, nemo_rl/algorithms/ppo.py (ppo_train: generation, values and "
        "training in turn each step; no async_ppo section in examples/configs/ppo_math_1B.yaml)",
        model="critic",
        first="critic.train",
        second="actor.generate",
    ),
)

FRAMEWORK = Framework(
    name="nemo-rl",
    display="NeMo RL",
    release=RELEASE,
    rules=_ALGORITHMS + _LOGPROBS + _GENERATION + _REWARD + _VALUE,
)
