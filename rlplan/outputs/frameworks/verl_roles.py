"""verl 0.9.1 keys of each role: rollout, actor, reference, critic and reward.

Split from :mod:`rlplan.outputs.frameworks.verl` (the batch, pool and mode
keys); paths are files of verl 0.9.1 (PyPI ``verl==0.9.1``). Megatron roles
take tp and pp per role, ZeRO-1 as the distributed optimizer and ZeRO-3 as
Megatron-FSDP (``use_megatron_fsdp``, verl/workers/config/engine.py
McoreEngineConfig); FSDP roles are data parallel over their pool. A
mixture-of-experts model's Megatron roles take ep, etp and cp
(:func:`megatron_degrees`), its vLLM servers expert parallelism with
data-parallel attention (:func:`vllm_experts`).
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import OFFLOAD, RECOMPUTE, SHARDING, PlanFacts, Settings
from rlplan.rpeg.strategy import Recompute, Sharding


def _bool(value: bool) -> str:
    return "true" if value else "false"


def rollout_keys(facts: PlanFacts, out: Settings) -> None:
    """The vLLM rollout: tp, pp, memory fraction, concurrency cap, CUDA graphs."""
    tp, pp, _ = facts.layout("actor.generate")
    entry = facts.entry("actor.generate")
    # actor_rollout_ref.rollout.*: verl/trainer/config/rollout/rollout.yaml, passed to
    # vLLM by verl/workers/rollout/vllm_rollout/vllm_async_server.py
    prefix = "actor_rollout_ref.rollout"
    out.set(f"{prefix}.name", "vllm")
    out.set(f"{prefix}.tensor_model_parallel_size", tp)
    out.set(f"{prefix}.pipeline_model_parallel_size", pp)
    out.set(f"{prefix}.gpu_memory_utilization", facts.utilization("actor.generate"))
    out.set(f"{prefix}.max_num_seqs", entry["max_num_seqs"])
    out.set(f"{prefix}.enforce_eager", _bool(not facts.instance.engine.cuda_graphs))
    if facts.mixture("actor.generate"):
        vllm_experts(facts, out, "actor.generate", prefix)


def vllm_experts(facts: PlanFacts, out: Settings, name: str, prefix: str) -> None:
    """A vLLM server's expert parallelism: ep GPUs share the experts, ep/tp attention ranks.

    verl/workers/config/rollout.py ``RolloutConfig.__post_init__`` asserts
    ``expert_parallel_size == tensor_model_parallel_size * data_parallel_size``
    when it is above 1; verl/workers/rollout/vllm_rollout/vllm_async_server.py
    passes vLLM ``enable_expert_parallel`` (``expert_parallel_size > 1``) and the
    data-parallel size, a replica being tp x dp GPUs (verl/workers/rollout/replica.py).
    An infer vertex's expert layout (ep and etp, Megatron's folding) is one
    vLLM serves when its experts are tp-sharded (ep 1, etp tp) or expert
    parallel (etp 1, ep a multiple of tp); a rollout's ep is one by definition.
    """
    tp = facts.layout(name)[0]
    ep, etp, cp = facts.degrees(name)
    if cp > 1:
        out.unsupported(f"{name} cp {cp} (vLLM's rollout config has no context parallel size)")
    generate = name == "actor.generate"
    if not generate and not ((ep == 1 and etp == tp) or (etp == 1 and ep % tp == 0)):
        out.unsupported(
            f"{name} ep {ep}, etp {etp} over tp {tp} (vLLM shards experts over tp, ep 1 and "
            "etp tp, or spreads them over tp x data-parallel ranks, ep a multiple of tp and "
            "etp 1)"
        )
        return
    out.set(f"{prefix}.expert_parallel_size", ep)
    out.set(f"{prefix}.data_parallel_size", ep // tp if ep > 1 else 1)


def megatron_degrees(facts: PlanFacts, out: Settings, name: str, prefix: str) -> None:
    """Expert and context parallel degrees of a Megatron role (engine/megatron.yaml).

    Written for a mixture of experts (``expert_tensor_parallel_size`` always:
    verl's default null is tp, Megatron's default, while the plan gives its
    own), and ``context_parallel_size`` also for a dense model with cp above 1.
    """
    ep, etp, cp = facts.degrees(name)
    moe = facts.mixture(name)
    if moe:
        out.set(f"{prefix}.expert_model_parallel_size", ep)
        out.set(f"{prefix}.expert_tensor_parallel_size", etp)
    if moe or cp > 1:
        out.set(f"{prefix}.context_parallel_size", cp)


def _megatron_engine(facts: PlanFacts, out: Settings, name: str, prefix: str) -> None:
    """tp, pp, sharding, offload and recompute of a Megatron train role (McoreEngineConfig)."""
    tp, pp, _ = facts.layout(name)
    entry = facts.entry(name)
    offload = _bool(bool(entry[OFFLOAD.label]))
    # verl/trainer/config/engine/megatron.yaml
    out.set(f"{prefix}.tensor_model_parallel_size", tp)
    out.set(f"{prefix}.pipeline_model_parallel_size", pp)
    megatron_degrees(facts, out, name, prefix)
    out.set(f"{prefix}.use_distributed_optimizer", "true")
    out.set(f"{prefix}.use_megatron_fsdp", _bool(entry[SHARDING.label] == Sharding.ZERO3))
    out.set(f"{prefix}.param_offload", offload)
    out.set(f"{prefix}.optimizer_offload", offload)
    base = f"{prefix}.override_transformer_config"
    if entry[RECOMPUTE.label] == Recompute.FULL:
        out.set(f"{base}.recompute_granularity", "full")
        out.set(f"{base}.recompute_method", "uniform")
        out.set(f"{base}.recompute_num_layers", 1)
    else:
        out.set(f"{base}.recompute_granularity", "null")


def _fsdp_engine(facts: PlanFacts, out: Settings, name: str, prefix: str, model: str) -> None:
    """Offload and recompute of an FSDP train role (FSDPEngineConfig, hf_model.yaml)."""
    entry = facts.entry(name)
    offload = _bool(bool(entry[OFFLOAD.label]))
    # verl/trainer/config/engine/fsdp.yaml
    out.set(f"{prefix}.param_offload", offload)
    out.set(f"{prefix}.optimizer_offload", offload)
    # enable_gradient_checkpointing: verl/trainer/config/model/hf_model.yaml (default true)
    full = entry[RECOMPUTE.label] == Recompute.FULL
    out.set(f"{model}.enable_gradient_checkpointing", _bool(full))


def _same_offload(facts: PlanFacts, out: Settings, infer: str, train: str) -> None:
    """A comment when an infer vertex's offload differs from its train vertex's engine."""
    if not facts.has(infer):
        return
    if facts.entry(infer)[OFFLOAD.label] == facts.entry(train)[OFFLOAD.label]:
        return
    out.unsupported(
        f"{infer} offload {_bool(bool(facts.entry(infer)[OFFLOAD.label]))} while {train} "
        f"offload {_bool(bool(facts.entry(train)[OFFLOAD.label]))} (one param_offload per "
        "engine, read by its train and eval modes: verl/workers/engine/base.py BaseEngineCtx)"
    )


def actor_keys(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    """The actor's engine, its micro-batch, and the old log-probs' micro-batch."""
    if megatron:
        _megatron_engine(facts, out, "actor.train", "actor_rollout_ref.actor.megatron")
    else:
        # actor_rollout_ref.actor.strategy: verl/trainer/config/actor/dp_actor.yaml
        out.set("actor_rollout_ref.actor.strategy", "fsdp")
        _fsdp_engine(
            facts,
            out,
            "actor.train",
            "actor_rollout_ref.actor.fsdp_config",
            "actor_rollout_ref.model",
        )
    # ppo_micro_batch_size_per_gpu: verl/trainer/config/actor/actor.yaml
    micro = facts.micro_batch("actor.train")
    out.set("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro)
    # log_prob_micro_batch_size_per_gpu (old log-probs on the actor's engine):
    # verl/trainer/config/rollout/rollout.yaml; verl/utils/config.py validate_config
    # requires it even when the rollout's log-probs are used (bypass mode).
    infer = facts.micro_batch("actor.infer") if facts.has("actor.infer") else micro
    out.set("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", infer)
    _same_offload(facts, out, "actor.infer", "actor.train")


def reference_keys(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    """The reference's micro-batch, layout (Megatron) and offload."""
    if not facts.has("reference.infer"):
        return
    offload = _bool(bool(facts.entry("reference.infer")[OFFLOAD.label]))
    # log_prob_micro_batch_size_per_gpu: verl/trainer/config/ref/ref.yaml
    out.set(
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        facts.micro_batch("reference.infer"),
    )
    if megatron:
        tp, pp, _ = facts.layout("reference.infer")
        # verl/trainer/config/ref/megatron_ref.yaml
        out.set("actor_rollout_ref.ref.megatron.tensor_model_parallel_size", tp)
        out.set("actor_rollout_ref.ref.megatron.pipeline_model_parallel_size", pp)
        megatron_degrees(facts, out, "reference.infer", "actor_rollout_ref.ref.megatron")
        out.set("actor_rollout_ref.ref.megatron.param_offload", offload)
    else:
        # verl/trainer/config/ref/dp_ref.yaml (fsdp_config: engine/fsdp.yaml)
        out.set("actor_rollout_ref.ref.fsdp_config.param_offload", offload)


def critic_keys(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    """The critic's engine and micro-batches (PPO)."""
    if not facts.has("critic.train"):
        return
    if megatron:
        _megatron_engine(facts, out, "critic.train", "critic.megatron")
    else:
        _fsdp_engine(facts, out, "critic.train", "critic.fsdp", "critic.model")
    # critic.ppo_micro_batch_size_per_gpu: verl/trainer/config/critic/critic.yaml, required
    # by CriticConfig.__post_init__ (verl/workers/config/critic.py).
    out.set("critic.ppo_micro_batch_size_per_gpu", facts.micro_batch("critic.train"))
    # The V1 critic engine batches by tokens: PPOTrainer._setup sets its train and infer
    # budgets to critic.ppo_infer_max_token_len_per_gpu (a CriticConfig field the YAML
    # leaves out, hence +), at least the longest sequence.
    longest = facts.instance.workload.total_length
    budget = max(facts.micro_tokens("critic.train"), longest)
    out.set("+critic.ppo_infer_max_token_len_per_gpu", budget)
    if facts.has("critic.infer"):
        infer = max(facts.micro_tokens("critic.infer"), longest)
        if infer != budget:
            out.unsupported(
                f"critic.infer micro-batches of {infer} tokens per GPU apart from critic.train's "
                f"{budget} (one token budget for both: verl/trainer/ppo/v1/trainer_base.py "
                "PPOTrainer._setup)"
            )
    _same_offload(facts, out, "critic.infer", "critic.train")


def _rule_reward(facts: PlanFacts, out: Settings) -> None:
    """A rule reward: reward loop workers and the user's scoring function."""
    rule = facts.reward_rule
    assert rule is not None
    facts.reward_rule_comment(
        out,
        "verl scores it with a function in reward.num_workers reward loop workers "
        "(verl/experimental/reward_loop/reward_loop.py RewardLoopManager)",
    )
    out.comment(
        "  add your reward function here: reward.custom_reward_function.path=<your_reward.py> "
        "(reward.custom_reward_function.name=compute_score); without it verl picks a scorer "
        "by data_source (verl/utils/reward_score/__init__.py default_compute_score)"
    )
    # reward.*: verl/trainer/config/reward/reward.yaml
    out.set("reward.reward_model.enable", "false")
    out.set("reward.num_workers", rule["workers"])


def reward_keys(facts: PlanFacts, out: Settings, mode: str) -> None:
    """The reward: a rule's workers, or a reward model's pool and engine."""
    if facts.reward_rule is not None:
        _rule_reward(facts, out)
        return
    if not facts.has("reward.infer"):
        return
    out.comment("  add reward.reward_model.model_path=<the reward model>")
    prefix = "reward.reward_model"
    out.set(f"{prefix}.enable", "true")
    apart = facts.disjoint("reward.infer", "actor.train")
    # enable_resource_pool, nnodes, n_gpus_per_node: verl/trainer/config/reward/reward.yaml
    # (the reward_pool: trainer_base.py _init_resource_pool_mgr)
    out.set(f"{prefix}.enable_resource_pool", _bool(apart))
    if apart:
        nodes, width = facts.nodes("reward.infer")
        out.set(f"{prefix}.nnodes", nodes)
        out.set(f"{prefix}.n_gpus_per_node", width)
    tp, pp, _ = facts.layout("reward.infer")
    # The reward model is served by vLLM (verl/experimental/reward_loop/reward_model.py):
    # reward.reward_model.rollout.* as in rollout.yaml; a colocated one sleeps between
    # uses (free_cache_engine), one on its own pool stays awake.
    out.set(f"{prefix}.rollout.name", "vllm")
    out.set(f"{prefix}.rollout.tensor_model_parallel_size", tp)
    out.set(f"{prefix}.rollout.pipeline_model_parallel_size", pp)
    if facts.mixture("reward.infer"):
        vllm_experts(facts, out, "reward.infer", f"{prefix}.rollout")
    out.set(f"{prefix}.rollout.free_cache_engine", _bool(not apart))
    _reward_gaps(facts, out, mode, apart)


def _reward_gaps(facts: PlanFacts, out: Settings, mode: str, apart: bool) -> None:
    """What of the plan's reward model verl cannot set."""
    out.unsupported(
        f"reward.infer micro-batches of {facts.micro_batch('reward.infer')} sequences per GPU "
        "(vLLM batches the reward model's requests itself, up to "
        "reward.reward_model.rollout.max_num_seqs)"
    )
    if apart and facts.entry("reward.infer")[OFFLOAD.label]:
        out.unsupported(
            "reward.infer offload true on a pool of its own (a standalone reward model stays awake)"
        )
    if mode == "separate_async" and not apart:
        out.unsupported(
            "reward.infer on actor.train's GPUs while the rollout has GPUs of its own "
            "(verl/trainer/ppo/v1/trainer_separate_async.py asserts "
            "reward.reward_model.enable_resource_pool)"
        )
    if apart and not facts.disjoint("reward.infer", "actor.generate"):
        out.unsupported(
            "reward.infer on the rollout's GPUs (the reward pool and the rollout pool are "
            "separate Ray resource pools)"
        )
