"""verl 0.9.1's start-up checks of the batch settings, re-implemented from its source.

Each check cites the file of the PyPI wheel ``verl==0.9.1`` it is read from;
the values come from an export's ``key=value`` lines, the defaults from the
release's trainer config (verl/trainer/config/).
"""

from __future__ import annotations


def setting(overrides: dict[str, str], key: str, default: int) -> int:
    """The integer an export sets for ``key``, or the release's ``default``."""
    return int(overrides.get(key, default))


def _megatron_dp(overrides: dict[str, str], role: str, gpus: int, problems: list[str]) -> int:
    """dp of a Megatron role on ``gpus`` GPUs; a problem when tp x pp does not divide them."""
    tp = setting(overrides, f"{role}.megatron.tensor_model_parallel_size", 1)
    pp = setting(overrides, f"{role}.megatron.pipeline_model_parallel_size", 1)
    if gpus % (tp * pp):
        problems.append(f"{role}: {gpus} GPUs not divisible by tp x pp {tp * pp}")
    return max(gpus // (tp * pp), 1)


def startup_problems(config: str, overrides: dict[str, str]) -> list[str]:
    """verl 0.9.1's start-up checks of the batch settings, re-implemented.

    Defaults are the release's (verl/trainer/config/actor/actor.yaml
    ppo_mini_batch_size 256, ppo_epochs 1; ppo_trainer.yaml trainer.nnodes 1,
    n_gpus_per_node 8, separate_async.parameter_sync_step 4).
    """
    problems: list[str] = []
    n = setting(overrides, "actor_rollout_ref.rollout.n", 1)
    batch = setting(overrides, "data.train_batch_size", 1024)
    mini = setting(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256)
    gpus = setting(overrides, "trainer.nnodes", 1) * setting(
        overrides, "trainer.n_gpus_per_node", 8
    )
    micro = overrides.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    # ActorConfig.__post_init__ (verl/workers/config/actor.py): a micro-batch is required.
    if micro is None:
        return ["actor: no ppo_micro_batch_size_per_gpu"]
    # validate_config (verl/utils/config.py): train_batch_size * n divisible by the
    # Megatron dp times the micro-batch, or by the GPUs under FSDP.
    megatron = config == "ppo_megatron_trainer"
    role = "actor_rollout_ref.actor"
    dp = _megatron_dp(overrides, role, gpus, problems) if megatron else gpus
    minimal = dp * int(micro) if megatron else gpus
    if (batch * n) % minimal:
        problems.append(f"train_batch_size x n {batch * n} not divisible by {minimal}")
    # ActorConfig.validate: train_batch_size >= ppo_mini_batch_size.
    if batch < mini:
        problems.append(f"train_batch_size {batch} < ppo_mini_batch_size {mini}")
    # TrainingWorker.train_mini_batch (verl/workers/engine_workers.py): the mini-batch
    # of ppo_mini_batch_size * n sequences splits evenly over the data-parallel ranks.
    if (mini * n) % dp:
        problems.append(f"mini-batch {mini * n} sequences not divisible by dp {dp}")
    # validate_config check_mutually_exclusive: log-prob micro-batches are required.
    if "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu" not in overrides:
        problems.append("rollout: no log_prob_micro_batch_size_per_gpu")
    kl = "true" in (
        overrides.get("actor_rollout_ref.actor.use_kl_loss"),
        overrides.get("algorithm.use_kl_in_reward"),
    )
    if kl and "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu" not in overrides:
        problems.append("ref: no log_prob_micro_batch_size_per_gpu")
    problems += _critic_problems(config, overrides, gpus, batch, n)
    problems += _mode_problems(overrides, batch, mini)
    return problems


def _critic_problems(
    config: str, overrides: dict[str, str], gpus: int, batch: int, n: int
) -> list[str]:
    """CriticConfig.__post_init__ and validate (verl/workers/config/critic.py)."""
    if overrides.get("algorithm.adv_estimator") != "gae":
        return []
    problems: list[str] = []
    mini = setting(
        overrides,
        "critic.ppo_mini_batch_size",
        setting(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256),
    )
    if "critic.ppo_micro_batch_size_per_gpu" not in overrides:
        problems.append("critic: no ppo_micro_batch_size_per_gpu")
    if batch < mini:
        problems.append(f"train_batch_size {batch} < critic.ppo_mini_batch_size {mini}")
    megatron = config == "ppo_megatron_trainer"
    dp = _megatron_dp(overrides, "critic", gpus, problems) if megatron else gpus
    if (mini * n) % dp:
        problems.append(f"critic mini-batch {mini * n} not divisible by dp {dp}")
    return problems


def _mode_problems(overrides: dict[str, str], batch: int, mini: int) -> list[str]:
    """PPOTrainer.step and PPOTrainerSeparateAsync.__init__ (verl/trainer/ppo/v1/)."""
    mode = overrides.get("trainer.v1.trainer_mode", "sync")
    if mode != "separate_async":
        return []
    problems: list[str] = []
    sync_step = setting(overrides, "trainer.v1.separate_async.parameter_sync_step", 4)
    if batch != sync_step * mini:
        problems.append(f"train_batch_size {batch} != parameter_sync_step x mini-batch")
    if setting(overrides, "actor_rollout_ref.rollout.nnodes", 0) <= 0:
        problems.append("separate_async: actor_rollout_ref.rollout.nnodes must be > 0")
    if overrides.get("actor_rollout_ref.rollout.checkpoint_engine.backend", "naive") == "naive":
        problems.append("separate_async: the naive checkpoint engine")
    return problems


def optimizer_steps(overrides: dict[str, str]) -> float:
    """Optimizer steps per RL step: ppo_epochs x train_batch_size / ppo_mini_batch_size.

    Each mini-batch is one optimizer step (TrainingWorker.train_mini_batch);
    separate_async splits the batch into parameter_sync_step local updates of
    train_batch_size / parameter_sync_step prompts each (PPOTrainer.step),
    which leaves the total unchanged.
    """
    epochs = setting(overrides, "actor_rollout_ref.actor.ppo_epochs", 1)
    batch = setting(overrides, "data.train_batch_size", 1024)
    return epochs * batch / setting(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256)


def need_reference_policy(overrides: dict[str, str]) -> bool:
    """verl/trainer/ppo/utils.py need_reference_policy: use_kl_in_reward or use_kl_loss."""
    return "true" in (
        overrides.get("algorithm.use_kl_in_reward", "false"),
        overrides.get("actor_rollout_ref.actor.use_kl_loss", "false"),
    )
