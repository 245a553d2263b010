"""A plan in the vocabulary of RL frameworks (docs/outputs.md).

Users configure verl, NeMo RL or OpenRLHF, not blocks and candidates.
:func:`framework_view` restates a plan in their terms: per vertex the GPUs,
tp/pp/dp, the micro-batch size per GPU (sequences and tokens), activation
recompute, state sharding, offload, the rollout engine's
``gpu_memory_utilization`` and ``max_num_seqs`` with the concurrency they
give; which vertices are colocated and which run concurrently; and each
model's staleness in words.
The result is a plain JSON-able dict, written to ``result.json`` under
``"framework"`` and rendered as the "Framework settings" section of
``report.md`` (:func:`framework_markdown`).

Conventions fixed here:

* the micro-batch size per GPU counts the sequences of one microbatch of
  one data-parallel replica, ``ceil(ceil(B*K/dp) / microbatches)`` (every
  GPU of the replica's tp x pp group works on it); its tokens use the mean
  tokens per sequence of the cost model (``E[S+T]`` with sequence packing,
  ``S+T`` without);
* ``gpu_memory_utilization`` and ``max_num_seqs`` of a rollout are the
  plan's; its ``effective_concurrency`` is the sequences a replica keeps in
  flight, ``min(max_num_seqs, sequences per replica, KV pool tokens / mean
  live context)`` (docs/cost-model.md#rollout-engine-memory), and
  ``rollout_memory_bytes`` splits the engine's share of a GPU into weights,
  KV pool and workspace;
* vertices are *colocated* when their blocks share a GPU; the groups are the
  connected components of that relation, with the union of their GPUs, and
  whether they sit on one block (``same_block``) or one of their blocks
  holds the others (``nested``: always with aligned blocks, which are nested
  or disjoint; not for runs of nodes that overlap in part, nodes 0-2 and
  1-3);
* two vertices run *concurrently* when their blocks are disjoint and some of
  their runs overlap in time in the simulated trace (any steps);
* settings the instance pins (``placement.pin``) are listed per vertex under
  ``pinned`` (plan-file field names) and marked with a dagger in the
  markdown table;
* a rule-based reward is no vertex: ``reward_rule`` gives its CPU stage
  (``reward.rule``), its workers, its time per sample and per step and the
  vertices that wait for it.
"""

from __future__ import annotations

import math
from typing import Any

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.strategy import DIMENSIONS, Dimension, dimension, dimensions_of
from rlplan.rpeg.templates import RULE_STAGE, Kind

#: What the sharding candidates are called in the frameworks.
SHARDING_WORDS = dimension("sharding").words

#: What the recompute candidates are called in the frameworks.
RECOMPUTE_WORDS = dimension("recompute").words

#: Where each setting is typed in each framework, as markdown (``None``: no
#: knob of its own). Names checked against the frameworks' sources, as
#: ``export-config`` writes them (rpeg/frameworks/): verl's
#: verl/trainer/config/_generated_ppo_trainer.yaml and
#: _generated_ppo_megatron_trainer.yaml (volcengine/verl b178a3cd), NeMo RL's
#: examples/configs/grpo_math_1B*.yaml (NVIDIA-NeMo/RL 7ea279ab) and OpenRLHF's
#: openrlhf/cli/train_ppo_ray.py (v0.11.0; dotted flags since v0.10.1).
FRAMEWORK_KEYS: dict[str, dict[str, str | None]] = {
    "rollout tp": {
        "verl": "`actor_rollout_ref.rollout.tensor_model_parallel_size`",
        "NeMo RL": "`policy.generation.vllm_cfg.tensor_parallel_size`",
        "OpenRLHF": "`--vllm.tensor_parallel_size` (`--vllm.num_engines` replicas)",
    },
    "max_num_seqs": {
        "verl": "`actor_rollout_ref.rollout.max_num_seqs`",
        "NeMo RL": "`policy.generation.vllm_kwargs.max_num_seqs`",
        "OpenRLHF": None,
    },
    "gpu_memory_utilization": {
        "verl": "`actor_rollout_ref.rollout.gpu_memory_utilization`",
        "NeMo RL": "`policy.generation.vllm_cfg.gpu_memory_utilization`",
        "OpenRLHF": "`--vllm.gpu_memory_utilization`",
    },
    "train micro-batch size per GPU": {
        "verl": "`actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu`, "
        "`critic.ppo_micro_batch_size_per_gpu`",
        "NeMo RL": "`policy.train_micro_batch_size`",
        "OpenRLHF": "`--train.micro_batch_size`",
    },
    "train micro-batch tokens per GPU": {
        "verl": "`actor_rollout_ref.actor.ppo_max_token_len_per_gpu` (with `use_dynamic_bsz`)",
        "NeMo RL": "`policy.sequence_packing.train_mb_tokens`",
        "OpenRLHF": "`--train.max_tokens_per_gpu` (with `--train.dynamic_batch_enable`)",
    },
    "infer micro-batch size per GPU": {
        "verl": "`actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu`, "
        "`actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu`",
        "NeMo RL": "`policy.logprob_batch_size`",
        "OpenRLHF": "`--rollout.micro_batch_size`",
    },
    "infer micro-batch tokens per GPU": {
        "verl": "`actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu`",
        "NeMo RL": "`policy.sequence_packing.logprob_mb_tokens`",
        "OpenRLHF": "`--rollout.max_tokens_per_gpu` (with `--train.dynamic_batch_enable`)",
    },
    "recompute": {
        "verl": "`actor_rollout_ref.model.enable_gradient_checkpointing` (FSDP); "
        "`actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity` "
        "(Megatron)",
        "NeMo RL": "`policy.dtensor_cfg.activation_checkpointing`, "
        "`policy.megatron_cfg.activation_checkpointing`",
        "OpenRLHF": "`--actor.gradient_checkpointing_enable`",
    },
    "sharding": {
        "verl": "`actor_rollout_ref.actor.strategy`: `fsdp` (ZeRO-3) or `megatron` "
        "(distributed optimizer, ZeRO-1)",
        "NeMo RL": "`policy.dtensor_cfg` (FSDP2, ZeRO-3) or "
        "`policy.megatron_cfg.optimizer.use_distributed_optimizer` (ZeRO-1)",
        "OpenRLHF": "`--ds.zero_stage`",
    },
    "offload": {
        "verl": "`actor_rollout_ref.actor.fsdp_config.param_offload`, `optimizer_offload` "
        "(FSDP); `actor_rollout_ref.actor.megatron.param_offload`, `grad_offload`, "
        "`optimizer_offload` (Megatron)",
        "NeMo RL": "`policy.dtensor_cfg.cpu_offload`",
        "OpenRLHF": "`--ds.adam_offload`, `--ds.enable_sleep`, `--ref.offload`, `--reward.offload`",
    },
    "colocation": {
        "verl": "one resource pool (hybrid engine: rollout, actor, reference and critic); "
        "`reward_model.enable_resource_pool`",
        "NeMo RL": "`policy.generation.colocated.enabled`",
        "OpenRLHF": "`--train.colocate_all`, `--train.colocate_actor_ref`, "
        "`--train.colocate_critic_reward`",
    },
    "staleness": {
        "verl": "`verl/experimental/one_step_off_policy` (the main trainer is synchronous)",
        "NeMo RL": "`grpo.async_grpo.enabled`, `grpo.async_grpo.max_trajectory_age_steps`",
        "OpenRLHF": "`--train.async_enable`, `--train.async_queue_size`",
    },
}

_COUNT_WORDS = {1: "one", 2: "two", 3: "three"}


def staleness_words(steps: int) -> str:
    """Staleness in words: 0 on-policy, 1 one-step off-policy, k k-step off-policy.

    Parameters
    ----------
    steps
        How many steps old the weights a model's users read may be.

    Returns
    -------
    str
        ``"on-policy (synchronous)"``, ``"one-step off-policy"``,
        ``"two-step off-policy"``, ..., ``"5-step off-policy"``.
    """
    if steps == 0:
        return "on-policy (synchronous)"
    return f"{_COUNT_WORDS.get(steps, str(steps))}-step off-policy"


def _gpus_label(gpus: list[int]) -> str:
    if len(gpus) == 1:
        return f"GPU {gpus[0]}"
    return f"GPUs {gpus[0]}-{gpus[-1]}"


def _vertex_entry(problem: Problem, index: int, plan: Plan) -> dict[str, Any]:
    """One vertex in framework terms (only the settings that apply to its kind)."""
    directory = problem.directory
    vertex = directory.template.vertices[index]
    placement = plan.placements[index]
    # The pool's cost model: its memory per GPU sizes the rollout's pool.
    cost = directory.cost_of(placement.block.extent)
    strategy: Strategy = placement.strategy
    gpus = list(placement.block.gpus())
    entry: dict[str, Any] = {
        "model": vertex.model,
        "kind": vertex.kind.value,
        "gpus": gpus,
        "num_gpus": len(gpus),
        "tp": strategy.tp,
        "pp": strategy.pp,
        "dp": strategy.dp,
        "sequences_per_replica": cost.replica_sequences(strategy),
        "pinned": sorted(problem.instance.placement.pin.pinned_fields(vertex.name)),
    }
    if vertex.kind is Kind.GENERATE:
        entry["rollout_replicas"] = strategy.dp
        entry["gpu_memory_utilization"] = strategy.gpu_memory_utilization
        entry["max_num_seqs"] = strategy.max_num_seqs
        entry["effective_concurrency"] = cost.effective_concurrency(vertex.model, strategy)
        entry["kv_pool_tokens"] = math.floor(cost.rollout_pool_tokens(vertex.model, strategy))
        entry["rollout_memory_bytes"] = {
            "weights": cost.weight_shard(vertex.model, strategy),
            "kv_pool": max(cost.rollout_pool_bytes(vertex.model, strategy), 0.0),
            "workspace": problem.instance.engine.rollout_workspace,
        }
        return entry
    sequences = cost.microbatch_sequences(strategy)
    entry["microbatches"] = strategy.microbatches
    entry["micro_batch_size_per_gpu"] = sequences
    entry["micro_batch_tokens_per_gpu"] = sequences * cost.sequence_tokens
    # Every dimension of the kind under its framework label (and its framework
    # words when it has them); a rollout's are set above.
    for declared in dimensions_of(vertex.kind):
        value = getattr(strategy, declared.name)
        if not declared.written_at_default and value == declared.default:
            continue  # expert and context parallelism: shown where used
        entry[declared.label] = str(value) if isinstance(value, str) else value
        if declared.words is not None:
            entry[f"{declared.label}_words"] = declared.words[value]
    return entry


def _colocated(problem: Problem, plan: Plan) -> list[dict[str, Any]]:
    """Connected components (two or more vertices) of the shares-a-GPU relation."""
    names = problem.directory.template.names
    blocks = [placement.block for placement in plan.placements]
    parent = list(range(len(blocks)))

    def root(item: int) -> int:
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    for first in range(len(blocks)):
        for second in range(first + 1, len(blocks)):
            if blocks[first].intersects(blocks[second]):
                parent[root(second)] = root(first)
    members: dict[int, list[int]] = {}
    for index in range(len(blocks)):
        members.setdefault(root(index), []).append(index)
    groups = []
    for indices in sorted(members.values()):
        if len(indices) < 2:
            continue
        gpus = sorted({gpu for index in indices for gpu in blocks[index].gpus()})
        largest = max((blocks[index] for index in indices), key=lambda block: block.size)
        groups.append(
            {
                "vertices": [names[index] for index in indices],
                "gpus": gpus,
                "same_block": all(blocks[index] == blocks[indices[0]] for index in indices),
                "nested": all(largest.contains(blocks[index]) for index in indices),
            }
        )
    return groups


def _concurrent(problem: Problem, plan: Plan, trace: Trace) -> list[dict[str, Any]]:
    """Vertex pairs on disjoint GPUs whose runs overlap in time, with the total overlap."""
    names = problem.directory.template.names
    position = {name: index for index, name in enumerate(names)}
    blocks = [placement.block for placement in plan.placements]
    runs: dict[int, list[tuple[float, float]]] = {}
    for (vertex, _), span in trace.run_spans().items():
        runs.setdefault(position[vertex], []).append(span)
    tolerance = 1e-12 * max(trace.makespan, 1.0)
    pairs = []
    for first in range(len(names)):
        for second in range(first + 1, len(names)):
            if blocks[first].intersects(blocks[second]):
                continue
            overlap = 0.0
            for start_a, end_a in runs.get(first, []):
                for start_b, end_b in runs.get(second, []):
                    overlap += max(0.0, min(end_a, end_b) - max(start_a, start_b))
            if overlap > tolerance:
                pairs.append({"vertices": [names[first], names[second]], "overlap_s": overlap})
    return pairs


def _staleness(problem: Problem, plan: Plan) -> dict[str, dict[str, Any]]:
    """Each trained model's staleness, in words, with the vertices it applies to."""
    template = problem.directory.template
    described = {}
    for model, steps in plan.staleness:
        stale = [
            template.vertices[edge.dst].name
            for edge in template.pub_edges
            if edge.model == model and not edge.synchronous
        ]
        latest = [
            template.vertices[edge.dst].name
            for edge in template.pub_edges
            if edge.model == model and edge.synchronous
        ]
        parts = []
        if stale:
            age = (
                "the latest weights"
                if steps == 0
                else f"weights {steps} step{'s' if steps > 1 else ''} old"
            )
            parts.append(f"{', '.join(stale)} uses {age}")
        if latest:
            parts.append(f"{', '.join(latest)} always uses the latest weights")
        described[model] = {
            "steps": steps,
            "words": staleness_words(steps),
            "stale_users": stale,
            "latest_weights_users": latest,
            "detail": "; ".join(parts),
            "pinned": problem.instance.placement.pin.staleness_of(model) is not None,
        }
    return described


#: What a fused actor-critic (AC-share) plan means, and that no framework here has it.
FUSED_WORDS = (
    "actor and critic are one model `ac` (the actor's backbone with a policy head and a "
    "value head): ac.infer computes old log-probs and values in one forward, ac.train the "
    "policy and value loss in one backward. verl, NeMo RL and OpenRLHF have no setting for a "
    "shared actor-critic backbone: their configurations cannot express this plan as is"
)


def reward_rule_view(problem: Problem) -> dict[str, Any] | None:
    """The rule reward's CPU stage (None when the reward is a model or absent).

    Returns
    -------
    dict or None
        ``stage`` (:data:`~rlplan.rpeg.templates.RULE_STAGE`), ``workers``,
        ``seconds_per_sample``, ``seconds_per_step`` (``ceil(B*K / w) * t``)
        and ``before``: the vertices that wait for it.
    """
    instance, template = problem.instance, problem.directory.template
    rule = instance.reward_rule
    if rule is None:
        return None
    return {
        "stage": RULE_STAGE,
        "workers": rule.workers,
        "seconds_per_sample": rule.seconds_per_sample,
        "seconds_per_step": instance.reward_rule_seconds,
        "before": [template.names[edge.dst] for edge in template.stage_edges],
    }


def reward_rule_words(view: dict[str, Any]) -> str:
    """One sentence on a :func:`reward_rule_view`: what runs, where, for how long."""
    workers = view["workers"]
    return (
        f"{view['stage']}: a rule-based reward (no model, no GPU) on {workers} CPU "
        f"worker{'s' if workers > 1 else ''}, {view['seconds_per_sample']:g} s per sample, "
        f"{view['seconds_per_step']:.4g} s per step between actor.generate and "
        f"{', '.join(view['before'])}"
    )


def framework_view(problem: Problem, plan: Plan, trace: Trace | None = None) -> dict[str, Any]:
    """The plan in the vocabulary of verl, NeMo RL and OpenRLHF.

    Parameters
    ----------
    problem
        The instance's problem (candidate directory, cost model, simulator).
    plan
        The plan to describe.
    trace
        The plan's simulated trace (it decides which vertices run
        concurrently); simulated here when not given.

    Returns
    -------
    dict
        A JSON-able document: ``vertices`` (per vertex name: ``gpus``, ``tp``,
        ``pp``, ``dp``; ``micro_batch_size_per_gpu`` and
        ``micro_batch_tokens_per_gpu`` for train and infer; ``recompute`` and
        ``sharding`` for train; ``offload`` for train and infer;
        ``gpu_memory_utilization``, ``max_num_seqs``, ``effective_concurrency``,
        ``kv_pool_tokens`` and ``rollout_memory_bytes`` for generate),
        ``colocated`` (groups of vertices sharing GPUs), ``concurrent``
        (pairs of vertices on disjoint GPUs that overlap in time),
        ``staleness`` (per trained model: ``steps``, ``words`` such as
        "one-step off-policy", the vertices that read stale weights and those
        that always read the latest, and a ``detail`` sentence) and the workload figures
        the settings rest on (``sequences_per_step``,
        ``tokens_per_sequence``, ``memory_per_gpu_bytes``). PPO plans add
        ``template`` (``separate`` or ``ac_share``), and fused ones
        ``fused_actor_critic``: :data:`FUSED_WORDS`. A rule-based reward
        adds ``reward_rule`` (:func:`reward_rule_view`).
    """
    problem = problem.for_plan(plan)
    if trace is None:
        trace = problem.simulator.simulate(plan)
    template = problem.directory.template
    instance = problem.instance
    extra: dict[str, Any] = {}
    if instance.algorithm == "ppo":
        extra["template"] = plan.template
        if plan.fused:
            extra["fused_actor_critic"] = FUSED_WORDS
    rule = reward_rule_view(problem)
    if rule is not None:
        extra["reward_rule"] = rule
    return {
        **extra,
        "sequences_per_step": instance.workload.sequences,
        "tokens_per_sequence": problem.directory.cost.sequence_tokens,
        "sequence_packing": instance.engine.sequence_packing,
        "memory_per_gpu_bytes": instance.hardware.memory_per_gpu,
        "vertices": {
            vertex.name: _vertex_entry(problem, index, plan)
            for index, vertex in enumerate(template.vertices)
        },
        "colocated": _colocated(problem, plan),
        "concurrent": _concurrent(problem, plan, trace),
        "staleness": _staleness(problem, plan),
    }


#: Columns of the markdown table marked for each pinned plan-file field (a
#: dimension's column is its framework label).
_PINNED_COLUMN = {
    "block": "gpus",
    "dp": "dp",
    "pp": "pp",
    "tp": "tp",
    "microbatches": "micro",
    "micro_batch_size": "micro",
    **{declared.name: declared.label for declared in DIMENSIONS},
}
#: Marker of a pinned value in the markdown table.
PIN_MARK = " †"


def _cell(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _dimension_cell(entry: dict[str, Any], declared: Dimension) -> str:
    """A dimension's cell: its framework words (or value), and the pin marker."""
    if declared.words is not None:
        shown = entry.get(f"{declared.label}_words", "—")
    else:
        shown = _cell(entry, declared.label)
    return f"{shown}{_mark(entry, declared.label)}"


def _mark(entry: dict[str, Any], column: str) -> str:
    """The pin marker when a pinned field of ``entry`` shows in ``column``, else ``""``."""
    pinned = {_PINNED_COLUMN[name] for name in entry.get("pinned", ())}
    return PIN_MARK if column in pinned else ""


def framework_markdown(view: dict[str, Any]) -> list[str]:
    """Markdown lines of the "Framework settings" section of ``report.md``.

    The section is built by :func:`rlplan.outputs.framework_section.framework_section`,
    which report.html shares.

    Parameters
    ----------
    view
        A document from :func:`framework_view`.

    Returns
    -------
    list of str
        The section, heading included, one line per element.
    """
    # Imported here: the section builder reads this module's words and keys.
    from rlplan.outputs.framework_section import framework_section, section_markdown

    return section_markdown(framework_section(view))
