"""The plan space verl can express (docs/plan-space.md#framework-plan-spaces).

Read from verl 0.9.1, the newest release on PyPI (``pip download --no-deps
verl==0.9.1``; the paths below are files of that wheel, the repository
volcengine/verl at its v0.9.1 release). ``verl.trainer.main_ppo`` runs the V1
trainer (``trainer.use_v1: true``, ``verl/trainer/ppo/v1/``) in one of three
modes (``trainer.v1.trainer_mode``): ``sync`` and ``colocate_async`` with the
rollout on the actor's GPUs (the hybrid engine), ``separate_async`` with the
rollout on a pool of its own. Its Ray resource pools
(``PPOTrainer._init_resource_pool_mgr``, verl/trainer/ppo/v1/trainer_base.py)
are the global pool (actor, rollout replicas, reference, critic), the
standalone rollout pool, and the reward model's pool; pools share no GPU.

What verl allows and the plan space keeps without a rule: ZeRO-1 (Megatron's
distributed optimizer) and ZeRO-3 (FSDP, or Megatron-FSDP with tp/pp,
``use_megatron_fsdp``, verl/workers/config/engine.py McoreEngineConfig) for
each trained model; tp, pp, and the expert and context parallel degrees
(``expert_model_parallel_size``, ``expert_tensor_parallel_size``,
``context_parallel_size`` of verl/trainer/config/engine/megatron.yaml) of the
actor, in which the reference and the critic run too (below); the rollout's
tp and expert parallel degree (``actor_rollout_ref.rollout.expert_parallel_size``
= tp x ``data_parallel_size``, which ``RolloutConfig.__post_init__`` of
verl/workers/config/rollout.py asserts: the plan space's ep GPUs sharing one
copy of the experts with ep/tp data-parallel attention ranks); recompute on or
off; training states resident or offloaded beside a colocated rollout
(``param_offload`` / ``optimizer_offload``, verl/trainer/config/engine/*.yaml,
default false); the reference offloaded
or not; any actor staleness (``trainer.v1.sampler.max_off_policy_threshold``,
an integer > 0, verl/trainer/ppo/v1/replay_buffer.py), with the rollout on
the actor's GPUs (``colocate_async``) or on its own (``separate_async``).

What no rule kind here can say (the exporter writes a "not expressible"
line when a plan does it): ``actor.infer`` and ``critic.infer`` take their
train vertex's offload flag (one ``param_offload`` per engine, read by both
its train and eval mode: verl/workers/engine/base.py ``BaseEngineCtx``); a
reward model shares no GPU with the rollout's own pool and has a pool of its
own whenever the rollout has one (``PPOTrainerSeparateAsync.__init__``
asserts ``reward.reward_model.enable_resource_pool``); a reward model on a
pool of its own stays awake (offload false); a reward model served by vLLM
takes experts tp-sharded (ep 1, etp tp) or expert parallel over ep = tp x
data-parallel ranks (etp 1), no other expert layout.

One Megatron parallel state per GPU: verl puts every role of the global pool
in one process per GPU (``create_colocated_worker_cls``,
verl/single_controller/ray/base.py: the role classes instantiated in one
``WorkerDict`` actor), and ``MegatronEngine._init_device_mesh``
(verl/workers/engine/megatron/transformer_impl.py; "TODO: set different
parallelism for actor, critic, ref") initializes Megatron's process groups
once, returning when ``mpu.is_initialized()``: the reference, built first by
``ActorRolloutRefWorker.init_model``, the actor and the critic take one tp,
pp, cp, ep and etp. Under FSDP (tp = pp = 1, no expert or context
parallelism) the tie holds by itself.
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldValues,
    FieldWhenShared,
    Framework,
    SameLayout,
    SameOrDisjoint,
    Unsupported,
)

#: The release every rule is read from.
RELEASE = "0.9.1"
_WHEEL = f"verl {RELEASE}"
#: Why every Megatron role of the global pool shares one layout.
_ONE_PARALLEL_STATE = (
    "one process per GPU for all its roles (verl/single_controller/ray/base.py "
    "create_colocated_worker_cls), whose Megatron process groups the first engine sets "
    "(verl/workers/engine/megatron/transformer_impl.py MegatronEngine._init_device_mesh "
    "returns when mpu.is_initialized())"
)

RULES = (
    Unsupported(
        name="no-online-dpo",
        words="PPO-family algorithms only (GAE, GRPO, RLOO, REINFORCE++ ...): no online DPO",
        need="an online DPO trainer (a preference loss over sampled pairs)",
        source=f"{_WHEEL} verl/trainer/ppo/core_algos.py AdvantageEstimator, register_policy_loss",
        applies=lambda instance: instance.algorithm == "dpo",
    ),
    Unsupported(
        name="no-fused-actor-critic",
        words="actor and critic are separate models: no shared backbone with a value head",
        need="a fused actor-critic worker (AC-share: one backbone, policy and value heads)",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py PPOTrainer._setup: the critic is "
            "a TrainingWorker of its own (model_type value_model)"
        ),
        applies=lambda instance: instance.fused,
    ),
    SameLayout(
        name="logprobs-on-actor",
        words="old log-probs (actor.infer) run on actor.train's GPUs in its tp, pp, dp, ep, etp "
        "and cp",
        need="old log-probs could run on other GPUs or in another layout",
        source=(
            f"{_WHEEL} verl/workers/engine_workers.py ActorRolloutRefWorker.compute_log_prob "
            "(the actor's engine, mesh 'actor')"
        ),
        leader="actor.train",
        follower="actor.infer",
    ),
    SameLayout(
        name="reference-on-global-pool",
        words=(
            "reference log-probs (reference.infer) run on actor.train's GPUs in its tp, pp, "
            "dp, ep, etp and cp (one Megatron parallel state per process; own offload)"
        ),
        need="the reference could have GPUs or Megatron process groups of its own",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py _init_resource_pool_mgr "
            "(Role.ActorRolloutRef or Role.RefPolicy -> global_pool); "
            f"{_ONE_PARALLEL_STATE}"
        ),
        leader="actor.train",
        follower="reference.infer",
    ),
    SameLayout(
        name="critic-on-global-pool",
        words=(
            "critic.train runs on actor.train's GPUs in its tp, pp, dp, ep, etp and cp (one "
            "Megatron parallel state per process; own sharding and offload)"
        ),
        need="the critic could have GPUs or Megatron process groups of its own",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py _init_resource_pool_mgr "
            f"(Role.Critic -> global_pool); {_ONE_PARALLEL_STATE}"
        ),
        leader="actor.train",
        follower="critic.train",
    ),
    SameLayout(
        name="values-on-critic",
        words="values (critic.infer) run on critic.train's GPUs in its tp, pp, dp, ep, etp and cp",
        need="values could run on other GPUs or in another layout",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py PPOTrainer._compute_values "
            "(critic_wg.infer_batch, the critic's engine)"
        ),
        leader="critic.train",
        follower="critic.infer",
    ),
    SameOrDisjoint(
        name="resource-pools",
        words=(
            "the rollout (actor.generate) and a reward model (reward.infer) each run on "
            "actor.train's GPUs or on GPUs of their own, never partly shared"
        ),
        need="a role could take part of the global pool's GPUs",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py _init_resource_pool_mgr "
            "(global_pool, reward_pool) and _setup (hybrid replicas on the global pool); "
            "verl/trainer/ppo/v1/trainer_separate_async.py (the standalone rollout pool, "
            "actor_rollout_ref.rollout.nnodes / n_gpus_per_node)"
        ),
        vertices=("actor.train", "actor.generate", "reward.infer"),
    ),
    FieldWhenShared(
        name="colocated-reward-model-sleeps",
        words="a reward model on actor.train's GPUs is offloaded between its runs",
        need="a colocated reward model could stay awake beside training",
        source=(
            f"{_WHEEL} verl/experimental/reward_loop/reward_loop.py "
            "RewardLoopManager.compute_rm_score (wake_up, then sleep, of the colocated "
            "reward model's vLLM servers)"
        ),
        vertex="reward.infer",
        other="actor.train",
        field="offload",
        allowed=frozenset({True}),
    ),
    FieldValues(
        name="reward-model-no-context-parallel",
        words="reward.infer at cp 1 (a reward model is served by vLLM, whose rollout config has "
        "no context parallel size)",
        need="context parallelism for the reward model's server",
        source=(
            f"{_WHEEL} verl/experimental/reward_loop/reward_model.py (vLLM replicas of "
            "reward.reward_model.rollout); verl/workers/config/rollout.py RolloutConfig: "
            "tensor_model_parallel_size, data_parallel_size, expert_parallel_size, "
            "pipeline_model_parallel_size, no context parallel field"
        ),
        field="cp",
        allowed=frozenset({1}),
        vertices=("reward.infer",),
    ),
    DisjointWhenStale(
        name="critic-on-policy",
        words="critic staleness 0: values come from the critic's latest weights",
        need="values could be computed with older critic weights",
        source=(
            f"{_WHEEL} verl/trainer/ppo/v1/trainer_base.py PPOTrainer._step_once (values, "
            "then the critic update, in one step). Written as critic.infer apart from "
            "critic.train when the critic is stale, which values-on-critic never allows"
        ),
        model="critic",
        first="critic.infer",
        second="critic.train",
    ),
)

FRAMEWORK = Framework(name="verl", display="verl", release=RELEASE, rules=RULES)
