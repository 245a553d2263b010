"""A plan as NeMo RL settings: YAML keys to merge into a GRPO or PPO config.

Key names were checked against NVIDIA-NeMo/RL at commit 7ea279ab
(2026-08-22); every key cites the file that defines or reads it (paths in
that repository). The defaults live in examples/configs/grpo_math_1B.yaml
(DTensor), examples/configs/grpo_math_1B_megatron.yaml (Megatron) and
examples/configs/ppo_math_1B.yaml (PPO, the value model under ``value``).
Each key may also be given as a ``policy.x.y=value`` override to
examples/run_grpo.py (it applies ``parse_hydra_overrides``).

How the plan maps onto NeMo RL:

* the training backend follows ``actor.train``'s sharding: ZeRO-1 is
  Megatron with the distributed optimizer, ZeRO-3 is DTensor (FSDP2, no
  pipeline parallelism);
* generation is colocated with the policy (``policy.generation.colocated``)
  or runs on GPUs of its own, the policy then taking every other GPU
  (nemo_rl/algorithms/grpo.py, ``setup``); a colocated policy's training
  states go to the host around generation (``offload_before_refit``);
* old and reference log-probs run on the policy's workers; the reference
  weights are kept on the host and swapped in (``setup_reference_model_state``);
* a reward model runs as the ``reward_model`` environment on GPUs of its own;
* a staleness s >= 1 of the actor is async GRPO (PPO) with
  ``max_trajectory_age_steps: s``, which needs non-colocated vLLM generation.
"""

from __future__ import annotations

from typing import Any

import yaml

from rlplan.outputs.frameworks.common import OFFLOAD, RECOMPUTE, SHARDING, PlanFacts, Settings
from rlplan.rpeg.strategy import Recompute, Sharding

FRAMEWORK = "nemo-rl"

#: Where the keys are defined or read (NVIDIA-NeMo/RL).
SOURCES = {
    "grpo": "examples/configs/grpo_math_1B.yaml",
    "megatron": "examples/configs/grpo_math_1B_megatron.yaml",
    "ppo": "examples/configs/ppo_math_1B.yaml",
    "vllm_kwargs": "nemo_rl/models/generation/vllm/vllm_worker.py",
    "setup": "nemo_rl/algorithms/grpo.py",
    "reward_model": "examples/configs/grpo_rm_1B.yaml",
    "async": "docs/guides/async-grpo.md",
}


def _workload(facts: PlanFacts, out: Settings, algorithm: str) -> None:
    workload = facts.instance.workload
    # grpo.* / ppo.*: examples/configs/grpo_math_1B.yaml, examples/configs/ppo_math_1B.yaml
    out.set(f"{algorithm}.num_prompts_per_step", workload.batch_size)
    out.set(f"{algorithm}.num_generations_per_prompt", workload.samples_per_prompt)
    # policy.max_total_sequence_length, policy.generation.max_new_tokens:
    # examples/configs/grpo_math_1B.yaml
    out.set("policy.max_total_sequence_length", workload.total_length)
    out.set("policy.generation.max_new_tokens", workload.generation_length)
    nodes, width = facts.cluster_nodes()
    # cluster.num_nodes, cluster.gpus_per_node: examples/configs/grpo_math_1B.yaml
    out.set("cluster.num_nodes", nodes)
    out.set("cluster.gpus_per_node", width)


def _generation(facts: PlanFacts, out: Settings, asynchronous: bool) -> bool:
    """vLLM settings and colocation; returns whether generation is colocated with training."""
    tp, pp, _ = facts.layout("actor.generate")
    # policy.generation.backend, vllm_cfg.*: examples/configs/grpo_math_1B.yaml
    out.set("policy.generation.backend", "vllm")
    out.set("policy.generation.vllm_cfg.tensor_parallel_size", tp)
    out.set("policy.generation.vllm_cfg.pipeline_parallel_size", pp)
    out.set(
        "policy.generation.vllm_cfg.gpu_memory_utilization", facts.utilization("actor.generate")
    )
    # policy.generation.vllm_kwargs: passed to the vLLM engine
    # (nemo_rl/models/generation/vllm/vllm_worker.py); max_num_seqs as in
    # examples/configs/recipes/llm/grpo-nano-v2-12b-1n8g-megatron.yaml
    out.set(
        "policy.generation.vllm_kwargs.max_num_seqs",
        facts.entry("actor.generate")["max_num_seqs"],
    )
    colocated = facts.same_block("actor.generate", "actor.train")
    # policy.generation.colocated.*: examples/configs/grpo_math_1B.yaml; the split of
    # the cluster in nemo_rl/algorithms/grpo.py (setup)
    out.set("policy.generation.colocated.enabled", colocated)
    if not colocated:
        if not facts.disjoint("actor.generate", "actor.train"):
            out.unsupported(
                f"{facts.where('actor.generate')} partly shared with "
                f"{facts.where('actor.train')} (generation is colocated with the policy or "
                "on GPUs of its own)"
            )
        nodes, width = facts.nodes("actor.generate")
        out.set("policy.generation.colocated.resources.num_nodes", nodes)
        out.set("policy.generation.colocated.resources.gpus_per_node", width)
    if asynchronous:
        # vllm_cfg.async_engine: docs/guides/async-grpo.md
        out.set("policy.generation.vllm_cfg.async_engine", True)
    return colocated


def _policy_gpus(facts: PlanFacts, out: Settings, colocated: bool, reward_apart: bool) -> None:
    """The policy takes every GPU generation and the reward model do not (grpo.py, setup)."""
    hardware = facts.instance.hardware
    expected = hardware.num_gpus
    if not colocated:
        expected -= facts.block("actor.generate").size
    if reward_apart:
        expected -= facts.block("reward.infer").size
    train = facts.block("actor.train")
    if train.size != expected:
        out.unsupported(
            f"{facts.where('actor.train')}: the policy gets the cluster's {expected} GPUs left "
            "after generation on GPUs of its own and the reward model"
        )


def _backend(facts: PlanFacts, out: Settings, section: str, name: str, colocated: bool) -> None:
    """Megatron or DTensor keys of ``section`` (``policy`` or ``value``) for train ``name``."""
    entry = facts.entry(name)
    tp, pp, _ = facts.layout(name)
    full = entry[RECOMPUTE.label] == Recompute.FULL
    offload = bool(entry[OFFLOAD.label])
    if entry[SHARDING.label] == Sharding.ZERO1:
        # {policy,value}.megatron_cfg.*: examples/configs/grpo_math_1B_megatron.yaml,
        # examples/configs/ppo_math_1B.yaml
        out.set(f"{section}.megatron_cfg.enabled", True)
        out.set(f"{section}.dtensor_cfg.enabled", False)
        out.set(f"{section}.megatron_cfg.tensor_model_parallel_size", tp)
        out.set(f"{section}.megatron_cfg.pipeline_model_parallel_size", pp)
        out.set(f"{section}.megatron_cfg.activation_checkpointing", full)
        out.set(f"{section}.megatron_cfg.optimizer.use_distributed_optimizer", True)
        if offload and not colocated:
            out.set(f"{section}.megatron_cfg.optimizer.optimizer_cpu_offload", True)
            out.comment(
                f"{section}.megatron_cfg.optimizer.optimizer_cpu_offload keeps the optimizer "
                "on the host; the plan's offload also moves the weights and gradients"
            )
    else:
        # {policy,value}.dtensor_cfg.*: examples/configs/grpo_math_1B.yaml
        out.set(f"{section}.dtensor_cfg.enabled", True)
        out.set(f"{section}.megatron_cfg.enabled", False)
        out.set(f"{section}.dtensor_cfg.tensor_parallel_size", tp)
        out.set(f"{section}.dtensor_cfg.activation_checkpointing", full)
        if pp > 1:
            out.unsupported(f"{name} pp {pp} under ZeRO-3 (DTensor FSDP2 has no pipeline stages)")
        if not colocated:
            out.set(f"{section}.dtensor_cfg.cpu_offload", offload)
    if colocated and offload:
        out.comment(
            f"{name} {OFFLOAD.label}: NeMo RL moves the training states to the host around "
            "colocated generation (nemo_rl/algorithms/grpo.py: offload_before_refit)"
        )
    elif colocated:
        out.unsupported(
            f"{name} {OFFLOAD.label} false beside colocated generation (NeMo RL moves the training "
            "states to the host before generation: offload_before_refit)"
        )


def _micro_batches(facts: PlanFacts, out: Settings) -> None:
    packing = facts.instance.engine.sequence_packing
    # policy.train_micro_batch_size, logprob_batch_size, sequence_packing.*:
    # examples/configs/grpo_math_1B.yaml
    out.set("policy.train_micro_batch_size", facts.micro_batch("actor.train"))
    logprob = "actor.infer" if facts.has("actor.infer") else "reference.infer"
    if facts.has(logprob):
        out.set("policy.logprob_batch_size", facts.micro_batch(logprob))
    out.set("policy.sequence_packing.enabled", packing)
    if packing:
        out.set("policy.sequence_packing.train_mb_tokens", facts.micro_tokens("actor.train"))
        if facts.has(logprob):
            out.set("policy.sequence_packing.logprob_mb_tokens", facts.micro_tokens(logprob))
    for name in ("actor.infer", "reference.infer"):
        if not facts.has(name):
            continue
        if facts.micro_batch(name) != facts.micro_batch(logprob):
            out.unsupported(
                f"{name} micro-batch {facts.micro_batch(name)} per GPU while {logprob} "
                f"{facts.micro_batch(logprob)} (one policy.logprob_batch_size)"
            )
        if not facts.same_block(name, "actor.train") or facts.layout(name) != facts.layout(
            "actor.train"
        ):
            out.unsupported(
                f"{facts.where(name)} apart from {facts.where('actor.train')} (log-probs run "
                "on the policy's workers, in its layout)"
            )
    if facts.has("reference.infer") and not facts.entry("reference.infer")[OFFLOAD.label]:
        out.unsupported(
            f"reference.infer {OFFLOAD.label} false (the reference weights stay on the host "
            "and are swapped in: setup_reference_model_state in nemo_rl/models/automodel/setup.py "
            "and megatron_policy_worker.py)"
        )
    if facts.has("actor.infer") and facts.entry("actor.infer")[OFFLOAD.label]:
        out.unsupported(f"actor.infer {OFFLOAD.label} true (the policy's weights stay on its GPUs)")


def _reward(facts: PlanFacts, out: Settings) -> bool:
    """Reward model environment keys; returns whether it has GPUs of its own."""
    rule = facts.reward_rule
    if rule is not None:
        facts.reward_rule_comment(
            out,
            "a rule-based environment on Ray CPU workers (env.math here, the math "
            "environment of examples/configs/grpo_math_1B.yaml; use your task's)",
        )
        # env.math.num_workers: nemo_rl/environments/math_environment.py (MathEnvConfig)
        out.set("env.math.num_workers", rule["workers"])
        return False
    if not facts.has("reward.infer"):
        return False
    others = [name for name in facts.blocks if name != "reward.infer"]
    if all(facts.disjoint("reward.infer", name) for name in others):
        tp, pp, _ = facts.layout("reward.infer")
        nodes, width = facts.nodes("reward.infer")
        # env.reward_model.*: examples/configs/grpo_rm_1B.yaml; its GPUs are
        # subtracted from the policy's in nemo_rl/algorithms/grpo.py (setup)
        out.set("env.reward_model.resources.num_nodes", nodes)
        out.set("env.reward_model.resources.gpus_per_node", width)
        out.set("env.reward_model.batch_size", facts.micro_batch("reward.infer"))
        out.set("env.reward_model.dtensor_cfg.tensor_parallel_size", tp)
        out.set(
            "env.reward_model.dtensor_cfg.cpu_offload",
            bool(facts.entry("reward.infer")[OFFLOAD.label]),
        )
        if pp > 1:
            out.unsupported(f"reward.infer pp {pp} (the reward model runs under DTensor)")
        return True
    out.unsupported(
        f"{facts.where('reward.infer')} sharing GPUs with other vertices (a reward model "
        "environment runs on GPUs of its own: env.reward_model.resources; a rule-based "
        "environment such as math needs no GPU)"
    )
    return False


def _critic(facts: PlanFacts, out: Settings, colocated: bool) -> None:
    if not facts.has("critic.train"):
        return
    _backend(facts, out, "value", "critic.train", colocated)
    # value.train_micro_batch_size: examples/configs/ppo_math_1B.yaml (values use it too)
    out.set("value.train_micro_batch_size", facts.micro_batch("critic.train"))
    if facts.instance.engine.sequence_packing:
        out.set("value.sequence_packing.enabled", True)
        out.set("value.sequence_packing.train_mb_tokens", facts.micro_tokens("critic.train"))
    if not facts.same_block("critic.train", "actor.train"):
        out.unsupported(
            f"{facts.where('critic.train')} apart from {facts.where('actor.train')} (the value "
            "model shares the policy's cluster)"
        )
    if facts.has("critic.infer"):
        if facts.micro_batch("critic.infer") != facts.micro_batch("critic.train"):
            out.unsupported(
                f"critic.infer micro-batch {facts.micro_batch('critic.infer')} per GPU while "
                f"critic.train {facts.micro_batch('critic.train')} (the value model has one "
                "micro-batch size)"
            )
        if facts.layout("critic.infer") != facts.layout("critic.train") or not facts.same_block(
            "critic.infer", "critic.train"
        ):
            out.unsupported(
                f"{facts.where('critic.infer')} apart from {facts.where('critic.train')} "
                "(values run on the value model's workers)"
            )


def _staleness(facts: PlanFacts, out: Settings, algorithm: str, colocated: bool) -> None:
    steps = facts.staleness.get("actor", 0)
    section = f"{algorithm}.async_{algorithm}"
    # grpo.async_grpo.* / ppo.async_ppo.*: examples/configs/grpo_math_1B.yaml,
    # examples/configs/ppo_math_1B.yaml
    out.set(f"{section}.enabled", steps > 0)
    if steps > 0:
        out.set(f"{section}.max_trajectory_age_steps", steps)
        if colocated:
            out.unsupported(
                f"actor staleness {steps} with generation colocated (async vLLM generation "
                "runs on GPUs of its own: nemo_rl/algorithms/grpo.py asserts it)"
            )
    for model, value in sorted(facts.staleness.items()):
        if model != "actor" and value > 0:
            out.unsupported(f"{model} staleness {value} (values use the latest value model)")


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's NeMo RL keys, in order.

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Dotted keys (rendered as nested YAML) and comment lines.
    """
    out = Settings("NeMo RL")
    algorithm = facts.instance.algorithm
    base = (
        SOURCES["ppo"]
        if algorithm == "ppo"
        else (
            SOURCES["megatron"]
            if facts.entry("actor.train")[SHARDING.label] == Sharding.ZERO1
            else SOURCES["grpo"]
        )
    )
    facts.header(
        out,
        plan_name,
        f"YAML keys to merge into a NeMo RL config (e.g. {base}); "
        "or pass each as key=value to examples/run_grpo.py",
    )
    if algorithm == "dpo":
        out.unsupported(
            "online DPO (NeMo RL's DPO, examples/run_dpo.py, is offline); the keys below use "
            "the GRPO layout for the plan's placement"
        )
        algorithm = "grpo"
    asynchronous = facts.staleness.get("actor", 0) > 0
    _workload(facts, out, algorithm)
    colocated = _generation(facts, out, asynchronous)
    reward_apart = _reward(facts, out)
    _policy_gpus(facts, out, colocated, reward_apart)
    _backend(facts, out, "policy", "actor.train", colocated)
    _micro_batches(facts, out)
    _critic(facts, out, colocated)
    _staleness(facts, out, algorithm, colocated)
    return out


def render(out: Settings) -> str:
    """Comment lines first (in order), then the keys as one nested YAML document."""
    comments = [f"# {text}" for kind, text, _ in out.items if kind == "comment"]
    tree: dict[str, Any] = {}
    for kind, key, value in out.items:
        if kind != "set":
            continue
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    body = yaml.safe_dump(tree, sort_keys=False, default_flow_style=False)
    return "\n".join(comments) + "\n" + body
