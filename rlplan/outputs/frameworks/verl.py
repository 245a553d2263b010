"""A plan as verl settings: Hydra overrides for ``python3 -m verl.trainer.main_ppo``.

Key names were checked against volcengine/verl at commit b178a3cd (2026-01-29);
every key cites the file that defines it (paths in that repository).

How the plan maps onto verl:

* the training backend follows ``actor.train``'s sharding: ZeRO-1 is
  Megatron with the distributed optimizer (``--config-name=ppo_megatron_trainer``,
  tp and pp per role), ZeRO-3 is FSDP (``ppo_trainer``, data parallel only);
* ``verl.trainer.main_ppo`` puts the rollout, actor, reference and critic on
  one resource pool (``global_pool``, every GPU of ``trainer.nnodes`` x
  ``trainer.n_gpus_per_node``; verl/trainer/main_ppo.py), run one after the
  other; only the reward model may have a pool of its own
  (``reward_model.enable_resource_pool``);
* old log-probs (``actor.infer``) run on the actor's workers, with the
  actor's layout and offload flags;
* the trainer is synchronous: a staleness above 0 is not expressible there.
"""

from __future__ import annotations

from typing import Any

from rlplan.outputs.frameworks.common import OFFLOAD, RECOMPUTE, SHARDING, PlanFacts, Settings
from rlplan.rpeg.strategy import Recompute, Sharding

FRAMEWORK = "verl"

#: Where the keys are defined (volcengine/verl). The resolved defaults of every
#: key below are in verl/trainer/config/_generated_ppo_trainer.yaml (FSDP) and
#: verl/trainer/config/_generated_ppo_megatron_trainer.yaml (Megatron).
SOURCES = {
    "data": "verl/trainer/config/data/legacy_data.yaml",
    "algorithm": "verl/trainer/config/ppo_trainer.yaml",
    "trainer": "verl/trainer/config/ppo_trainer.yaml",
    "pools": "verl/trainer/main_ppo.py",
    "rollout": "verl/trainer/config/rollout/rollout.yaml",
    "actor": "verl/trainer/config/actor/actor.yaml",
    "model": "verl/trainer/config/model/hf_model.yaml",
    "fsdp": "verl/trainer/config/engine/fsdp.yaml",
    "megatron": "verl/trainer/config/engine/megatron.yaml",
    "ref": "verl/trainer/config/ref/ref.yaml",
    "megatron_ref": "verl/trainer/config/ref/megatron_ref.yaml",
    "critic": "verl/trainer/config/critic/critic.yaml",
    "dp_critic": "verl/trainer/config/critic/dp_critic.yaml",
    "reward_model": "verl/trainer/config/reward_model/reward_model.yaml",
    "dp_reward_model": "verl/trainer/config/reward_model/dp_reward_model.yaml",
    "megatron_reward_model": "verl/trainer/config/reward_model/megatron_reward_model.yaml",
}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _workload(facts: PlanFacts, out: Settings) -> None:
    instance = facts.instance
    workload = instance.workload
    if instance.algorithm == "dpo":
        out.unsupported(
            "online DPO (verl.trainer.main_ppo trains PPO-family algorithms; the "
            "settings below describe the plan's placement only)"
        )
    else:
        # algorithm.adv_estimator: verl/trainer/config/ppo_trainer.yaml
        out.set("algorithm.adv_estimator", "grpo" if instance.algorithm == "grpo" else "gae")
    # data.*: verl/trainer/config/data/legacy_data.yaml
    out.set("data.train_batch_size", workload.batch_size)
    out.set("data.max_prompt_length", workload.context_length)
    out.set("data.max_response_length", workload.generation_length)
    # actor_rollout_ref.rollout.n: verl/trainer/config/rollout/rollout.yaml
    out.set("actor_rollout_ref.rollout.n", workload.samples_per_prompt)
    # actor_rollout_ref.model.use_remove_padding: verl/trainer/config/model/hf_model.yaml
    out.set("actor_rollout_ref.model.use_remove_padding", _bool(instance.engine.sequence_packing))


def _pools(facts: PlanFacts, out: Settings, main: str) -> None:
    """trainer.nnodes / n_gpus_per_node from the main pool; the reward model's own pool."""
    nodes, width = facts.nodes(main)
    # trainer.nnodes, trainer.n_gpus_per_node: verl/trainer/config/ppo_trainer.yaml;
    # the global pool is [n_gpus_per_node] * nnodes (verl/trainer/main_ppo.py).
    out.set("trainer.nnodes", nodes)
    out.set("trainer.n_gpus_per_node", width)
    pooled = [
        name
        for name in (
            "actor.generate",
            "actor.infer",
            "reference.infer",
            "critic.infer",
            "critic.train",
        )
        if facts.has(name)
    ]
    for name in pooled:
        if not facts.same_block(name, main):
            out.unsupported(
                f"{facts.where(name)} apart from {facts.where(main)} "
                "(verl.trainer.main_ppo runs the rollout, actor, reference and critic on one "
                "resource pool, each on all of its GPUs)"
            )
    if not facts.has("reward.infer"):
        return
    if facts.disjoint("reward.infer", main):
        reward_nodes, reward_width = facts.nodes("reward.infer")
        # reward_model.enable_resource_pool, n_gpus_per_node, nnodes:
        # verl/trainer/config/reward_model/reward_model.yaml (the pool: verl/trainer/main_ppo.py)
        out.set("reward_model.enable_resource_pool", "true")
        out.set("reward_model.nnodes", reward_nodes)
        out.set("reward_model.n_gpus_per_node", reward_width)
    elif not facts.same_block("reward.infer", main):
        out.unsupported(
            f"{facts.where('reward.infer')} partly shared with {facts.where(main)} (the "
            "reward model runs on the global pool or on a pool of its own)"
        )


def _rollout(facts: PlanFacts, out: Settings) -> None:
    tp, pp, _ = facts.layout("actor.generate")
    entry = facts.entry("actor.generate")
    # actor_rollout_ref.rollout.*: verl/trainer/config/rollout/rollout.yaml
    out.set("actor_rollout_ref.rollout.name", "vllm")
    out.set("actor_rollout_ref.rollout.tensor_model_parallel_size", tp)
    if pp > 1:
        out.set("actor_rollout_ref.rollout.pipeline_model_parallel_size", pp)
    out.set("actor_rollout_ref.rollout.gpu_memory_utilization", facts.utilization("actor.generate"))
    out.set("actor_rollout_ref.rollout.max_num_seqs", entry["max_num_seqs"])


def _layout_keys(
    facts: PlanFacts, out: Settings, name: str, prefix: str | None, megatron: bool
) -> None:
    """tp/pp keys under ``prefix`` (Megatron), or a comment when FSDP cannot hold them."""
    tp, pp, _ = facts.layout(name)
    if megatron and prefix is not None:
        out.set(f"{prefix}.tensor_model_parallel_size", tp)
        out.set(f"{prefix}.pipeline_model_parallel_size", pp)
    elif (tp, pp) != (1, 1):
        out.unsupported(
            f"tp {tp} pp {pp} of {name} (verl's FSDP workers are data parallel only; "
            "they shard over all GPUs of the pool)"
        )


def _recompute(out: Settings, megatron: bool, prefix: str, flag_key: str, full: bool) -> None:
    if megatron:
        # override_transformer_config.recompute_*: verl/trainer/config/engine/megatron.yaml
        base = f"{prefix}.override_transformer_config"
        if full:
            out.set(f"{base}.recompute_granularity", "full")
            out.set(f"{base}.recompute_method", "uniform")
            out.set(f"{base}.recompute_num_layers", 1)
        else:
            out.set(f"{base}.recompute_granularity", "null")
    else:
        out.set(flag_key, _bool(full))


def _actor(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    entry = facts.entry("actor.train")
    offload = bool(entry[OFFLOAD.label])
    if megatron:
        prefix = "actor_rollout_ref.actor.megatron"
        # tp/pp, use_distributed_optimizer, *_offload: verl/trainer/config/engine/megatron.yaml
        _layout_keys(facts, out, "actor.train", prefix, True)
        out.set(f"{prefix}.use_distributed_optimizer", "true")
        out.set(f"{prefix}.param_offload", _bool(offload))
        out.set(f"{prefix}.grad_offload", _bool(offload))
        out.set(f"{prefix}.optimizer_offload", _bool(offload))
    else:
        # actor_rollout_ref.actor.strategy: verl/trainer/config/actor/actor.yaml
        out.set("actor_rollout_ref.actor.strategy", "fsdp")
        _layout_keys(facts, out, "actor.train", None, False)
        # fsdp_config.param_offload / optimizer_offload: verl/trainer/config/engine/fsdp.yaml
        out.set("actor_rollout_ref.actor.fsdp_config.param_offload", _bool(offload))
        out.set("actor_rollout_ref.actor.fsdp_config.optimizer_offload", _bool(offload))
    # ppo_micro_batch_size_per_gpu: verl/trainer/config/actor/actor.yaml
    out.set(
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", facts.micro_batch("actor.train")
    )
    # enable_gradient_checkpointing: verl/trainer/config/model/hf_model.yaml
    _recompute(
        out,
        megatron,
        "actor_rollout_ref.actor.megatron",
        "actor_rollout_ref.model.enable_gradient_checkpointing",
        entry[RECOMPUTE.label] == Recompute.FULL,
    )
    if facts.has("actor.infer"):
        # log_prob_micro_batch_size_per_gpu (old log-probs on the actor's workers):
        # verl/trainer/config/rollout/rollout.yaml
        out.set(
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
            facts.micro_batch("actor.infer"),
        )
        if facts.layout("actor.infer") != facts.layout("actor.train"):
            out.unsupported(
                f"{facts.where('actor.infer')} in another layout than {facts.where('actor.train')} "
                "(old log-probs run on the actor's workers)"
            )
        if facts.entry("actor.infer")[OFFLOAD.label] != offload:
            out.unsupported(
                f"actor.infer {OFFLOAD.label} {_bool(facts.entry('actor.infer')[OFFLOAD.label])} "
                f"while actor.train {OFFLOAD.label} {_bool(offload)} "
                f"(one set of {OFFLOAD.label} flags for the actor)"
            )


def _reference(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    if not facts.has("reference.infer"):
        return
    offload = bool(facts.entry("reference.infer")[OFFLOAD.label])
    # log_prob_micro_batch_size_per_gpu: verl/trainer/config/ref/ref.yaml
    out.set(
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        facts.micro_batch("reference.infer"),
    )
    if megatron:
        # megatron tp/pp/param_offload: verl/trainer/config/ref/megatron_ref.yaml
        _layout_keys(facts, out, "reference.infer", "actor_rollout_ref.ref.megatron", True)
        out.set("actor_rollout_ref.ref.megatron.param_offload", _bool(offload))
    else:
        _layout_keys(facts, out, "reference.infer", None, False)
        # fsdp_config.param_offload: verl/trainer/config/engine/fsdp.yaml (ref.fsdp_config)
        out.set("actor_rollout_ref.ref.fsdp_config.param_offload", _bool(offload))


def _rule_reward(facts: PlanFacts, out: Settings) -> None:
    """A rule reward: no reward model, a scoring function in the driver."""
    rule = facts.reward_rule
    assert rule is not None
    facts.reward_rule_comment(
        out,
        "verl scores it with a function (custom_reward_function.path and .name, "
        "verl/trainer/config/ppo_trainer.yaml; default verl.utils.reward_score)",
    )
    # reward_model.enable: verl/trainer/config/reward_model/reward_model.yaml
    out.set("reward_model.enable", "false")
    if rule["workers"] > 1:
        out.unsupported(
            f"{rule['workers']} reward workers (the naive and dapo reward managers score the "
            "batch in one loop in the driver: verl/workers/reward_manager/naive.py; the prime "
            "manager runs a process pool of its own size, prime.py)"
        )


def _reward(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    if facts.reward_rule is not None:
        _rule_reward(facts, out)
        return
    if not facts.has("reward.infer"):
        return
    offload = bool(facts.entry("reward.infer")[OFFLOAD.label])
    # reward_model.enable, micro_batch_size_per_gpu:
    # verl/trainer/config/reward_model/reward_model.yaml
    out.comment(
        "reward.infer as a model-based reward (drop the reward_model.* keys for a "
        "rule-based reward function)"
    )
    out.set("reward_model.enable", "true")
    out.set("reward_model.micro_batch_size_per_gpu", facts.micro_batch("reward.infer"))
    if megatron:
        # verl/trainer/config/reward_model/megatron_reward_model.yaml
        _layout_keys(facts, out, "reward.infer", "reward_model.megatron", True)
        out.set("reward_model.megatron.param_offload", _bool(offload))
    else:
        _layout_keys(facts, out, "reward.infer", None, False)
        # verl/trainer/config/reward_model/dp_reward_model.yaml
        out.set("reward_model.model.fsdp_config.param_offload", _bool(offload))


def _critic(facts: PlanFacts, out: Settings, megatron: bool) -> None:
    if not facts.has("critic.train"):
        return
    entry = facts.entry("critic.train")
    offload = bool(entry[OFFLOAD.label])
    if entry[SHARDING.label] != facts.entry("actor.train")[SHARDING.label]:
        out.unsupported(
            f"critic.train {entry[SHARDING.label]} while actor.train "
            f"{facts.entry('actor.train')[SHARDING.label]} (one backend for actor and critic; "
            f"the critic follows the actor's here)"
        )
    # critic.ppo_micro_batch_size_per_gpu: verl/trainer/config/critic/critic.yaml
    out.set("critic.ppo_micro_batch_size_per_gpu", facts.micro_batch("critic.train"))
    full = entry[RECOMPUTE.label] == Recompute.FULL
    if megatron:
        # critic.megatron.*: verl/trainer/config/engine/megatron.yaml
        _layout_keys(facts, out, "critic.train", "critic.megatron", True)
        out.set("critic.megatron.use_distributed_optimizer", "true")
        out.set("critic.megatron.param_offload", _bool(offload))
        out.set("critic.megatron.grad_offload", _bool(offload))
        out.set("critic.megatron.optimizer_offload", _bool(offload))
        _recompute(out, True, "critic.megatron", "", full)
    else:
        _layout_keys(facts, out, "critic.train", None, False)
        # critic.model.fsdp_config.*, enable_gradient_checkpointing:
        # verl/trainer/config/critic/dp_critic.yaml
        out.set("critic.model.fsdp_config.param_offload", _bool(offload))
        out.set("critic.model.fsdp_config.optimizer_offload", _bool(offload))
        out.set("critic.model.enable_gradient_checkpointing", _bool(full))
    if not facts.has("critic.infer"):
        return
    if megatron:
        if facts.micro_batch("critic.infer") != facts.micro_batch("critic.train"):
            out.unsupported(
                f"critic.infer micro-batch {facts.micro_batch('critic.infer')} per GPU apart "
                f"from critic.train's {facts.micro_batch('critic.train')} (the Megatron critic "
                "has one micro-batch size)"
            )
    else:
        # critic.forward_micro_batch_size_per_gpu: verl/trainer/config/critic/dp_critic.yaml
        out.set("critic.forward_micro_batch_size_per_gpu", facts.micro_batch("critic.infer"))
    if facts.layout("critic.infer") != facts.layout("critic.train"):
        out.unsupported(
            f"{facts.where('critic.infer')} in another layout than {facts.where('critic.train')} "
            "(values are computed on the critic's workers)"
        )
    if facts.entry("critic.infer")[OFFLOAD.label] != offload:
        out.unsupported(
            f"critic.infer {OFFLOAD.label} {_bool(facts.entry('critic.infer')[OFFLOAD.label])} "
            f"while critic.train {OFFLOAD.label} {_bool(offload)} "
            f"(one set of {OFFLOAD.label} flags for the critic)"
        )


def _staleness(facts: PlanFacts, out: Settings) -> None:
    for model, steps in sorted(facts.staleness.items()):
        if steps == 0:
            continue
        out.unsupported(
            f"{model} staleness {steps} (verl.trainer.main_ppo is synchronous, staleness 0; "
            "verl/experimental/one_step_off_policy runs a one-step off-policy rollout on "
            "GPUs of its own)"
        )


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's verl settings, in order.

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Hydra overrides and comment lines.
    """
    out = Settings("verl")
    megatron = facts.entry("actor.train")[SHARDING.label] == Sharding.ZERO1
    config = "ppo_megatron_trainer" if megatron else "ppo_trainer"
    facts.header(
        out,
        plan_name,
        f"Hydra overrides: python3 -m verl.trainer.main_ppo --config-name={config} "
        "followed by the key=value lines below",
    )
    if not megatron:
        out.comment("actor.train ZeRO-3: FSDP full shard (verl/trainer/config/engine/fsdp.yaml)")
    else:
        out.comment(
            "actor.train ZeRO-1: Megatron with the distributed optimizer "
            "(verl/trainer/config/engine/megatron.yaml)"
        )
    _workload(facts, out)
    _pools(facts, out, "actor.train")
    _rollout(facts, out)
    _actor(facts, out, megatron)
    _reference(facts, out, megatron)
    _reward(facts, out, megatron)
    _critic(facts, out, megatron)
    _staleness(facts, out)
    return out


def render(out: Settings) -> str:
    """``key=value`` lines and ``# comment`` lines, in order."""
    lines = []
    for kind, key, value in out.items:
        lines.append(f"# {key}" if kind == "comment" else f"{key}={_value(value)}")
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return _bool(value)
    return str(value)
