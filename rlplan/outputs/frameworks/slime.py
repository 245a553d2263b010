"""A plan as slime settings: flags of ``python3 train.py`` (``train_async.py`` when off-policy).

Every flag is one of slime's parser at THUDM/slime v0.3.1 (commit a6272da0,
the release :mod:`rlplan.rpeg.model.frameworks.slime` is read from; slime is
not on PyPI): slime/utils/arguments.py ``parse_args`` joins slime's own flags,
Megatron-LM's (``megatron.training.arguments``, at the commit slime's
docker/Dockerfile pins, 1dcf0daf, with docker/patch/latest/megatron.patch) and
SGLang's server flags prefixed ``--sglang-`` (v0.5.15.post1, the stable image
of docker/README.md; slime/backends/sglang_utils/arguments.py).
tests/data/releases/slime.json lists them (benchmarks/release_keys/slime.py).
The export is a bash array of flags, one per line with comment lines between
them, and its command.

How the plan maps onto slime:

* the Megatron actor is ``--actor-num-nodes`` x ``--actor-num-gpus-per-node``
  GPUs in its layout (tp, pp, cp, ep, etp, distributed optimizer); old
  log-probs, reference log-probs and the PPO critic run on those GPUs in that
  layout (the plan space's rules); the SGLang engines take
  ``--rollout-num-gpus`` GPUs after the actor's, or from GPU 0 with
  ``--colocate`` (slime/ray/placement_group.py ``_get_placement_group_layout``);
* ``workload.optimizer_steps`` n: ``--global-batch-size`` B x K / n samples, one
  optimizer step each (slime/utils/dp_schedule.py ``build_dp_schedule``);
* actor staleness 1 is ``train_async.py`` (the next rollout generates while
  the current one trains).

The rollout, the reward and the GPU layout are in
:mod:`rlplan.outputs.frameworks.slime_rollout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.outputs.frameworks.common import (
    OFFLOAD,
    RECOMPUTE,
    SHARDING,
    PlanFacts,
    Settings,
    fitting_micro_batch,
    gpus_words,
    optimizer_steps,
)
from rlplan.outputs.frameworks.pooled import cluster_words, pooled
from rlplan.outputs.frameworks.slime_rollout import (
    degree,
    gpu_pools,
    placement_keys,
    reward_keys,
    rollout_keys,
)
from rlplan.rpeg.model.frameworks.slime import RELEASE
from rlplan.rpeg.strategy import Recompute, Sharding, value_word

FRAMEWORK = "slime"
REPOSITORY = "https://github.com/THUDM/slime"
#: The file defining slime's own flags and joining Megatron-LM's and SGLang's.
SOURCE = "slime/utils/arguments.py"
#: The launch scripts: train.py on-policy, train_async.py one step off-policy.
SCRIPTS = ("train.py", "train_async.py")
#: Vertices computed on the actor's Megatron model, in its layout (the plan space's rules).
ON_ACTOR = ("actor.infer", "reference.infer", "critic.train")
#: Megatron's layout dimensions, with the Strategy fields they come from.
LAYOUT = (("tp", "tp"), ("pp", "pp"), ("dp", "dp"), ("cp", "cp"), ("ep", "ep"), ("etp", "etp"))


@dataclass
class SlimeSettings(Settings):
    """slime's settings and the launch script they are flags of (train.py or train_async.py)."""

    script: str = SCRIPTS[0]


def _user_lines(facts: PlanFacts, out: Settings) -> None:
    """What the user must still add: checkpoints, model shapes, data."""
    shapes = facts.instance.models["actor"]
    out.comment(
        "add: --hf-checkpoint <the actor, Hugging Face> and its Megatron shapes (MODEL_ARGS of "
        f"slime's scripts/models/*.sh; the plan is for {shapes.layers} layers of hidden size "
        f"{shapes.hidden_dim}, FFN {shapes.ffn_dim})"
    )
    out.comment(
        "add: --prompt-data <jsonl> --input-key <prompt field> --num-rollout <RL steps>"
        + (" --label-key <answer field>" if facts.reward_rule is not None else "")
    )
    if facts.has("reference.infer"):
        # slime_validate_args raises FileNotFoundError without it when use_kl_loss is set
        out.comment("add: --ref-load <the reference's Megatron checkpoint (torch_dist)>")
    if facts.has("critic.train"):
        out.comment(
            "add: the critic's checkpoint: a role critic entry of --megatron-config-path "
            "(slime/utils/arguments.py parse_megatron_role_args), else it starts from the actor's"
        )


def _cluster(facts: PlanFacts, out: Settings, script: str) -> None:
    """The Ray cluster and the job command (slime takes the GPUs from Ray)."""
    nodes, gpus = facts.cluster_nodes()
    used = len({gpu for block in facts.blocks.values() for gpu in block.gpus()})
    if pooled(facts):
        out.comment(
            f"cluster: the nodes of {cluster_words(facts)} in one Ray cluster (ray start --head "
            "on one node, ray start --address <head>:6379 on the others, each with its pool's "
            f"--num-gpus); the plan uses {used} of its GPUs"
        )
    else:
        out.comment(
            f"cluster: {nodes} node{'s' if nodes > 1 else ''} x {gpus} GPUs in one Ray cluster "
            f"(ray start --head --num-gpus {gpus}, ray start --address <head>:6379 on the "
            f"others); the plan uses {used} of its GPUs"
        )
    # scripts/run-qwen3-4B.sh: ray job submit ... -- python3 train.py, PYTHONPATH /root/Megatron-LM
    out.comment(
        f'run: ray job submit --address=http://127.0.0.1:8265 -- python3 {script} "${{args[@]}}" '
        "with Megatron-LM on PYTHONPATH (as slime's scripts/run-qwen3-4B.sh does)"
    )


def _workload(facts: PlanFacts, out: Settings) -> None:
    """Algorithm, batch, response length, reference and old log-probs (slime/utils/arguments.py)."""
    instance = facts.instance
    workload = instance.workload
    if instance.algorithm == "dpo":
        out.unsupported(
            "online DPO (--advantage-estimator has grpo, gspo, cispo, reinforce_plus_plus, "
            "reinforce_plus_plus_baseline, ppo); the flags below describe the placement only"
        )
    else:
        out.set("--advantage-estimator", "ppo" if instance.algorithm == "ppo" else "grpo")
    out.set("--rollout-batch-size", workload.batch_size)
    out.set("--n-samples-per-prompt", workload.samples_per_prompt)
    steps = optimizer_steps(instance)
    out.comment(
        f"{steps} optimizer step{'s' if steps > 1 else ''} per RL step (workload.optimizer_steps):"
        f" --global-batch-size = rollout-batch-size x n-samples-per-prompt / {steps} samples"
    )
    # --global-batch-size counts samples, not prompts (slime/utils/arguments.py, gbs comment)
    out.set("--global-batch-size", workload.mini_batch_sequences)
    out.set("--rollout-max-response-len", workload.generation_length)
    if facts.has("reference.infer"):
        # placement_group.py create_training_models: with_ref = kl_coef != 0 or use_kl_loss;
        # --kl-loss-coef defaults to 0.0 (scripts/run-qwen3-4B.sh sets 0.00): the pass runs anyway
        out.set("--use-kl-loss", True)
        out.comment("the KL loss coefficient is yours to choose: --kl-loss-coef (slime's 0.0)")
    else:
        out.comment("no reference model (engine.reference_model false): no KL, no --ref-load")
    _old_logprobs(facts, out, steps)


def _old_logprobs(facts: PlanFacts, out: Settings, steps: int) -> None:
    """Old log-probs: the rollout's without actor.infer; else a forward pass of the actor."""
    if not facts.has("actor.infer"):
        # MegatronTrainRayActor.train_actor skips compute_log_prob under use_rollout_logprobs
        # (slime/backends/megatron_utils/actor.py)
        out.set("--use-rollout-logprobs", True)
        return
    if steps == 1 and facts.instance.algorithm == "grpo":
        out.comment(
            "actor.infer with one optimizer step: slime reuses the training forward's log-probs "
            "as the old ones and skips that pass (can_reuse_log_probs_in_loss in "
            "slime/backends/megatron_utils/actor.py train_actor)"
        )


def _tied(facts: PlanFacts, out: Settings) -> None:
    """Vertices slime runs on the actor's (or critic's) Megatron model: same GPUs and layout."""
    pairs = [(name, "actor.train") for name in ON_ACTOR] + [("critic.infer", "critic.train")]
    for name, leader in pairs:
        if not (facts.has(name) and facts.has(leader)):
            continue
        mine = [degree(facts, name, field) for _, field in LAYOUT]
        theirs = [degree(facts, leader, field) for _, field in LAYOUT]
        if facts.same_block(name, leader) and mine == theirs:
            continue
        words = ", ".join(
            f"{label} {value}" for (label, _), value in zip(LAYOUT, mine, strict=True)
        )
        lead = ", ".join(
            f"{label} {value}" for (label, _), value in zip(LAYOUT, theirs, strict=True)
        )
        out.unsupported(
            f"{name} on {gpus_words(facts.block(name))} ({words}) while {leader} on "
            f"{gpus_words(facts.block(leader))} ({lead}): slime computes it on {leader}'s "
            "Megatron model, on its GPUs and in its layout"
        )


def _megatron(facts: PlanFacts, out: Settings) -> None:
    """Megatron-LM's parallel, recompute and optimizer flags of the actor (and critic)."""
    name = "actor.train"
    entry = facts.entry(name)
    tp, pp = degree(facts, name, "tp"), degree(facts, name, "pp")
    # megatron/core/model_parallel_config.py (ModelParallelConfig fields, as flags through
    # megatron/training/argument_utils.py ArgumentGroupFactory); scripts/run-qwen3-30B-A3B.sh
    out.set("--tensor-model-parallel-size", tp)
    if tp > 1:
        # megatron/training/arguments.py validate_args turns it off at tp 1
        out.set("--sequence-parallel", True)
    out.set("--pipeline-model-parallel-size", pp)
    out.set("--context-parallel-size", degree(facts, name, "cp"))
    out.set("--expert-model-parallel-size", degree(facts, name, "ep"))
    # validate_args sets expert_tensor_parallel_size = tp when not given: always written
    out.set("--expert-tensor-parallel-size", degree(facts, name, "etp"))
    if entry[RECOMPUTE.label] == Recompute.FULL:
        # every layer's activations recomputed: scripts/run-qwen3-4B.sh's three flags
        out.set("--recompute-granularity", "full")
        out.set("--recompute-method", "uniform")
        out.set("--recompute-num-layers", 1)
    # slime/backends/megatron_utils/arguments.py _set_default_megatron_args sets it anyway
    out.set("--use-distributed-optimizer", True)
    if entry[SHARDING.label] != Sharding.ZERO1:
        out.unsupported(
            f"{name} sharding {value_word(entry[SHARDING.label])} (Megatron's distributed "
            "optimizer, ZeRO-1, is always on)"
        )
    if facts.has("critic.train"):
        critic = facts.entry("critic.train")
        for declared in (RECOMPUTE, SHARDING):
            field = declared.label
            if critic[field] != entry[field]:
                out.unsupported(
                    f"critic.train {field} {value_word(critic[field])} while {name} "
                    f"{value_word(entry[field])} (actor and critic share the Megatron flags; a "
                    "role critic entry of --megatron-config-path could override them)"
                )


def _offload(facts: PlanFacts, out: Settings, colocated: bool) -> None:
    """``--offload-train``: the actor's training states on the host outside its train call.

    slime_validate_args: ``--colocate`` makes it true unless ``--no-offload-train``;
    PPO (use_critic) makes it true whatever is given.
    """
    offload = bool(facts.entry("actor.train")[OFFLOAD.label])
    if colocated and not offload:
        out.set("--no-offload-train", True)
    elif offload and not colocated:
        out.set("--offload-train", True)
    for name in ("actor.infer", "critic.infer"):
        if facts.has(name) and facts.entry(name)[OFFLOAD.label] and not offload:
            out.unsupported(
                f"{name} offload true (it runs on the training model's resident states)"
            )


def _micro_batches(facts: PlanFacts, out: Settings) -> None:
    """``--micro-batch-size`` or ``--use-dynamic-batch-size --max-tokens-per-gpu``.

    slime/utils/dp_schedule.py ``build_dp_schedule``: a step's samples are cut
    into micro-batches of ``--micro-batch-size`` (their count must be a
    multiple of dp) or, dynamic, first-fit packed into bins of
    ``--max-tokens-per-gpu`` x cp tokens; log-prob, reference and value
    passes run on the same micro-batches (actor.py ``train_actor``).
    """
    name = "actor.train"
    cp = degree(facts, name, "cp")
    if facts.instance.engine.sequence_packing:
        out.set("--use-dynamic-batch-size", True)
        out.set("--max-tokens-per-gpu", -(-facts.micro_tokens(name) // cp))
        measure, unit = facts.micro_tokens, "tokens"
    else:
        sequences = facts.instance.workload.mini_batch_sequences
        dp = degree(facts, name, "dp")
        wanted = facts.micro_batch(name)
        micro = fitting_micro_batch(sequences, [dp], wanted)
        if micro != wanted:
            out.unsupported(
                f"{name} micro-batch {wanted} per GPU ({sequences} samples per step are no "
                f"multiple of {wanted} x dp {dp}, as build_dp_schedule asserts): {micro or 1} here"
            )
        out.set("--micro-batch-size", micro or 1)
        measure, unit = facts.micro_batch, "sequences"
    for other in ("actor.infer", "reference.infer", "critic.infer", "critic.train"):
        if facts.has(other) and measure(other) != measure(name):
            out.unsupported(
                f"{other} micro-batches of {measure(other)} {unit} per GPU while {name} "
                f"{measure(name)} (every Megatron pass takes the training micro-batches)"
            )


def _staleness(facts: PlanFacts, out: SlimeSettings) -> None:
    """train.py on-policy, train_async.py one step off-policy (the plan space allows 0 or 1)."""
    steps = facts.staleness.get("actor", 0)
    if steps >= 1:
        out.comment(
            "actor staleness 1: train_async.py generates rollout i+1 while rollout i trains, "
            "weights updated every step (--update-weights-interval 1, slime's default)"
        )
    if steps > 1:
        out.unsupported(f"actor staleness {steps} (train_async.py is one step off-policy)")
    for model, value in sorted(facts.staleness.items()):
        if model != "actor" and value > 0:
            out.unsupported(f"{model} staleness {value} (values always use the latest critic)")


def settings(facts: PlanFacts, plan_name: str) -> SlimeSettings:
    """The plan's slime flags, in order.

    Parameters
    ----------
    facts
        The plan and its instance.
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    SlimeSettings
        Flags (``True`` for a switch), comment lines and the launch script.
    """
    out = SlimeSettings("slime")
    # train_async.py for one step off-policy (the plan space allows staleness 0 or 1)
    out.script = SCRIPTS[1] if facts.staleness.get("actor", 0) >= 1 else SCRIPTS[0]
    script = out.script
    facts.header(
        out,
        plan_name,
        f"valid for slime {RELEASE} (git clone --branch {RELEASE} {REPOSITORY}; its image "
        f"slimerl/slime: SGLang v0.5.15.post1, Megatron-LM 1dcf0daf): flags of python3 {script} "
        f"({SOURCE} with Megatron-LM's and SGLang's --sglang-* flags), one per line",
    )
    _user_lines(facts, out)
    _cluster(facts, out, script)
    _workload(facts, out)
    reward_keys(facts, out)
    colocated = placement_keys(facts, out)
    gpu_pools(facts, out, colocated)
    rollout_keys(facts, out)
    _megatron(facts, out)
    _tied(facts, out)
    _offload(facts, out, colocated)
    _micro_batches(facts, out)
    _staleness(facts, out)
    return out


def render(out: Settings) -> str:
    """A bash array of flags (``--flag value``, ``--flag`` for a switch) and the command.

    Comment lines before the first flag come first; the others stay between
    the flags (bash allows them inside an array's parentheses).
    """
    head: list[str] = []
    body: list[str] = []
    for kind, key, value in out.items:
        target = body if body or kind == "set" else head
        if kind == "comment":
            target.append(f"# {key}")
        elif value is True:
            target.append(key)
        elif value is not False:
            target.append(f"{key} {_word(value)}")
    script = getattr(out, "script", SCRIPTS[0])
    return "\n".join([*head, "args=(", *body, ")", f'python3 {script} "${{args[@]}}"']) + "\n"


def _word(value: Any) -> str:
    return str(value)
