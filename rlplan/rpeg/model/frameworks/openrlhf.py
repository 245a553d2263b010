"""The plan space OpenRLHF can express (docs/plan-space.md#framework-plan-spaces).

Read from OpenRLHF/OpenRLHF at tag v0.11.0 (commit 3c3be623, 2026-08-13;
PyPI ``openrlhf==0.11.0``), the newest release, with the vLLM it pins
(``vllm==0.27.1``, setup.py extras ``vllm``). ``python3 -m
openrlhf.cli.train_ppo_ray`` runs every model as a Ray group of DeepSpeed
workers (actor, ``ref``, ``reward``, critic) and the rollout as vLLM engines.

What OpenRLHF allows without a rule (so none is written):

* sharding: ``--ds.zero_stage`` 1 (zero1) or 3 (zero3), and recompute:
  ``--actor.gradient_checkpointing_enable`` (none or full);
* rollout tp: ``--vllm.tensor_parallel_size``, any dp (``--vllm.num_engines``),
  any ``--vllm.gpu_memory_utilization``; mixtures of experts run with every
  expert on each DeepSpeed rank and tp-sharded experts in vLLM (ep 1: rules
  ``deepspeed-no-ep``, ``rollout-no-ep``; etp divides tp = 1);
* actor staleness s >= 0: s = 0 is the synchronous trainer, s >= 1
  ``--train.async_enable --train.async_queue_size s`` (the generator takes one
  of s slots per batch and the trainer frees one when it starts a batch,
  openrlhf/trainer/ppo_trainer_async.py, so generation of step t waits for the
  training of step t - 1 - s);
* training states resident beside a colocated rollout: ``--ds.enable_sleep``
  is a flag of its own, so ``offload: false`` with ``--train.colocate_all``
  runs (no :class:`FieldWhenShared` rule);
* reference and reward models on GPUs: groups of their own, or colocated
  through ``--train.colocate_actor_ref`` / ``--train.colocate_critic_reward``
  / ``--train.colocate_all``; ``--ref.offload`` and ``--reward.offload``.

Facts the rule kinds cannot say yet (the exporter writes them as "not
expressible" lines): which groups may share GPUs (an actor sharing with the
critic or reward model needs ``--train.colocate_all``, which also puts the
reference and, synchronously, the rollout on the actor's GPUs); one
``--train.micro_batch_size``, ``--ds.zero_stage``, recompute and offload for
actor and critic, and one ``--rollout.micro_batch_size`` for every log-prob,
reference, reward and value pass; ``--ref.offload`` / ``--reward.offload``
acting only under ZeRO-3.
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldValues,
    Framework,
    SameLayout,
    SameOrDisjoint,
    Unsupported,
)
from rlplan.rpeg.templates import Kind

#: The release every rule is read from.
RELEASE = "v0.11.0"
#: Where, in one phrase: the repository, the tag and its commit.
AT = "OpenRLHF/OpenRLHF v0.11.0 (3c3be623)"
#: The script whose flags and start-up checks most rules cite.
CLI = f"{AT} openrlhf/cli/train_ppo_ray.py"
#: The vertices each DeepSpeed group runs, and the rollout (their blocks are the groups' GPUs).
GROUP_VERTICES = (
    "actor.generate",
    "actor.train",
    "reference.infer",
    "reward.infer",
    "critic.train",
)
#: The rollout's max_num_seqs: OpenRLHF sets none, so vLLM 0.27.1's engine default applies.
VLLM_MAX_NUM_SEQS = 128
#: The DeepSpeed-run kinds (every vertex but the rollout).
DEEPSPEED_KINDS = (Kind.TRAIN, Kind.INFER)

_ALGORITHMS = (
    Unsupported(
        name="no-online-dpo",
        words="PPO-family algorithms only (PPO, GRPO, REINFORCE++, RLOO); no online DPO",
        need="an online DPO trainer (the DPO loss on pairs the rollout samples)",
        source=(
            f"{CLI} --algo.advantage.estimator choices gae, reinforce, rloo, "
            "reinforce_baseline, group_norm, dr_grpo; openrlhf/cli/train_dpo.py trains on a "
            "fixed preference dataset (offline DPO)"
        ),
        applies=lambda instance: instance.algorithm == "dpo",
    ),
    Unsupported(
        name="no-fused-actor-critic",
        words="actor and critic are separate models (no AC-share plan)",
        need="a value head on the actor's backbone (one model, policy and value losses)",
        source=(
            f"{CLI} train(): PolicyModelActor and CriticModelActor are separate RayActorGroups, "
            "the critic loaded from --critic.model_name_or_path"
        ),
        applies=lambda instance: instance.fused,
    ),
    Unsupported(
        name="logprobs-recomputed",
        words="old log-probs are always recomputed by actor.infer (engine.recompute_logprobs)",
        need="old log-probs taken from the rollout engine instead of a forward of the actor",
        source=(
            f"{AT} openrlhf/trainer/ppo_utils/experience_maker.py make_experience: the actor "
            "group's forward runs on every batch (action_log_probs)"
        ),
        applies=lambda instance: not instance.engine.recompute_logprobs,
    ),
)

_STRATEGIES = (
    FieldValues(
        name="rollout-no-pp",
        words="actor.generate at pp 1 (vLLM engines are tensor parallel only)",
        need="a pipeline-parallel flag for the vLLM engines",
        source=(
            f"{AT} openrlhf/trainer/ray/vllm_engine.py create_vllm_engines: tensor_parallel_size "
            "and no pipeline_parallel_size"
        ),
        field="pp",
        allowed=frozenset({1}),
        vertices=("actor.generate",),
    ),
    FieldValues(
        name="rollout-max-num-seqs",
        words="actor.generate at max_num_seqs 128 (vLLM's engine default: no flag sets it)",
        need="a --vllm max_num_seqs flag",
        source=(
            f"{AT} openrlhf/trainer/ray/vllm_engine.py LLMRayActor: AsyncEngineArgs without "
            "max_num_seqs, AsyncLLMEngine.from_engine_args (usage context ENGINE_CONTEXT); vLLM "
            "0.27.1 vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args "
            "falls back to SchedulerConfig.DEFAULT_MAX_NUM_SEQS = 128 (vllm/config/scheduler.py)"
        ),
        field="max_num_seqs",
        allowed=frozenset({VLLM_MAX_NUM_SEQS}),
        vertices=("actor.generate",),
        fixed=True,
    ),
    FieldValues(
        name="deepspeed-no-pp",
        words="train and infer vertices at pp 1 (DeepSpeed groups have no pipeline stages)",
        need="pipeline parallelism in the DeepSpeed models",
        source=(
            f"{AT} openrlhf/utils/deepspeed/deepspeed.py DeepspeedStrategy.setup_distributed: "
            "device mesh (dp, sp, tp), no pipeline dimension"
        ),
        field="pp",
        allowed=frozenset({1}),
        kinds=DEEPSPEED_KINDS,
    ),
    FieldValues(
        name="deepspeed-tp-1",
        words=(
            "train and infer vertices at tp 1 (OpenRLHF has one --ds.tensor_parallel_size for "
            "every DeepSpeed model; tp above 1 is left out since no rule ties tp across vertices)"
        ),
        need="tp tied across the actor, reference, reward and critic (one DeepSpeed tp flag)",
        source=(
            f"{CLI} --ds.tensor_parallel_size (every RayActorGroup takes duplicate_actors = "
            "ring_attn_size * tensor_parallel_size)"
        ),
        field="tp",
        allowed=frozenset({1}),
        kinds=DEEPSPEED_KINDS,
    ),
    FieldValues(
        name="deepspeed-no-ep",
        words=(
            "train and infer vertices at ep 1 (a DeepSpeed model holds every expert: "
            "transformers' MoE layers, no expert parallel group)"
        ),
        need="expert parallelism in the DeepSpeed models",
        source=(
            f"{AT} openrlhf/utils/deepspeed/deepspeed.py DeepspeedStrategy.setup_distributed: "
            "device mesh (dp, sp, tp), no expert dimension; train_ppo_ray.py "
            "--ds.experts_implementation picks how experts compute (eager, batched_mm, "
            "grouped_mm, deepgemm), not where"
        ),
        field="ep",
        allowed=frozenset({1}),
        kinds=DEEPSPEED_KINDS,
    ),
    FieldValues(
        name="deepspeed-cp-1",
        words=(
            "train and infer vertices at cp 1 (OpenRLHF has one --ds.ring_attn_size for every "
            "DeepSpeed model; cp above 1 is left out since no rule ties cp across vertices)"
        ),
        need="cp tied across the actor, reference, reward and critic (one ring attention flag)",
        source=(
            f"{CLI} --ds.ring_attn_size ('Context Parallel', default 1; above 1 sets "
            "--ds.packing_samples), the sp dimension of DeepspeedStrategy.setup_distributed's "
            "mesh (openrlhf/utils/deepspeed/deepspeed.py)"
        ),
        field="cp",
        allowed=frozenset({1}),
        kinds=DEEPSPEED_KINDS,
    ),
    FieldValues(
        name="rollout-no-ep",
        words="actor.generate at ep 1 (vLLM engines shard experts over tp: no expert parallel "
        "flag)",
        need="a --vllm flag for vLLM's enable_expert_parallel (and data-parallel attention)",
        source=(
            f"{AT} openrlhf/trainer/ray/vllm_engine.py create_vllm_engines: the engine "
            "arguments name tensor_parallel_size, no enable_expert_parallel or "
            "data_parallel_size; vllm-project/vllm vllm/config/parallel.py "
            "ParallelConfig.enable_expert_parallel defaults to False ('Use expert parallelism "
            "instead of tensor parallelism for MoE layers')"
        ),
        field="ep",
        allowed=frozenset({1}),
        vertices=("actor.generate",),
    ),
    FieldValues(
        name="logprobs-resident",
        words="actor.infer and critic.infer at offload false (they use their group's weights)",
        need="the actor's and critic's weights offloaded around their forward passes",
        source=(
            f"{CLI} offload flags --ref.offload and --reward.offload only; --ds.enable_sleep "
            "offloads optimizer states, gradients and fp32 weights but keeps the bf16 weights "
            "(openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, lp_params "
            "left out)"
        ),
        field="offload",
        allowed=frozenset({False}),
        vertices=("actor.infer", "critic.infer"),
        fixed=True,
    ),
)

_PLACEMENT = (
    SameLayout(
        name="logprobs-on-actor",
        words="actor.infer on actor.train's GPUs with its tp, pp, dp, ep, etp and cp",
        need="log-probs could run on other GPUs (a log-prob worker group of their own)",
        source=(
            f"{AT} openrlhf/trainer/ppo_utils/experience_maker.py make_experience: "
            "action_log_probs from actor_model_group, the PolicyModelActor group that trains"
        ),
        leader="actor.train",
        follower="actor.infer",
    ),
    SameLayout(
        name="values-on-critic",
        words="critic.infer on critic.train's GPUs with its tp, pp, dp, ep, etp and cp",
        need="values could run on other GPUs (a value worker group of their own)",
        source=(
            f"{AT} openrlhf/trainer/ppo_utils/experience_maker.py make_experience: values "
            "from critic_model_group, the CriticModelActor group that trains"
        ),
        leader="critic.train",
        follower="critic.infer",
    ),
    SameOrDisjoint(
        name="whole-groups",
        words=(
            "the rollout, actor, reference, reward and critic groups each share all of their "
            "GPUs or none"
        ),
        need="groups sharing part of their GPUs",
        source=(
            f"{AT} openrlhf/trainer/ray/launcher.py RayActorGroup: a placement group of its "
            "own per group, or rank i on bundle i of the shared one; train_ppo_ray.py asserts "
            "colocated groups have equal num_nodes and num_gpus_per_node, and vLLM engines x "
            "tp = actor GPUs under --train.colocate_all"
        ),
        vertices=GROUP_VERTICES,
    ),
)


def _async_apart(other: str) -> DisjointWhenStale:
    """actor.generate and ``other`` share no GPU under async training."""
    return DisjointWhenStale(
        name=f"async-rollout-apart-from-{other.split('.')[0]}",
        words=f"with actor staleness 1 or more, actor.generate shares no GPU with {other}",
        need="async training with the rollout sleeping on the training GPUs",
        source=(
            f"{CLI} train(): the vLLM engines get the shared placement group only if "
            "colocate_all and not async_enable ('Using --colocate_all_models in async RLHF only "
            "colocates DeepSpeed models'); 'Async RLHF is not supported with --vllm.enable_sleep'"
        ),
        model="actor",
        first="actor.generate",
        second=other,
    )


_STALENESS = (
    *(_async_apart(name) for name in GROUP_VERTICES[1:]),
    DisjointWhenStale(
        name="critic-on-policy",
        words=(
            "critic staleness 0: values come from the critic as trained up to the last step "
            "(with values-on-critic, a stale critic would need critic.infer apart from "
            "critic.train)"
        ),
        need="values from a critic that lags (critic.infer while critic.train trains)",
        source=(
            f"{AT} openrlhf/trainer/ppo_trainer.py BasePPOTrainer.train_step: make_experience "
            "(values) then ppo_train (critic fit) in one step; in async mode the generator "
            "only samples (ppo_trainer_async.py GenerateSamplesActor)"
        ),
        model="critic",
        first="critic.train",
        second="critic.infer",
    ),
)

FRAMEWORK = Framework(
    name="openrlhf",
    display="OpenRLHF",
    release=RELEASE,
    rules=(*_ALGORITHMS, *_STRATEGIES, *_PLACEMENT, *_STALENESS),
)
