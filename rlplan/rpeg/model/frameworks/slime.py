"""The plan space slime can express (docs/plan-space.md#framework-plan-spaces).

Read from THUDM/slime at tag v0.3.1 (commit a6272da0d4f3, 2026-08-06), its newest
release; ``main`` at 624b824 (2026-08-21) changes none of the facts below. slime
is not on PyPI under its name: ``pip download slime`` fetches an unrelated
statistics package (slime 0.0.0, zhengp0/SLIME). The GitHub tag is the source.

slime trains with Megatron-LM (``train.py``, ``train_async.py``) and generates with
SGLang. Its GPUs are one Ray placement group (``slime/ray/placement_group.py``
``_get_placement_group_layout``): the Megatron actor on
``--actor-num-nodes`` x ``--actor-num-gpus-per-node`` GPUs, the SGLang engines on
``--rollout-num-gpus`` GPUs after them, or on the same GPUs from GPU 0 with
``--colocate``. Both layouts (and a rollout pool larger or smaller than the
actor's under ``--colocate``) put the rollout's and the actor's GPUs nested or
apart; runs of nodes that overlap in part (``placement.node_blocks: any``, the
actor on nodes 0-2 and the rollout on nodes 1-3) are not a slime layout. What
the rules below remove:

- a rollout sharing only part of its GPUs with the actor's;
- every Megatron pass runs on the actor's model, on its GPUs and in its
  layout: old log-probs, reference log-probs (the reference's weights kept in
  host memory and copied into the actor's parameters), and, for PPO, the
  critic, which shares the actor's GPUs and topology;
- PPO offloads the training states of actor and critic; the critic's values
  are always the current critic's;
- staleness 0 (``train.py``) or 1 (``train_async.py``, which refuses
  ``--colocate``);
- a served reward model takes GPU slots of its own in the rollout pool;
- the Megatron distributed optimizer (ZeRO-1) is always on, no ZeRO-3;
- no online DPO and no fused actor-critic.

Free in slime, so without a rule: Megatron tp, pp and dp and recompute;
rollout tp (``--rollout-num-gpus-per-engine``), pp (``--sglang-pp-size``) and dp
(engines = rollout GPUs / GPUs per engine); ``gpu_memory_utilization``
(``--sglang-mem-fraction-static``); ``max_num_seqs``
(``--sglang-max-running-requests``); offload of ``actor.train`` beside a
colocated rollout (``--colocate --no-offload-train`` is accepted since v0.2.0,
commit 2a39921, and used by scripts/run-qwen3-4B-amd.sh); rule rewards
(``--rm-type``, ``--custom-rm-path``); no reference model (KL-free runs load
none: ``with_ref`` needs ``--kl-coef`` or ``--use-kl-loss``).
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldValues,
    FieldWhenShared,
    Framework,
    NestedOrDisjoint,
    SameLayout,
    StalenessValues,
    Unsupported,
)
from rlplan.rpeg.strategy import Sharding
from rlplan.rpeg.templates import Kind

#: The release the rules are read from.
RELEASE = "v0.3.1"
_AT = f"THUDM/slime {RELEASE}"
#: Where PPO's offload, the critic's GPUs and the algorithms are decided.
_VALIDATE = f"{_AT} slime/utils/arguments.py slime_validate_args"
#: The Megatron worker: log-probs, reference, values and training.
_ACTOR = f"{_AT} slime/backends/megatron_utils/actor.py MegatronTrainRayActor"

ONLINE_DPO = Unsupported(
    name="no-online-dpo",
    words="no online DPO: the losses are policy-gradient (GRPO, GSPO, CISPO, REINFORCE++, PPO) "
    "or SFT",
    need="an online DPO loss over pairs of rollouts (only writable as a custom loss)",
    source=f"{_AT} slime/utils/arguments.py --advantage-estimator choices grpo, gspo, cispo, "
    "reinforce_plus_plus, reinforce_plus_plus_baseline, ppo; --loss-type policy_loss, "
    "sft_loss, custom_loss",
    applies=lambda instance: instance.algorithm == "dpo",
)

FUSED_ACTOR_CRITIC = Unsupported(
    name="no-fused-actor-critic",
    words="no fused actor-critic (AC-share): the critic is a Megatron model of its own with "
    "its own value head, optimizer and checkpoint",
    need="one model with a policy and a value head trained by one loss",
    source=f"{_AT} slime/ray/placement_group.py create_training_models (a second "
    "RayTrainGroup, role critic); slime/backends/megatron_utils/model_provider.py "
    "(role critic: value output layer)",
    applies=lambda instance: instance.fused,
)

LOGPROBS_ON_ACTOR = SameLayout(
    name="logprobs-on-actor",
    words="actor.infer (old log-probs) runs on actor.train's GPUs with its tp, pp and dp: "
    "a forward pass of the training model",
    need="old log-probs on GPUs or in a layout of their own",
    source=f"{_ACTOR}.train_actor: compute_log_prob(store_prefix='') is forward_only on self.model",
    leader="actor.train",
    follower="actor.infer",
)

REFERENCE_ON_ACTOR = SameLayout(
    name="reference-on-actor",
    words="reference.infer runs on actor.train's GPUs with its tp, pp and dp: the reference's "
    "weights are swapped into the actor's Megatron model",
    need="a reference model on GPUs or in a layout of its own",
    source=f"{_ACTOR}.init: load_other_checkpoint('ref', args.ref_load); train_actor: "
    "_switch_model('ref') then compute_log_prob(store_prefix='ref_')",
    leader="actor.train",
    follower="reference.infer",
)

REFERENCE_ON_HOST = FieldValues(
    name="reference-on-host",
    words="reference.infer offload true: the reference's weights live in pinned host memory "
    "and are copied into the actor's parameters before each reference pass",
    need="reference weights resident on the GPUs",
    source=f"{_AT} slime/utils/tensor_backper.py _TensorBackuperNormal.backup "
    "(torch.empty_like(..., device='cpu', pin_memory=True)) and restore",
    field="offload",
    allowed=frozenset({True}),
    vertices=("reference.infer",),
    fixed=True,
)

CRITIC_ON_ACTOR = SameLayout(
    name="critic-on-actor",
    words="critic.train runs on actor.train's GPUs with its tp, pp and dp (slime v0.3.0 "
    "on; v0.2.x gave the critic GPUs of its own)",
    need="a critic on GPUs or in a layout of its own",
    source=f"{_VALIDATE}: critic_num_nodes, critic_num_gpus_per_node = the actor's; "
    "slime/ray/placement_group.py create_placement_groups: result['critic'] = "
    "result['actor']; docs/en/advanced/megatron-config.md: actor and critic must use the "
    "same Megatron parallel topology (since v0.3.0, commit 75af529)",
    leader="actor.train",
    follower="critic.train",
)

VALUES_ON_CRITIC = SameLayout(
    name="values-on-critic",
    words="critic.infer (values) runs on critic.train's GPUs with its tp, pp and dp: a "
    "forward pass of the critic just before it trains",
    need="values computed on GPUs or in a layout of their own",
    source=f"{_ACTOR}.train_critic: forward_only(get_values, ..., self.model) before train",
    leader="critic.train",
    follower="critic.infer",
)

PPO_OFFLOADS_CRITIC = FieldValues(
    name="ppo-offloads-critic",
    words="critic.train and critic.infer offload true: PPO sets --offload-train, so the "
    "critic's states leave the GPUs outside its train call",
    need="a critic whose states stay on the GPUs",
    source=f"{_VALIDATE}: if args.use_critic: args.offload_train = True",
    field="offload",
    allowed=frozenset({True}),
    vertices=("critic.train", "critic.infer"),
    fixed=True,
)

PPO_OFFLOADS_ACTOR = FieldWhenShared(
    name="ppo-offloads-actor",
    words="actor.train offload true beside critic.train: PPO sets --offload-train, so actor "
    "and critic take turns on their shared GPUs",
    need="PPO actor states that stay on the GPUs beside the critic",
    source=f"{_VALIDATE}: if args.use_critic: args.offload_train = True",
    vertex="actor.train",
    other="critic.train",
    field="offload",
    allowed=frozenset({True}),
)

# Exact with values-on-critic (critic.infer always on critic.train's block): a
# critic staleness of 1 or more is refused. A per-model StalenessValues would
# say it directly.
CRITIC_ON_POLICY = DisjointWhenStale(
    name="critic-on-policy",
    words="critic staleness 0: values come from the current critic, computed just before it "
    "trains, in train.py and train_async.py alike",
    need="values from an older critic",
    source=f"{_ACTOR}.train_critic (get_values, then train, in one call); train.py and "
    "train_async.py: critic_model.async_train every step",
    model="critic",
    first="critic.infer",
    second="critic.train",
)

STALENESS = StalenessValues(
    name="staleness-0-or-1",
    words="staleness 0 (train.py) or 1 (train_async.py: the next rollout is generated while "
    "the current one trains, the weights updated every step)",
    need="a fixed staleness of 2 or more (train_async.py with --update-weights-interval k "
    "alternates 1 to k; the fully async rollout mixes weight versions)",
    source=f"{_AT} train.py; train_async.py (rollout_manager.generate.remote(rollout_id + 1) "
    "before training rollout_id; update_weights when (rollout_id + 1) % "
    "--update-weights-interval == 0, default 1)",
    allowed=frozenset({0, 1}),
)

ASYNC_ROLLOUT_APART = DisjointWhenStale(
    name="async-rollout-apart",
    words="off-policy, actor.generate shares no GPU with actor.train: train_async.py refuses "
    "--colocate, and the rollout GPUs come after the Megatron GPUs",
    need="asynchronous training beside a colocated rollout",
    source=f"{_AT} train_async.py: assert not args.colocate; slime/ray/placement_group.py "
    "_get_placement_group_layout",
    model="actor",
    first="actor.generate",
    second="actor.train",
)

ASYNC_REWARD_APART = DisjointWhenStale(
    name="async-reward-apart",
    words="off-policy, reward.infer shares no GPU with actor.train: without --colocate every "
    "SGLang server group, a served reward model's too, lies in the rollout GPUs after the "
    "Megatron GPUs",
    need="a reward model on the training GPUs in asynchronous training",
    source=f"{_AT} train_async.py: assert not args.colocate; slime/ray/rollout.py "
    "_compute_rollout_offset and start_rollout_servers",
    model="actor",
    first="reward.infer",
    second="actor.train",
)

ROLLOUT_NESTED_OR_APART = NestedOrDisjoint(
    name="rollout-nested-or-apart",
    words="actor.generate and actor.train run on nested blocks or share no GPU: the rollout's "
    "server groups start after the Megatron GPUs, or at GPU 0 with them under --colocate",
    need="a rollout sharing only part of its GPUs with the actor's",
    source=f"{_AT} slime/ray/placement_group.py _get_placement_group_layout; "
    "slime/ray/rollout.py _compute_rollout_offset",
    vertices=("actor.generate", "actor.train"),
)

# A Disjoint(first, second) kind would say this directly: no value of the field
# is allowed where the two blocks share a GPU, so they never do.
REWARD_APART_FROM_ROLLOUT = FieldWhenShared(
    name="reward-apart-from-rollout",
    words="reward.infer shares no GPU with actor.generate: a reward model is served as its own "
    "SGLang server group (--sglang-config, update_weights false, scored by a --custom-rm-path "
    "function) on GPU slots of its own, or outside slime (--rm-type remote_rm, --rm-url)",
    need="reward model engines on the rollout engines' GPUs",
    source=f"{_AT} slime/ray/rollout.py start_rollout_servers (gpu_offset += num_gpus per "
    "server group); slime/backends/sglang_utils/sglang_config.py ModelConfig; "
    "slime/rollout/rm_hub/__init__.py remote_rm",
    vertex="reward.infer",
    other="actor.generate",
    field="offload",
    allowed=frozenset(),
)

DISTRIBUTED_OPTIMIZER = FieldValues(
    name="distributed-optimizer",
    words="train sharding zero1: Megatron's distributed optimizer is always on, and Megatron is "
    "the only train backend (the FSDP backend was removed in v0.2.3)",
    need="ZeRO-3 training (Megatron-FSDP or an FSDP backend)",
    source=f"{_AT} slime/backends/megatron_utils/arguments.py _set_default_megatron_args: "
    "args.use_distributed_optimizer = True; slime/utils/arguments.py _pre_parse_mode: "
    "--train-backend choices ['megatron'] (FSDP removed in commit e4faf63)",
    field="sharding",
    allowed=frozenset({Sharding.ZERO1}),
    kinds=(Kind.TRAIN,),
    fixed=True,
)

FRAMEWORK = Framework(
    name="slime",
    display="slime",
    release=RELEASE,
    rules=(
        ONLINE_DPO,
        FUSED_ACTOR_CRITIC,
        LOGPROBS_ON_ACTOR,
        REFERENCE_ON_ACTOR,
        REFERENCE_ON_HOST,
        CRITIC_ON_ACTOR,
        VALUES_ON_CRITIC,
        PPO_OFFLOADS_CRITIC,
        PPO_OFFLOADS_ACTOR,
        CRITIC_ON_POLICY,
        STALENESS,
        ROLLOUT_NESTED_OR_APART,
        ASYNC_ROLLOUT_APART,
        ASYNC_REWARD_APART,
        REWARD_APART_FROM_ROLLOUT,
        DISTRIBUTED_OPTIMIZER,
    ),
)
