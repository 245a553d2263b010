"""A plan as OpenRLHF settings: flags of ``python3 -m openrlhf.cli.train_ppo_ray``.

Flag names were checked against OpenRLHF/OpenRLHF at v0.11.0 (commit
3c3be623, 2026-08-13): openrlhf/cli/train_ppo_ray.py defines every flag
written here (the dotted spelling since v0.10.1). Releases up to v0.10.0
(commit 48406a0b) spell them as in :data:`LEGACY_FLAGS`; the export ends
with a comment line giving those spellings for the flags it used.

How the plan maps onto OpenRLHF:

* each model is a Ray group on GPUs of its own (``--actor.num_nodes`` x
  ``--actor.num_gpus_per_node`` and likewise ``ref``, ``reward``,
  ``critic``), the rollout is ``--vllm.num_engines`` vLLM engines of
  ``--vllm.tensor_parallel_size`` GPUs;
* groups share GPUs only as ``--train.colocate_all`` (everything, with vLLM
  and DeepSpeed sleeping outside their runs), ``--train.colocate_actor_ref``
  or ``--train.colocate_critic_reward``;
* old log-probs (``actor.infer``) run on the actor group, values
  (``critic.infer``) on the critic group; all DeepSpeed models share
  ``--ds.zero_stage``, ``--ds.tensor_parallel_size`` (no pipeline
  parallelism), and the experience micro-batch ``--rollout.micro_batch_size``;
* a staleness s >= 1 of the actor is ``--train.async_enable`` with
  ``--train.async_queue_size s`` (the generator runs at most s batches
  ahead: openrlhf/trainer/ppo_trainer_async.py).
"""

from __future__ import annotations

from rlplan.outputs.frameworks.common import (
    OFFLOAD,
    RECOMPUTE,
    SHARDING,
    PlanFacts,
    Settings,
    gpus_words,
)
from rlplan.rpeg.strategy import Recompute, Sharding, value_word

FRAMEWORK = "openrlhf"

#: The file defining every flag (OpenRLHF/OpenRLHF, v0.11.0).
SOURCE = "openrlhf/cli/train_ppo_ray.py"

#: The same flags in OpenRLHF <= v0.10.0 (openrlhf/cli/train_ppo_ray.py at v0.10.0).
LEGACY_FLAGS = {
    "--algo.advantage.estimator": "--advantage_estimator",
    "--rollout.batch_size": "--rollout_batch_size",
    "--rollout.n_samples_per_prompt": "--n_samples_per_prompt",
    "--data.max_len": "--max_len",
    "--rollout.max_new_tokens": "--max_new_tokens",
    "--ds.packing_samples": "--packing_samples",
    "--actor.num_nodes": "--actor_num_nodes",
    "--actor.num_gpus_per_node": "--actor_num_gpus_per_node",
    "--ref.num_nodes": "--ref_num_nodes",
    "--ref.num_gpus_per_node": "--ref_num_gpus_per_node",
    "--reward.num_nodes": "--reward_num_nodes",
    "--reward.num_gpus_per_node": "--reward_num_gpus_per_node",
    "--critic.num_nodes": "--critic_num_nodes",
    "--critic.num_gpus_per_node": "--critic_num_gpus_per_node",
    "--vllm.num_engines": "--vllm_num_engines",
    "--vllm.tensor_parallel_size": "--vllm_tensor_parallel_size",
    "--vllm.gpu_memory_utilization": "--vllm_gpu_memory_utilization",
    "--vllm.enable_sleep": "--vllm_enable_sleep",
    "--ds.enable_sleep": "--deepspeed_enable_sleep",
    "--train.colocate_all": "--colocate_all_models",
    "--train.colocate_actor_ref": "--colocate_actor_ref",
    "--train.colocate_critic_reward": "--colocate_critic_reward",
    "--ds.zero_stage": "--zero_stage",
    "--ds.tensor_parallel_size": "--ds_tensor_parallel_size",
    "--actor.gradient_checkpointing_enable": "--gradient_checkpointing",
    "--train.micro_batch_size": "--micro_train_batch_size",
    "--rollout.micro_batch_size": "--micro_rollout_batch_size",
    "--ds.adam_offload": "--adam_offload",
    "--ref.offload": "--ref_reward_offload",
    "--reward.offload": "--ref_reward_offload",
    "--reward.remote_url": "--remote_rm_url",
    "--train.async_enable": "--async_train",
    "--train.async_queue_size": "--async_queue_size",
}

#: Ray groups: the vertices each runs.
_GROUPS = {
    "vllm": ("actor.generate",),
    "actor": ("actor.train", "actor.infer"),
    "ref": ("reference.infer",),
    "reward": ("reward.infer",),
    "critic": ("critic.train", "critic.infer"),
}


def _workload(facts: PlanFacts, out: Settings) -> None:
    instance = facts.instance
    workload = instance.workload
    # Every flag: openrlhf/cli/train_ppo_ray.py (v0.11.0).
    if instance.algorithm == "dpo":
        out.unsupported(
            "online DPO (train_ppo_ray trains PPO-family algorithms; openrlhf/cli/train_dpo.py "
            "is offline DPO); the flags below describe the plan's placement only"
        )
    else:
        estimator = "group_norm" if instance.algorithm == "grpo" else "gae"
        out.set("--algo.advantage.estimator", estimator)
    out.set("--rollout.batch_size", workload.batch_size)
    out.set("--rollout.n_samples_per_prompt", workload.samples_per_prompt)
    out.set("--data.max_len", workload.total_length)
    out.set("--rollout.max_new_tokens", workload.generation_length)
    if instance.engine.sequence_packing:
        out.set("--ds.packing_samples", True)


#: Placeholder of the reward function's file: the plan does not know the user's.
REWARD_FUNC_FILE = "reward_func.py"


def _rule_reward(facts: PlanFacts, out: Settings) -> None:
    """A rule reward: ``--reward.remote_url`` naming a Python file with ``reward_func``."""
    facts.reward_rule_comment(
        out,
        f"OpenRLHF loads reward_func(queries, prompts, labels) from the .py file given as "
        f"--reward.remote_url (openrlhf/utils/agent.py); replace {REWARD_FUNC_FILE} by yours",
    )
    out.set("--reward.remote_url", REWARD_FUNC_FILE)
    rule = facts.reward_rule
    assert rule is not None
    if rule["workers"] > 1:
        out.unsupported(
            f"{rule['workers']} reward workers (reward_func runs in the vLLM engines' agent "
            "executors, one call per sample: no worker count of its own)"
        )


def _group_anchor(facts: PlanFacts, group: str) -> str | None:
    """The vertex whose block is the group's GPUs (None when the plan has no such group)."""
    for name in _GROUPS[group]:
        if facts.has(name):
            return name
    return None


def _placement(facts: PlanFacts, out: Settings) -> bool:
    """Group sizes, vLLM engines and colocation flags; returns whether all is colocated."""
    anchors = {group: _group_anchor(facts, group) for group in _GROUPS}
    present = {group: name for group, name in anchors.items() if name is not None}
    blocks = {facts.block(name) for name in facts.blocks}
    colocate_all = len(blocks) == 1
    for group in ("actor", "ref", "reward", "critic"):
        name = present.get(group)
        if name is None:
            continue
        nodes, width = facts.nodes(name)
        out.set(f"--{group}.num_nodes", nodes)
        out.set(f"--{group}.num_gpus_per_node", width)
    tp, pp, dp = facts.layout("actor.generate")
    out.set("--vllm.num_engines", dp)
    out.set("--vllm.tensor_parallel_size", tp)
    if pp > 1:
        out.unsupported(f"rollout pp {pp} (vLLM engines are tensor parallel only here)")
    out.set("--vllm.gpu_memory_utilization", facts.utilization("actor.generate"))
    out.unsupported(
        f"rollout max_num_seqs {facts.entry('actor.generate')['max_num_seqs']} (no flag; "
        "vLLM's default applies)"
    )
    for group, members in (("actor", ("actor.infer",)), ("critic", ("critic.infer",))):
        anchor = present.get(group)
        for member in members:
            if anchor is None or member == anchor or not facts.has(member):
                continue
            if not facts.same_block(member, anchor) or facts.layout(member) != facts.layout(anchor):
                out.unsupported(
                    f"{facts.where(member)} apart from {facts.where(anchor)} (it runs on the "
                    f"{group} group)"
                )
    if colocate_all:
        out.set("--train.colocate_all", True)
        return True
    pairs = set()
    if "ref" in present and facts.same_block(present["actor"], present["ref"]):
        out.set("--train.colocate_actor_ref", True)
        pairs.add(frozenset(("actor", "ref")))
    if (
        "critic" in present
        and "reward" in present
        and facts.same_block(present["critic"], present["reward"])
    ):
        out.set("--train.colocate_critic_reward", True)
        pairs.add(frozenset(("critic", "reward")))
    groups = sorted(present)
    for index, first in enumerate(groups):
        for second in groups[index + 1 :]:
            if frozenset((first, second)) in pairs:
                continue
            if not facts.disjoint(present[first], present[second]):
                out.unsupported(
                    f"{present[first]} on {gpus_words(facts.block(present[first]))} sharing "
                    f"GPUs with {present[second]} on {gpus_words(facts.block(present[second]))} "
                    "(groups share GPUs only with --train.colocate_all, "
                    "--train.colocate_actor_ref or --train.colocate_critic_reward)"
                )
    return False


def _training(facts: PlanFacts, out: Settings, colocate_all: bool, asynchronous: bool) -> None:
    actor = facts.entry("actor.train")
    out.set("--ds.zero_stage", 3 if actor[SHARDING.label] == Sharding.ZERO3 else 1)
    tp, pp, _ = facts.layout("actor.train")
    if tp > 1:
        out.set("--ds.tensor_parallel_size", tp)
    if pp > 1:
        out.unsupported(f"actor.train pp {pp} (DeepSpeed here has no pipeline parallelism)")
    for name in ("actor.infer", "reference.infer", "reward.infer", "critic.infer", "critic.train"):
        if not facts.has(name):
            continue
        other_tp, other_pp, _ = facts.layout(name)
        if other_pp > 1:
            out.unsupported(f"{name} pp {other_pp} (no pipeline parallelism)")
        if other_tp != tp:
            out.unsupported(
                f"{name} tp {other_tp} while actor.train tp {tp} (one --ds.tensor_parallel_size "
                "for every DeepSpeed model)"
            )
    if actor[RECOMPUTE.label] == Recompute.FULL:
        out.set("--actor.gradient_checkpointing_enable", True)
    out.set("--train.micro_batch_size", facts.micro_batch("actor.train"))
    offload = bool(actor[OFFLOAD.label])
    if offload and colocate_all and not asynchronous:
        out.set("--ds.enable_sleep", True)
    elif offload:
        out.set("--ds.adam_offload", True)
        out.comment(
            "--ds.adam_offload moves the Adam states to the host; the plan's offload also "
            "moves the weights and gradients between training runs"
        )
    if facts.has("critic.train"):
        critic = facts.entry("critic.train")
        for declared in (SHARDING, RECOMPUTE):
            field = declared.label
            if critic[field] != actor[field]:
                out.unsupported(
                    f"critic.train {field} {critic[field]} while actor.train {actor[field]} "
                    "(actor and critic share the DeepSpeed flags)"
                )
        if facts.micro_batch("critic.train") != facts.micro_batch("actor.train"):
            out.unsupported(
                f"critic.train micro-batch {facts.micro_batch('critic.train')} per GPU while "
                f"actor.train {facts.micro_batch('actor.train')} (one --train.micro_batch_size)"
            )
        if bool(critic[OFFLOAD.label]) != offload:
            out.unsupported(
                f"critic.train {OFFLOAD.label} {value_word(critic[OFFLOAD.label])} while "
                f"actor.train {value_word(offload)} (actor and critic share the DeepSpeed flags)"
            )


def _experience(facts: PlanFacts, out: Settings) -> None:
    infers = [
        name
        for name in ("actor.infer", "reference.infer", "reward.infer", "critic.infer")
        if facts.has(name)
    ]
    if not infers:
        return
    first = infers[0]
    out.set("--rollout.micro_batch_size", facts.micro_batch(first))
    for name in infers[1:]:
        if facts.micro_batch(name) != facts.micro_batch(first):
            out.unsupported(
                f"{name} micro-batch {facts.micro_batch(name)} per GPU while {first} "
                f"{facts.micro_batch(first)} (one --rollout.micro_batch_size)"
            )
    for name, flag in (("reference.infer", "--ref.offload"), ("reward.infer", "--reward.offload")):
        if facts.has(name) and facts.entry(name)[OFFLOAD.label]:
            out.set(flag, True)
    for name, owner in (("actor.infer", "actor.train"), ("critic.infer", "critic.train")):
        if (
            facts.has(name)
            and facts.entry(name)[OFFLOAD.label] != facts.entry(owner)[OFFLOAD.label]
        ):
            out.unsupported(
                f"{name} {OFFLOAD.label} {value_word(facts.entry(name)[OFFLOAD.label])} while "
                f"{owner} {value_word(facts.entry(owner)[OFFLOAD.label])} (they run on one group)"
            )


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's OpenRLHF flags, in order.

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Flags (``True`` for a switch) and comment lines.
    """
    out = Settings("OpenRLHF")
    facts.header(
        out,
        plan_name,
        "flags of python3 -m openrlhf.cli.train_ppo_ray (OpenRLHF >= 0.10.1: "
        "openrlhf/cli/train_ppo_ray.py), one per line",
    )
    _workload(facts, out)
    if facts.reward_rule is not None:
        _rule_reward(facts, out)
    actor_steps = facts.staleness.get("actor", 0)
    colocate_all = _placement(facts, out)
    if colocate_all and actor_steps == 0:
        out.set("--vllm.enable_sleep", True)
    elif colocate_all:
        out.unsupported(
            "the rollout sleeping between its runs under staleness "
            f"{actor_steps} (async mode keeps vLLM awake: train_ppo_ray asserts it)"
        )
    _training(facts, out, colocate_all, actor_steps > 0)
    _experience(facts, out)
    if actor_steps > 0:
        out.set("--train.async_enable", True)
        out.set("--train.async_queue_size", actor_steps)
    for model, steps in sorted(facts.staleness.items()):
        if model != "actor" and steps > 0:
            out.unsupported(f"{model} staleness {steps} (values always use the latest critic)")
    used = sorted(
        {LEGACY_FLAGS[key] for kind, key, _ in out.items if kind == "set" and key in LEGACY_FLAGS}
    )
    if used:
        pairs = ", ".join(
            f"{key} -> {LEGACY_FLAGS[key]}"
            for kind, key, _ in out.items
            if kind == "set" and key in LEGACY_FLAGS
        )
        out.comment(f"OpenRLHF <= 0.10.0 spells these flags: {pairs}")
    return out


def render(out: Settings) -> str:
    """One flag per line (``--flag value``, or ``--flag`` for a switch) and ``# comment`` lines."""
    lines = []
    for kind, key, value in out.items:
        if kind == "comment":
            lines.append(f"# {key}")
        elif value is True:
            lines.append(key)
        elif value is not False:
            lines.append(f"{key} {value}")
    return "\n".join(lines) + "\n"
