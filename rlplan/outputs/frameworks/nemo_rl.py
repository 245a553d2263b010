"""A plan as a NeMo RL config: YAML keys over an example config that ``defaults`` names.

The keys are NVIDIA-NeMo/RL's at :data:`~rlplan.rpeg.model.frameworks.nemo_rl.RELEASE`
(tag v0.7.0; paths below are in that repository), read as a config file by
``load_config_with_inheritance`` (nemo_rl/utils/config.py). The plan lies in
NeMo RL's rules (:mod:`rlplan.rpeg.model.frameworks.nemo_rl`). ZeRO-1 is
Megatron with the distributed optimizer, ZeRO-3 DTensor (FSDP2); the step's
``B*K`` sequences train in :func:`optimizer_steps` global batches, one pass;
the policy takes the GPUs generation and a reward model leave (``setup`` in
nemo_rl/algorithms/grpo.py); a reference model is a KL penalty above 0; a
rule reward is an environment on Ray CPU workers, a reward model the
``reward_model`` environment; actor staleness s >= 1 is async GRPO with
``max_trajectory_age_steps: s``.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from rlplan.outputs.frameworks import nemo_rl_experts as experts
from rlplan.outputs.frameworks import nemo_rl_pools as pools
from rlplan.outputs.frameworks.common import (
    OFFLOAD,
    RECOMPUTE,
    SHARDING,
    PlanFacts,
    Settings,
    optimizer_steps,
)
from rlplan.rpeg.model.frameworks.nemo_rl import RELEASE
from rlplan.rpeg.strategy import Recompute, Sharding

FRAMEWORK = "nemo-rl"
REPOSITORY = "https://github.com/NVIDIA-NeMo/RL"

#: Keys this exporter sets that none of its base configs has: on a command
#: line they take ``++`` (``parse_hydra_overrides`` in nemo_rl/utils/config.py
#: sets the config struct). ``vllm_kwargs`` is ``{}`` in
#: examples/configs/grpo_math_1B.yaml and ppo_math_1B.yaml; ``data.env_name``
#: is read by nemo_rl/algorithms/ppo.py (setup) and set by no config; DTensor's
#: expert parallel size is one recipes set (nemo_rl_experts.py).
BEYOND_BASES = frozenset(
    {"policy.generation.vllm_kwargs.max_num_seqs", "data.env_name", experts.DTENSOR_EXPERTS}
)
#: The KL coefficient written when a reference model scores the samples:
#: loss_fn.reference_policy_kl_penalty of examples/configs/grpo_math_1B.yaml.
KL_PENALTY = 0.01


def _bases(facts: PlanFacts, algorithm: str) -> list[str]:
    """The example configs the export inherits (examples/configs/)."""
    megatron = facts.entry("actor.train")[SHARDING.label] == Sharding.ZERO1
    base = f"{algorithm}_math_1B{'_megatron' if megatron else ''}.yaml"
    if not facts.has("reward.infer"):
        return [base]
    # env.reward_model.*: examples/configs/grpo_rm_1B.yaml (on grpo_math_1B.yaml); the
    # backend's config comes after it, so its keys win.
    return ["grpo_rm_1B.yaml"] if base == "grpo_math_1B.yaml" else ["grpo_rm_1B.yaml", base]


def _header(facts: PlanFacts, out: Settings, plan_name: str, algorithm: str, bases: list) -> None:
    script = f"examples/run_{algorithm}.py"
    facts.header(
        out,
        plan_name,
        f"NeMo RL {RELEASE} (git clone --branch {RELEASE} {REPOSITORY}; the nemo-rl package "
        f"on PyPI is a placeholder): save this as examples/configs/plan.yaml beside "
        f"{', '.join(bases)} and run uv run {script} --config examples/configs/plan.yaml",
    )
    shapes = facts.instance.models["actor"]
    out.comment(
        f"add: policy.model_name (your actor: a Hugging Face name or path; the plan is for "
        f"{shapes.layers} layers of hidden size {shapes.hidden_dim}) and the data "
        "(data.train: dataset_name, or data_path with input_key; data.validation, or "
        f"{algorithm}.val_period: 0)"
    )


def _workload(facts: PlanFacts, out: Settings, algorithm: str) -> None:
    workload = facts.instance.workload
    # grpo.* / ppo.*: examples/configs/grpo_math_1B.yaml, ppo_math_1B.yaml
    out.set(f"{algorithm}.num_prompts_per_step", workload.batch_size)
    out.set(f"{algorithm}.num_generations_per_prompt", workload.samples_per_prompt)
    if algorithm == "ppo":
        # ppo_train trains ppo_epochs times on each step's samples (nemo_rl/algorithms/ppo.py).
        out.set("ppo.ppo_epochs", 1)
    # One optimizer step per global batch: num_global_batches = B*K // gbs in the
    # workers' train (nemo_rl/models/policy/workers/megatron_policy_worker.py).
    out.set("policy.train_global_batch_size", workload.sequences // optimizer_steps(facts.instance))
    # The longest sequence and response (policy.*: examples/configs/grpo_math_1B.yaml); prompts
    # at or over data.max_input_seq_length are masked (nemo_rl/data/processors.py).
    out.set("policy.max_total_sequence_length", workload.total_length)
    out.set("policy.generation.max_new_tokens", workload.generation_length)
    out.set("data.max_input_seq_length", workload.total_length)
    nodes, width, _ = pools.cluster(facts)
    out.set("cluster.num_nodes", nodes)
    out.set("cluster.gpus_per_node", width)


def _reference(facts: PlanFacts, out: Settings, algorithm: str) -> None:
    """KL on or off, and the old log-probs' skip when the plan has no actor.infer."""
    reference = facts.has("reference.infer")
    # setup builds the reference copy iff the KL penalty is above 0 (nemo_rl/algorithms/grpo.py:
    # init_reference_model); PPO keeps one and skips its pass on ppo.skip_reference_...
    out.set("loss_fn.reference_policy_kl_penalty", KL_PENALTY if reference else 0.0)
    if algorithm == "ppo":
        out.set("ppo.skip_reference_policy_logprobs_calculation", not reference)
    if reference:
        out.comment(f"the KL coefficient is yours to choose ({KL_PENALTY}: grpo_math_1B.yaml's)")
    if not facts.has("actor.infer"):
        # grpo_train skips prev_logprobs under force_on_policy_ratio, which setup allows only
        # with train_global_batch_size == B*K (nemo_rl/algorithms/grpo.py).
        out.set("loss_fn.force_on_policy_ratio", True)
        if optimizer_steps(facts.instance) != 1:
            out.unsupported(
                "no actor.infer with more than one optimizer step (force_on_policy_ratio "
                "needs train_global_batch_size == num_prompts_per_step x generations)"
            )


def _generation(facts: PlanFacts, out: Settings) -> bool:
    """vLLM settings and colocation; returns whether generation is colocated with training."""
    tp, pp, _ = facts.layout("actor.generate")
    stale = facts.staleness.get("actor", 0) > 0
    # policy.generation.*: examples/configs/grpo_math_1B.yaml; max_num_seqs goes to vllm.LLM
    # through vllm_kwargs (nemo_rl/models/generation/vllm/vllm_worker.py)
    out.set("policy.generation.backend", "vllm")
    out.set("policy.generation.vllm_cfg.tensor_parallel_size", tp)
    out.set("policy.generation.vllm_cfg.pipeline_parallel_size", pp)
    out.set(
        "policy.generation.vllm_cfg.gpu_memory_utilization", facts.utilization("actor.generate")
    )
    # vLLM pp > 1 and async GRPO need the async engine (vllm_generation.py, grpo.py asserts)
    out.set("policy.generation.vllm_cfg.async_engine", stale or pp > 1)
    experts.generation_experts(facts, out, stale or pp > 1)
    out.set(
        "policy.generation.vllm_kwargs.max_num_seqs",
        facts.entry("actor.generate")["max_num_seqs"],
    )
    colocated = facts.same_block("actor.generate", "actor.train")
    out.set("policy.generation.colocated.enabled", colocated)
    if not colocated:
        nodes, width = facts.nodes("actor.generate")
        out.set("policy.generation.colocated.resources.num_nodes", nodes)
        out.set("policy.generation.colocated.resources.gpus_per_node", width)
    return colocated


def _reward(facts: PlanFacts, out: Settings, algorithm: str) -> None:
    """The reward: a rule-based environment, or the reward model environment."""
    rule = facts.reward_rule
    if rule is not None:
        facts.reward_rule_comment(
            out,
            "NeMo RL scores in an environment on Ray CPU workers: env.math "
            "(nemo_rl/environments/math_environment.py) verifies math answers; for another "
            "reward, write your environment (nemo_rl/environments/interfaces.py, "
            "EnvironmentInterface), register it and name it in data.default.env_name",
        )
        # data.default.env_name, env.math.num_workers: examples/configs/grpo_math_1B.yaml
        out.set("data.default.env_name", "math")
        out.set("env.math.num_workers", rule["workers"])
        return
    if not facts.has("reward.infer"):
        return
    tp, _, _ = facts.layout("reward.infer")
    nodes, width = facts.nodes("reward.infer")
    # env.reward_model.*, data.default.env_name: examples/configs/grpo_rm_1B.yaml
    out.set("data.default.env_name", "reward_model")
    if algorithm == "ppo":
        # ppo.py (setup) subtracts the reward model's GPUs when data.env_name is reward_model
        out.set("data.env_name", "reward_model")
    out.set("env.reward_model.resources.num_nodes", nodes)
    out.set("env.reward_model.resources.gpus_per_node", width)
    out.set("env.reward_model.batch_size", facts.micro_batch("reward.infer"))
    out.set("env.reward_model.dtensor_cfg.tensor_parallel_size", tp)
    experts.reward_experts(facts, out)
    out.comment(
        "add: env.reward_model.model_name (your Bradley-Terry reward model); it scores "
        "unpacked sequences (reward_model_environment.py asserts sequence_packing off)"
    )


def _policy_gpus(facts: PlanFacts, out: Settings, colocated: bool) -> None:
    """The policy takes what generation and the reward model leave (grpo.py, ppo.py: setup)."""
    total_nodes, width, gpus = pools.cluster(facts)
    reward = facts.nodes("reward.infer") if facts.has("reward.infer") else (0, 0)
    policy_nodes = total_nodes if total_nodes == 1 else total_nodes - reward[0]
    per_node = width - reward[1] if total_nodes == 1 else width
    expected = policy_nodes * per_node
    apart: list[str] = []
    if not colocated:
        expected -= facts.block("actor.generate").size
        if policy_nodes > 1 and facts.nodes("actor.generate")[1] != width:
            apart.append("generation apart takes whole nodes on more than one node")
    if facts.block("actor.train").size != expected or apart:
        reason = "; ".join(apart) or (
            f"the policy gets the {expected} GPUs left of the cluster's {gpus}"
        )
        out.unsupported(f"{facts.where('actor.train')}: {reason}")


def _backend(facts: PlanFacts, out: Settings, section: str, name: str, colocated: bool) -> None:
    """Megatron or DTensor keys of ``section`` (``policy`` or ``value``) for train ``name``."""
    entry = facts.entry(name)
    tp, pp, _ = facts.layout(name)
    full = entry[RECOMPUTE.label] == Recompute.FULL
    megatron = entry[SHARDING.label] == Sharding.ZERO1
    # {policy,value}.megatron_cfg.*, dtensor_cfg.*: examples/configs/grpo_math_1B.yaml,
    # grpo_math_1B_megatron.yaml, ppo_math_1B.yaml, ppo_math_1B_megatron.yaml
    out.set(f"{section}.megatron_cfg.enabled", megatron)
    out.set(f"{section}.dtensor_cfg.enabled", not megatron)
    if megatron:
        out.set(f"{section}.megatron_cfg.tensor_model_parallel_size", tp)
        out.set(f"{section}.megatron_cfg.pipeline_model_parallel_size", pp)
        experts.megatron_experts(facts, out, section, name)
        out.set(f"{section}.megatron_cfg.activation_checkpointing", full)
        out.set(f"{section}.megatron_cfg.optimizer.use_distributed_optimizer", True)
    else:
        out.set(f"{section}.dtensor_cfg.tensor_parallel_size", tp)
        experts.dtensor_experts(facts, out, section, name)
        out.set(f"{section}.dtensor_cfg.activation_checkpointing", full)
        if pp > 1:
            out.unsupported(f"{name} pp {pp} under ZeRO-3 (DTensor FSDP2 has no pipeline stages)")
    if entry[OFFLOAD.label] and not colocated and section == "policy":
        out.unsupported(
            f"{name} {OFFLOAD.label} true with generation on GPUs of its own (NeMo RL moves the "
            "training states to the host only around colocated generation: "
            "refit_policy_generation in nemo_rl/algorithms/grpo.py)"
        )


def _micro_batches(facts: PlanFacts, out: Settings) -> None:
    """Train and log-prob micro-batches, in sequences or, packed, in tokens."""
    packing = facts.instance.engine.sequence_packing
    tp, _, _ = facts.layout("actor.train")
    # policy.train_micro_batch_size, logprob_batch_size, sequence_packing.*:
    # examples/configs/grpo_math_1B.yaml
    out.set("policy.train_micro_batch_size", facts.micro_batch("actor.train"))
    passes = [name for name in ("actor.infer", "reference.infer") if facts.has(name)]
    if passes:
        out.set("policy.logprob_batch_size", facts.micro_batch(passes[0]))
    out.set("policy.sequence_packing.enabled", packing)
    if packing:
        out.set("policy.sequence_packing.train_mb_tokens", _bin(facts, "actor.train", out))
        if passes:
            out.set("policy.sequence_packing.logprob_mb_tokens", _bin(facts, passes[0], out))
    sizes = {facts.micro_batch(name) for name in passes}
    if len(sizes) > 1:
        out.unsupported(
            f"{' and '.join(passes)} with micro-batches of {' and '.join(map(str, sorted(sizes)))} "
            "sequences per GPU (one policy.logprob_batch_size)"
        )
    if tp >= 4 and passes and sizes != {facts.micro_batch("actor.train")}:
        out.comment(
            "run with NRL_IGNORE_TP_ACCURACY_CHECK=1 in the environment: with tp 4 or more "
            "nemo_rl/models/policy/lm_policy.py asserts train_micro_batch_size == "
            "logprob_batch_size otherwise"
        )


def _bin(facts: PlanFacts, name: str, out: Settings) -> int:
    """A packed micro-batch's token budget: never below the longest sequence, padded."""
    pad = experts.pad_multiple(facts, name)
    longest = math.ceil(facts.instance.workload.total_length / pad) * pad
    if facts.micro_tokens(name) >= longest:
        return facts.micro_tokens(name)
    out.unsupported(
        f"{name} packed micro-batches of {facts.micro_tokens(name)} tokens: a bin holds the "
        f"longest sequence, {longest} tokens (nemo_rl/data/packing/algorithms.py), so it is set"
    )
    return longest


def _critic(facts: PlanFacts, out: Settings, bases: list[str]) -> None:
    """The PPO value model: its backend, micro-batch and packing (examples/configs/ppo_math_1B*)."""
    if not facts.has("critic.train"):
        return
    _backend(facts, out, "value", "critic.train", True)
    megatron = facts.entry("critic.train")[SHARDING.label] == Sharding.ZERO1
    if megatron and "ppo_math_1B_megatron.yaml" not in bases:
        # The Megatron value model's keys of examples/configs/ppo_math_1B_megatron.yaml.
        out.set("value.reward_model_cfg.enabled", False)
        out.set("value.optimizer", None)
        out.set("value.scheduler", None)
        out.set(
            "value.make_sequence_length_divisible_by", experts.pad_multiple(facts, "critic.train")
        )
    # value.train_micro_batch_size serves values and training (its logprob_mb_tokens use it)
    out.set("value.train_micro_batch_size", facts.micro_batch("critic.train"))
    packing = _packs_values(facts)
    out.set("value.sequence_packing.enabled", packing)
    if packing:
        out.set("value.sequence_packing.train_mb_tokens", _bin(facts, "critic.train", out))
    if facts.has("critic.infer") and facts.micro_batch("critic.infer") != facts.micro_batch(
        "critic.train"
    ):
        out.unsupported(
            f"critic.infer micro-batch {facts.micro_batch('critic.infer')} per GPU while "
            f"critic.train {facts.micro_batch('critic.train')} (one value.train_micro_batch_size)"
        )


def _packs_values(facts: PlanFacts) -> bool:
    """Whether the value model packs: only under Megatron (nemo_rl/algorithms/ppo.py, setup)."""
    sharding = facts.entry("critic.train")[SHARDING.label]
    return facts.instance.engine.sequence_packing and sharding == Sharding.ZERO1


def _staleness(facts: PlanFacts, out: Settings, algorithm: str) -> None:
    if algorithm != "grpo":
        return
    steps = facts.staleness.get("actor", 0)
    # grpo.async_grpo.*: examples/configs/grpo_math_1B.yaml; async_grpo_train asserts
    # loss_fn.use_importance_sampling_correction (nemo_rl/algorithms/grpo.py)
    out.set("grpo.async_grpo.enabled", steps > 0)
    if steps > 0:
        out.set("grpo.async_grpo.max_trajectory_age_steps", steps)
        out.set("loss_fn.use_importance_sampling_correction", True)


def _batch_checks(facts: PlanFacts, out: Settings) -> None:
    """NeMo RL's divisibility checks of the batch over data-parallel ranks and micro-batches.

    ``shard_by_batch_size`` (nemo_rl/distributed/batched_data_dict.py) asserts
    the global batch (training) and the step's batch (log-probs, values) are
    multiples of dp; unpacked, ``make_microbatch_iterator`` asserts each
    rank's share is a multiple of the micro-batch. The reward model scores
    unpacked (``Policy.score``, nemo_rl/models/policy/lm_policy.py).
    """
    sequences = facts.instance.workload.sequences
    steps = optimizer_steps(facts.instance)
    packing = facts.instance.engine.sequence_packing
    for name in facts.blocks:
        if name == "actor.generate":
            continue
        batch = sequences // steps if name.endswith("train") else sequences
        packed = _packs_values(facts) if name.startswith("critic") else packing
        packed = packed and name != "reward.infer"
        dp = facts.layout(name)[2]
        if batch % dp:
            out.unsupported(f"{facts.where(name)}: dp {dp} does not divide a batch of {batch}")
        elif not packed and (batch // dp) % facts.micro_batch(name):
            out.unsupported(
                f"{name}: micro-batches of {facts.micro_batch(name)} do not divide the "
                f"{batch // dp} sequences of a data-parallel rank"
            )


def _command_line(out: Settings, algorithm: str, bases: list[str]) -> None:
    """How to pass the keys as overrides instead, with ``++`` where the base has no key."""
    if len(bases) != 1:
        return
    keys = [key for kind, key, _ in out.items if kind == "set" and key != "defaults"]
    beyond = [key for key in keys if key in BEYOND_BASES]
    line = (
        f"or as overrides: uv run examples/run_{algorithm}.py --config examples/configs/"
        f"{bases[0]} key=value ..."
    )
    if beyond:
        line += f"; keys {bases[0]} lacks take ++ (++key=value): {', '.join(beyond)}"
    out.comment(line)


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's NeMo RL config, in order (the plan lies inside NeMo RL's rules).

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Dotted keys (rendered as nested YAML, ``defaults`` first) and comment lines.
    """
    out = Settings("NeMo RL")
    algorithm = "ppo" if facts.instance.algorithm == "ppo" else "grpo"
    bases = _bases(facts, algorithm)
    _header(facts, out, plan_name, algorithm, bases)
    out.set("defaults", bases[0] if len(bases) == 1 else bases)
    _workload(facts, out, algorithm)
    _reference(facts, out, algorithm)
    colocated = _generation(facts, out)
    _reward(facts, out, algorithm)
    _policy_gpus(facts, out, colocated)
    pools.gpu_pools(facts, out)
    _backend(facts, out, "policy", "actor.train", colocated)
    _micro_batches(facts, out)
    _critic(facts, out, bases)
    _staleness(facts, out, algorithm)
    _batch_checks(facts, out)
    _command_line(out, algorithm, bases)
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
