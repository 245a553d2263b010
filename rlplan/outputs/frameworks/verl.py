"""A plan as verl 0.9.1 settings: Hydra overrides for ``python3 -m verl.trainer.main_ppo``.

Every key is a key of verl 0.9.1 (PyPI ``verl==0.9.1``, the release
:mod:`rlplan.rpeg.model.frameworks.verl` reads its rules from), checked with
its value type against the wheel's ``verl/trainer/config/_generated_ppo_trainer.yaml``
and ``_generated_ppo_megatron_trainer.yaml`` (``tests/data/releases/verl.json``,
written by ``benchmarks/release_keys/verl.py``); paths below are files of
that release. Plans reaching :func:`settings` lie in verl's plan space.

How the plan maps onto verl:

* the backend: FSDP (``--config-name=ppo_trainer``) when every trained model
  is ZeRO-3 and the actor, critic and reference run with tp = pp = 1 and no
  expert or context parallelism; else Megatron (``ppo_megatron_trainer``) for
  all of them, tp, pp, ep, etp and cp per role (one layout: the rules tie the
  roles of the global pool), ZeRO-1 as the distributed optimizer and ZeRO-3 as
  Megatron-FSDP (``use_megatron_fsdp``, verl/workers/config/engine.py McoreEngineConfig);
* a mixture-of-experts rollout: ``expert_parallel_size`` ep and
  ``data_parallel_size`` ep/tp (vLLM expert parallelism with data-parallel
  attention, :func:`~rlplan.outputs.frameworks.verl_roles.vllm_experts`);
* the V1 trainer's mode (``trainer.v1.trainer_mode``,
  verl/trainer/ppo/v1/): ``sync`` for an on-policy plan with the rollout on
  the actor's GPUs, ``colocate_async`` for actor staleness s >= 1 there,
  ``separate_async`` when the rollout has GPUs of its own
  (``actor_rollout_ref.hybrid_engine=false``, the standalone pool
  ``actor_rollout_ref.rollout.nnodes`` x ``n_gpus_per_node``); an async
  mode prefetches s batches (``num_warmup_batches``) and bounds the age of a
  sample to s steps (``trainer.v1.sampler.max_off_policy_threshold`` s + 1
  model versions, strategy ``wait``: verl/trainer/ppo/v1/replay_buffer.py);
* ``workload.optimizer_steps`` n optimizer steps per RL step, as the cost
  model times n gradient synchronisations per train run (docs/cost-model.md,
  train time): ``ppo_mini_batch_size`` = ``data.train_batch_size`` / n
  prompts, ``ppo_epochs`` 1 (verl/workers/engine_workers.py
  ``TrainingWorker.train_mini_batch``: one optimizer step per mini-batch);
  ``separate_async`` runs them as n local updates before one weight sync
  (``parameter_sync_step`` n, which verl/trainer/ppo/v1/trainer_separate_async.py
  asserts equals ``train_batch_size / ppo_mini_batch_size``);
* the reference exists when ``engine.reference_model`` is true: verl builds
  it when ``actor.use_kl_loss`` or ``algorithm.use_kl_in_reward`` is set
  (verl/trainer/ppo/utils.py need_reference_policy);
* a rule reward is a scoring function run by ``reward.num_workers`` reward
  loop workers (verl/experimental/reward_loop/reward_loop.py), no model.
"""

from __future__ import annotations

from typing import Any

from rlplan.outputs.frameworks.common import SHARDING, PlanFacts, Settings, optimizer_steps
from rlplan.outputs.frameworks.pooled import cluster_words, pooled, roles_words, span
from rlplan.outputs.frameworks.verl_roles import (
    actor_keys,
    critic_keys,
    reference_keys,
    reward_keys,
    rollout_keys,
)
from rlplan.rpeg.model.frameworks.verl import RELEASE
from rlplan.rpeg.strategy import Sharding

FRAMEWORK = "verl"

#: Trained or scored roles whose engine the backend choice covers.
_ENGINE_VERTICES = ("actor.train", "critic.train", "reference.infer")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def megatron(facts: PlanFacts) -> bool:
    """Whether the plan needs verl's Megatron backend.

    ZeRO-1, or tp, pp, ep, etp or cp above 1: verl's FSDP engine
    (verl/trainer/config/engine/fsdp.yaml) has no tensor, pipeline, expert or
    context parallel size; Megatron's (engine/megatron.yaml) has them all.
    """
    for name in _ENGINE_VERTICES:
        if not facts.has(name):
            continue
        tp, pp, _ = facts.layout(name)
        ep, etp, cp = facts.degrees(name)
        entry = facts.entry(name)
        if (
            tp * pp * ep * etp * cp > 1
            or entry.get(SHARDING.label, Sharding.ZERO3) == Sharding.ZERO1
        ):
            return True
    return False


def trainer_mode(facts: PlanFacts) -> str:
    """``sync``, ``colocate_async`` or ``separate_async`` (verl/trainer/ppo/v1/)."""
    if facts.disjoint("actor.generate", "actor.train"):
        return "separate_async"
    return "colocate_async" if facts.staleness.get("actor", 0) > 0 else "sync"


def _header(facts: PlanFacts, out: Settings, config: str, plan_name: str) -> None:
    """The header, the command, and what the user must still add."""
    facts.header(
        out,
        plan_name,
        f"Hydra overrides for verl {RELEASE} (pip install verl=={RELEASE}): "
        f"python3 -m verl.trainer.main_ppo --config-name={config} "
        "followed by the key=value lines below",
    )
    out.comment(
        f"keys and value types checked against verl {RELEASE}'s "
        f"verl/trainer/config/_generated_{config}.yaml (tests/data/releases/verl.json)"
    )
    hardware = facts.instance.hardware
    if pooled(facts):
        out.comment(
            f"Ray cluster: the nodes of {cluster_words(facts)} (the instance's); "
            "the resource pools below take what the plan uses"
        )
    else:
        out.comment(
            f"Ray cluster: {hardware.racks * hardware.nodes_per_rack} nodes x "
            f"{hardware.gpus_per_node} GPUs (the instance's); "
            "the pools below take what the plan uses"
        )
    out.comment("add before running (paths the plan does not know):")
    out.comment("  actor_rollout_ref.model.path=<Hugging Face model id or local path>")
    if facts.has("critic.train"):
        out.comment("  critic.model.path=<the critic's initial model>")
    out.comment("  data.train_files=<train parquet> data.val_files=<validation parquet>")
    workload = facts.instance.workload
    out.comment(
        "  data.max_prompt_length=<your longest prompt, in tokens>: the plan assumes "
        f"{workload.context_length}-token prompts (workload.context_length); verl's "
        "default 512 with data.truncation=error stops at a longer one"
    )


def _algorithm(facts: PlanFacts, out: Settings) -> None:
    """adv_estimator, KL (the reference) and the old log-probs' source."""
    instance = facts.instance
    # algorithm.*: verl/trainer/config/ppo_trainer.yaml; GRPO's KL is a loss term
    # (actor.use_kl_loss: verl/trainer/config/actor/actor.yaml), PPO's a reward penalty.
    grpo = instance.algorithm == "grpo"
    out.set("algorithm.adv_estimator", "grpo" if grpo else "gae")
    reference = facts.has("reference.infer")
    out.set("actor_rollout_ref.actor.use_kl_loss", _bool(reference and grpo))
    out.set("algorithm.use_kl_in_reward", _bool(reference and not grpo))
    if not reference:
        out.comment("no reference model (engine.reference_model false): no KL term, no ref worker")
    if not facts.has("actor.infer"):
        # bypass_mode: old log-probs are the rollout's (verl/trainer/config/algorithm.py
        # RolloutCorrectionConfig; PPOTrainer._compute_old_log_prob).
        out.set("algorithm.rollout_correction.bypass_mode", "true")


def verl_steps(facts: PlanFacts) -> int:
    """Optimizer steps per RL step verl can take: the workload's, if it divides the prompts.

    ``ppo_mini_batch_size`` counts prompts (verl multiplies it by rollout.n),
    so n mini-batches need n to divide ``data.train_batch_size``; otherwise the
    largest divisor of it below n.
    """
    prompts = facts.instance.workload.batch_size
    steps = optimizer_steps(facts.instance)
    return max(d for d in range(1, steps + 1) if prompts % d == 0)


def _batches(facts: PlanFacts, out: Settings) -> None:
    """Prompts, samples, the mini-batch of one optimizer step, and the lengths."""
    workload = facts.instance.workload
    # data.*: verl/trainer/config/data/legacy_data.yaml; rollout.n: rollout/rollout.yaml
    out.set("data.train_batch_size", workload.batch_size)
    out.set("actor_rollout_ref.rollout.n", workload.samples_per_prompt)
    out.set("data.max_response_length", workload.generation_length)
    wanted, steps = optimizer_steps(facts.instance), verl_steps(facts)
    mini = workload.batch_size // steps
    if steps != wanted:
        out.unsupported(
            f"workload.optimizer_steps {wanted}: ppo_mini_batch_size counts prompts and "
            f"{workload.batch_size} prompts make no {wanted} equal mini-batches ({steps} here)"
        )
    out.comment(
        f"{steps} optimizer step{'s' if steps > 1 else ''} per RL step (workload.optimizer_steps;"
        f" the plan times one gradient synchronisation each): mini-batch = {mini} prompts, "
        "one epoch"
    )
    # ppo_mini_batch_size (prompts; verl multiplies it by rollout.n), ppo_epochs:
    # verl/trainer/config/actor/actor.yaml, critic/critic.yaml
    out.set("actor_rollout_ref.actor.ppo_mini_batch_size", mini)
    out.set("actor_rollout_ref.actor.ppo_epochs", 1)
    if facts.has("critic.train"):
        out.set("critic.ppo_mini_batch_size", mini)
        out.set("critic.ppo_epochs", 1)
    # TrainingWorker.train_mini_batch (verl/workers/engine_workers.py) asserts the
    # mini-batch of mini x n sequences splits evenly over the data-parallel ranks.
    for name in ("actor.train", "critic.train"):
        dp = facts.layout(name)[2] if facts.has(name) else 1
        if (mini * workload.samples_per_prompt) % dp:
            out.unsupported(
                f"{name}: dp {dp} does not divide a mini-batch of "
                f"{mini * workload.samples_per_prompt} sequences"
            )
    # use_remove_padding: verl/trainer/config/model/hf_model.yaml
    packing = _bool(facts.instance.engine.sequence_packing)
    out.set("actor_rollout_ref.model.use_remove_padding", packing)
    if facts.has("critic.train"):
        out.set("critic.model.use_remove_padding", packing)


def _pools(facts: PlanFacts, out: Settings, mode: str) -> None:
    """The global pool (actor.train's block), the trainer mode and its async keys."""
    nodes, width = facts.nodes("actor.train")
    # trainer.*: verl/trainer/config/ppo_trainer.yaml; the global pool is
    # [n_gpus_per_node] * nnodes (verl/trainer/ppo/v1/trainer_base.py _init_resource_pool_mgr)
    out.set("trainer.nnodes", nodes)
    out.set("trainer.n_gpus_per_node", width)
    out.set("trainer.use_v1", "true")
    out.set("trainer.v1.trainer_mode", mode)
    steps = facts.staleness.get("actor", 0)
    if mode == "sync":
        return
    out.set(f"trainer.v1.{mode}.num_warmup_batches", steps)
    # max_off_policy_threshold counts model versions a sample spans (staleness + 1);
    # wait: training waits for older samples instead of dropping them (replay_buffer.py).
    out.set("trainer.v1.sampler.max_off_policy_threshold", steps + 1)
    out.set("trainer.v1.sampler.max_off_policy_strategy", "wait")
    if mode == "colocate_async":
        out.comment(
            "colocate_async aborts unfinished requests when a batch is complete and resumes "
            "them on the next weights (partial rollout); the plan finishes every sequence"
        )
        return
    rollout_nodes, rollout_width = facts.nodes("actor.generate")
    # verl/trainer/ppo/v1/trainer_separate_async.py asserts train_batch_size ==
    # parameter_sync_step * ppo_mini_batch_size, rollout.nnodes > 0 and a checkpoint
    # engine other than naive; hybrid_engine false keeps the rollout off the global pool.
    out.set("actor_rollout_ref.hybrid_engine", "false")
    # n mini-batches, each a local update, then one weight sync (PPOTrainer.step).
    out.set("trainer.v1.separate_async.parameter_sync_step", verl_steps(facts))
    out.set("actor_rollout_ref.rollout.nnodes", rollout_nodes)
    out.set("actor_rollout_ref.rollout.n_gpus_per_node", rollout_width)
    out.set("actor_rollout_ref.rollout.checkpoint_engine.backend", "nccl")


#: Where verl's resource pools take their GPUs (the mirror commit read for it).
_RESOURCE_POOL = (
    "verl/single_controller/ray/base.py RayResourcePool.get_placement_groups, "
    "volcengine/verl b178a3cd"
)


def _gpu_pools(facts: PlanFacts, out: Settings, mode: str) -> None:
    """Which GPU pool each resource pool needs, and how to get it (several GPU pools only)."""
    if not pooled(facts):
        return
    roles = [("global pool", "actor.train")]
    if mode == "separate_async":
        roles.append(("rollout pool", "actor.generate"))
    if facts.has("reward.infer") and facts.disjoint("reward.infer", "actor.train"):
        roles.append(("reward pool", "reward.infer"))
    out.comment(f"resource pools by GPU pool: {roles_words(facts, roles)}")
    # A pool's bundles are {"CPU": n, "GPU": 1}, plus {accelerator_type: 1e-4} when the
    # RayResourcePool is built with one, which only verl/experimental/vla/rob_ray_trainer.py does.
    names = dict.fromkeys(span(facts, name).name for _, name in roles)
    starts = ", ".join(
        f"pool {pool}'s nodes with ray start --resources='{{\"{pool}\": 1}}'" for pool in names
    )
    builds = ", ".join(
        f'the {words}\'s RayResourcePool with accelerator_type="{span(facts, name).name}"'
        for words, name in roles
    )
    out.comment(
        "verl cannot pin a resource pool to a GPU type: it asks Ray for {CPU, GPU} bundles "
        f"on any node with free GPUs ({_RESOURCE_POOL}); no configuration key sets a pool's "
        f"accelerator_type, so to pin them start {starts} and build {builds} in code"
    )
    out.comment(
        "an open verl proposal (PR #7531, accelerator-affine resource pools) would set it with "
        "trainer.accelerator_resource_key and actor_rollout_ref.rollout.accelerator_resource_key"
    )


def settings(facts: PlanFacts, plan_name: str) -> Settings:
    """The plan's verl settings, in order.

    Parameters
    ----------
    facts
        The plan and its instance (a plan inside verl's plan space).
    plan_name
        How the header names the plan (its file name).

    Returns
    -------
    Settings
        Hydra overrides and comment lines.
    """
    out = Settings(f"verl {RELEASE}")
    use_megatron = megatron(facts)
    config = "ppo_megatron_trainer" if use_megatron else "ppo_trainer"
    _header(facts, out, config, plan_name)
    mode = trainer_mode(facts)
    _algorithm(facts, out)
    _batches(facts, out)
    _pools(facts, out, mode)
    _gpu_pools(facts, out, mode)
    rollout_keys(facts, out)
    actor_keys(facts, out, use_megatron)
    reference_keys(facts, out, use_megatron)
    critic_keys(facts, out, use_megatron)
    reward_keys(facts, out, mode)
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
