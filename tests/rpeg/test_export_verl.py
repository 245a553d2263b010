"""``export-config --framework verl``: verl 0.9.1 settings and verl's plan space.

Plans used:

* the published runs (instances/published/**/X.yaml with X.plan.json), all
  inside verl's plan space: the NeMo RL runs (Megatron pp 2, a rule reward
  on 8 workers, the reference offloaded; the async ones with generation on
  GPUs 8-15) and verl's DAPO run (no reference model, one reward worker);
* by hand: a one-step off-policy run with the rollout on the actor's GPUs
  (the published async plan with generation moved to GPUs 0-7); tiny PPO
  with a critic and a reward model on a GPU of its own; tiny GRPO with the
  rollout and the reward model on GPUs of their own; GRPO 7B on 16 GPUs in
  ZeRO-3 (FSDP) with the reward model asleep beside the actor.

The start-up checks below are verl 0.9.1's own, re-implemented from the files
of its PyPI wheel (paths in that release).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchmarks.release_keys.verl import DATA, key_problem, published_pairs
from rlplan.outputs.frameworks import export_config
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.frameworks.verl import RELEASE
from rlplan.rpeg.model.plan import plan_from_json, read_plan

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "instances" / "published"
ASYNC = PUBLISHED / "nemo_rl_grpo_llama31_8b_async_2x8_h100"
DAPO = PUBLISHED / "verl_dapo_qwen25_math_7b_16_h20"
NEMO = PUBLISHED / "nemo_rl_grpo_llama31_8b_2x8_h100"

LOW = {"origin": [0, 0, 0], "extent": [1, 1, 1]}
SECOND = {"origin": [0, 0, 1], "extent": [1, 1, 1]}
THIRD = {"origin": [0, 0, 2], "extent": [1, 1, 1]}
FOURTH = {"origin": [0, 0, 3], "extent": [1, 1, 1]}
PAIR = {"origin": [0, 0, 0], "extent": [1, 1, 2]}
HIGH = {"origin": [0, 0, 2], "extent": [1, 1, 2]}


def _one(block: dict, **fields: object) -> dict:
    return {"block": block, "dp": 1, "pp": 1, "tp": 1, **fields}


#: tiny_ppo_2gpu: everything on GPU 0, the reward model on GPU 1 (no actor.infer:
#: the instance sets engine.recompute_logprobs false).
PPO_HAND = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        "actor.generate": _one(LOW, gpu_memory_utilization=0.3, max_num_seqs=16),
        **{
            name: _one(LOW, microbatches=1)
            for name in ("reference.infer", "critic.infer", "actor.train", "critic.train")
        },
        "reward.infer": _one(SECOND, microbatches=1),
    },
}

#: grpo_7b_1x2x8_h100: everything on the 16 GPUs, ZeRO-3 (FSDP) with full recompute
#: and offload, the reward model offloaded beside the actor (it sleeps).
ALL = {"origin": [0, 0, 0], "extent": [1, 2, 8]}
GRPO_FSDP = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": {
            "block": ALL,
            "dp": 8,
            "pp": 1,
            "tp": 2,
            "gpu_memory_utilization": 0.5,
            "max_num_seqs": 256,
        },
        **{
            name: {"block": ALL, "dp": 16, "pp": 1, "tp": 1, "micro_batch_size": 8, "offload": True}
            for name in ("actor.infer", "reference.infer", "reward.infer")
        },
        "actor.train": {
            "block": ALL,
            "dp": 16,
            "pp": 1,
            "tp": 1,
            "micro_batch_size": 4,
            "sharding": "zero3",
            "recompute": "full",
            "offload": True,
        },
    },
}

#: tiny_grpo_4gpu: the rollout on GPUs 0-1, the reward model on GPU 2, the rest on GPU 3.
GRPO_SEPARATE = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": {
            "block": PAIR,
            "dp": 1,
            "pp": 1,
            "tp": 2,
            "gpu_memory_utilization": 0.2,
            "max_num_seqs": 32,
        },
        "reward.infer": _one(THIRD, microbatches=1),
        "reference.infer": _one(FOURTH, microbatches=1),
        "actor.train": _one(FOURTH, microbatches=1),
    },
}


def _hand(instance: str, document: dict) -> tuple[Problem, object]:
    problem = Problem.load(str(ROOT / "instances" / f"{instance}.yaml"))
    return problem, plan_from_json(document, problem.directory)


def _published(stem: Path) -> tuple[Problem, object]:
    problem = Problem.load(f"{stem}.yaml")
    return problem, read_plan(Path(f"{stem}.plan.json"), problem.directory)


def _colocated_async() -> tuple[Problem, object]:
    """The published async plan with actor.generate moved onto actor.train's GPUs 0-7."""
    document = json.loads(Path(f"{ASYNC}.plan.json").read_text(encoding="utf-8"))
    document = copy.deepcopy(document)
    vertices = document["vertices"]
    vertices["actor.generate"]["block"] = vertices["actor.train"]["block"]
    problem = Problem.load(f"{ASYNC}.yaml")
    return problem, plan_from_json(document, problem.directory)


def _broken(problem: Problem, plan: object) -> list[str]:
    """The verl rules a plan breaks, with an Unsupported rule first."""
    problem = problem.for_plan(plan)
    framework = FRAMEWORKS["verl"]
    unsupported = framework.unsupported(problem.instance)
    found = [unsupported.name] if unsupported else []
    gpus = problem.instance.hardware.num_gpus
    return found + plan_problems(framework, problem.directory.template, plan, gpus)


def _export(problem: Problem, plan: object) -> tuple[str, dict[str, str], list[str]]:
    """(config name, overrides, comment lines) of a plan's verl export."""
    lines = export_config(problem, plan, "verl", "plan.json").splitlines()
    comments = [line for line in lines if line.startswith("#")]
    overrides = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    config = "ppo_megatron_trainer" if "--config-name=ppo_megatron_trainer" in lines[1] else ""
    return config or "ppo_trainer", overrides, comments


def _hand_plans() -> list[tuple[Problem, object]]:
    return [
        _colocated_async(),
        _hand("tiny_ppo_2gpu", PPO_HAND),
        _hand("tiny_grpo_4gpu", GRPO_SEPARATE),
        _hand("grpo_7b_1x2x8_h100", GRPO_FSDP),
    ]


def _all_plans() -> list[tuple[Problem, object]]:
    published = [_published(Path(str(plan)[: -len(".plan.json")])) for _, plan in published_pairs()]
    return published + _hand_plans()


@pytest.fixture(scope="module")
def plans() -> list[tuple[Problem, object]]:
    found = _all_plans()
    assert len(found) == 11
    return found


@pytest.fixture(scope="module")
def release() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_plans_lie_in_verl_plan_space(plans):
    """Every plan the tests export satisfies verl's rules (export-config would refuse it else)."""
    for problem, plan in plans:
        assert _broken(problem, plan) == []


def test_emitted_keys_are_keys_of_the_release(plans, release):
    """(a) Every key=value is a key of verl 0.9.1's config for its --config-name, of its type."""
    assert release["release"] == RELEASE
    seen = set()
    for problem, plan in plans:
        config, overrides, _ = _export(problem, plan)
        for key, value in overrides.items():
            assert key_problem(release, config, key, value) is None
            seen.add(key)
    # The paths covered: Megatron and FSDP, critic, reward model, both async modes.
    for key in (
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size",
        "actor_rollout_ref.actor.fsdp_config.param_offload",
        "+critic.ppo_infer_max_token_len_per_gpu",
        "reward.reward_model.enable_resource_pool",
        "trainer.v1.colocate_async.num_warmup_batches",
        "actor_rollout_ref.rollout.checkpoint_engine.backend",
    ):
        assert key in seen


def test_key_check_refuses_dropped_and_mistyped_keys(release):
    """The check itself: a key verl 0.9.1 dropped, a legacy key, a wrong type, a missing +."""
    megatron = "ppo_megatron_trainer"
    assert key_problem(release, megatron, "actor_rollout_ref.actor.megatron.grad_offload", "true")
    assert key_problem(release, "ppo_trainer", "reward_model.enable", "false")
    assert key_problem(release, "ppo_trainer", "data.train_batch_size", "many")
    assert key_problem(release, "ppo_trainer", "critic.ppo_infer_max_token_len_per_gpu", "8")
    assert key_problem(
        release, "ppo_trainer", "actor_rollout_ref.actor.megatron.param_offload", "1"
    )
    assert key_problem(release, "ppo_trainer", "data.train_batch_size", "64") is None


def _int(overrides: dict[str, str], key: str, default: int) -> int:
    return int(overrides.get(key, default))


def _megatron_dp(overrides: dict[str, str], role: str, gpus: int, problems: list[str]) -> int:
    """dp of a Megatron role on ``gpus`` GPUs; a problem when tp x pp does not divide them."""
    tp = _int(overrides, f"{role}.megatron.tensor_model_parallel_size", 1)
    pp = _int(overrides, f"{role}.megatron.pipeline_model_parallel_size", 1)
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
    n = _int(overrides, "actor_rollout_ref.rollout.n", 1)
    batch = _int(overrides, "data.train_batch_size", 1024)
    mini = _int(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256)
    gpus = _int(overrides, "trainer.nnodes", 1) * _int(overrides, "trainer.n_gpus_per_node", 8)
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


def _critic_problems(config: str, overrides: dict[str, str], gpus: int, batch: int, n: int):
    """CriticConfig.__post_init__ and validate (verl/workers/config/critic.py)."""
    if overrides.get("algorithm.adv_estimator") != "gae":
        return []
    problems: list[str] = []
    mini = _int(
        overrides,
        "critic.ppo_mini_batch_size",
        _int(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256),
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
    sync_step = _int(overrides, "trainer.v1.separate_async.parameter_sync_step", 4)
    if batch != sync_step * mini:
        problems.append(f"train_batch_size {batch} != parameter_sync_step x mini-batch")
    if _int(overrides, "actor_rollout_ref.rollout.nnodes", 0) <= 0:
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
    epochs = _int(overrides, "actor_rollout_ref.actor.ppo_epochs", 1)
    batch = _int(overrides, "data.train_batch_size", 1024)
    return epochs * batch / _int(overrides, "actor_rollout_ref.actor.ppo_mini_batch_size", 256)


def test_batch_settings_pass_verl_startup_checks(plans):
    """(b) The batch settings pass verl's start-up checks and take one optimizer step per
    RL step, as the plan times one gradient synchronisation per train run."""
    for problem, plan in plans:
        config, overrides, _ = _export(problem, plan)
        assert startup_problems(config, overrides) == []
        assert optimizer_steps(overrides) == 1
        workload = problem.instance.workload
        assert overrides["data.train_batch_size"] == str(workload.batch_size)
        assert overrides["actor_rollout_ref.rollout.n"] == str(workload.samples_per_prompt)
        assert overrides["data.max_response_length"] == str(workload.generation_length)


def test_startup_checks_catch_verl_defaults():
    """Without the mini-batch, verl's default 256 fails 64 prompts per step (the check bites)."""
    problem, plan = _published(NEMO)
    config, overrides, _ = _export(problem, plan)
    del overrides["actor_rollout_ref.actor.ppo_mini_batch_size"]
    assert "train_batch_size 64 < ppo_mini_batch_size 256" in startup_problems(config, overrides)
    overrides["actor_rollout_ref.actor.ppo_mini_batch_size"] = "16"
    assert startup_problems(config, overrides) == []
    assert optimizer_steps(overrides) == 4


def need_reference_policy(overrides: dict[str, str]) -> bool:
    """verl/trainer/ppo/utils.py need_reference_policy: use_kl_in_reward or use_kl_loss."""
    return "true" in (
        overrides.get("algorithm.use_kl_in_reward", "false"),
        overrides.get("actor_rollout_ref.actor.use_kl_loss", "false"),
    )


def test_reference_follows_engine_reference_model(plans):
    """(c) verl builds a reference worker exactly when the instance has a reference model:
    a KL loss for GRPO, a KL reward penalty for PPO; none for verl's DAPO run."""
    kinds = set()
    for problem, plan in plans:
        _, overrides, comments = _export(problem, plan)
        engine = problem.instance.engine
        assert need_reference_policy(overrides) == engine.reference_model
        ref_keys = [key for key in overrides if key.startswith("actor_rollout_ref.ref.")]
        assert bool(ref_keys) == engine.reference_model
        if not engine.reference_model:
            assert (
                "# no reference model (engine.reference_model false): no KL term, no ref worker"
            ) in comments
            kinds.add("none")
        elif problem.instance.algorithm == "ppo":
            assert overrides["algorithm.use_kl_in_reward"] == "true"
            kinds.add("ppo")
        else:
            assert overrides["actor_rollout_ref.actor.use_kl_loss"] == "true"
            kinds.add("grpo")
    assert kinds == {"none", "ppo", "grpo"}
    _, overrides, _ = _export(*_published(DAPO))
    assert overrides["actor_rollout_ref.actor.use_kl_loss"] == "false"
    assert overrides["algorithm.use_kl_in_reward"] == "false"


def test_rule_reward_is_a_function_not_a_model(plans):
    """(d) A rule reward sets no reward model: its workers are reward loop workers, and a line
    says where the scoring function goes. A reward model gets its pool and engine."""
    for problem, plan in plans:
        _, overrides, comments = _export(problem, plan)
        rule = problem.instance.reward_rule
        model_keys = {key for key in overrides if key.startswith("reward.reward_model.")}
        if rule is None:
            assert overrides["reward.reward_model.enable"] == "true"
            assert "reward.reward_model.rollout.tensor_model_parallel_size" in model_keys
            continue
        assert model_keys == {"reward.reward_model.enable"}
        assert overrides["reward.reward_model.enable"] == "false"
        assert overrides["reward.num_workers"] == str(rule.workers)
        assert any(
            "add your reward function here: reward.custom_reward_function.path" in line
            for line in comments
        )


def test_reward_model_pool(plans):
    """The reward model on a GPU of its own: its pool, awake; beside the actor: asleep."""
    _, overrides, _ = _export(*_hand("tiny_ppo_2gpu", PPO_HAND))
    assert overrides["reward.reward_model.enable_resource_pool"] == "true"
    assert (
        overrides["reward.reward_model.nnodes"],
        overrides["reward.reward_model.n_gpus_per_node"],
    ) == ("1", "1")
    assert overrides["reward.reward_model.rollout.free_cache_engine"] == "false"
    _, overrides, _ = _export(*_hand("grpo_7b_1x2x8_h100", GRPO_FSDP))
    assert overrides["reward.reward_model.enable_resource_pool"] == "false"
    assert "reward.reward_model.nnodes" not in overrides
    assert overrides["reward.reward_model.rollout.free_cache_engine"] == "true"


def test_header_names_the_release(plans):
    """(e) Every export names verl 0.9.1, the release its rules and keys are read from."""
    assert FRAMEWORKS["verl"].release == RELEASE == "0.9.1"
    for problem, plan in plans:
        lines = export_config(problem, plan, "verl", "plan.json").splitlines()
        assert lines[0].startswith(f"# verl {RELEASE} settings for plan plan.json (instance ")
        assert lines[1].startswith(f"# Hydra overrides for verl {RELEASE} (pip install verl==")
        assert all(
            not line.startswith("# not expressible")
            or line.startswith(f"# not expressible in verl {RELEASE}: ")
            for line in lines
        )


def test_user_lines_name_what_the_plan_does_not_know():
    """Model and data paths and the longest prompt are comment lines, never guessed keys."""
    problem, plan = _published(NEMO)
    _, overrides, comments = _export(problem, plan)
    assert "data.max_prompt_length" not in overrides
    assert "actor_rollout_ref.model.path" not in overrides
    assert "#   actor_rollout_ref.model.path=<Hugging Face model id or local path>" in comments
    assert any(
        line.startswith("#   data.max_prompt_length=<your longest prompt") and "130-token" in line
        for line in comments
    )
    assert (
        "# Ray cluster: 2 nodes x 8 GPUs (the instance's); the pools below take what the plan uses"
        in comments
    )


def test_trainer_modes_and_pools():
    """Sync and colocated async on one pool; separate_async gives the rollout a pool of its
    own, so the published async plan takes the whole cluster (8 + 8 GPUs)."""
    _, overrides, _ = _export(*_published(NEMO))
    assert overrides["trainer.v1.trainer_mode"] == "sync"
    assert not any(key.startswith("trainer.v1.sampler") for key in overrides)
    _, overrides, _ = _export(*_published(ASYNC))
    trainer = _int(overrides, "trainer.nnodes", 1) * _int(overrides, "trainer.n_gpus_per_node", 8)
    rollout = _int(overrides, "actor_rollout_ref.rollout.nnodes", 0) * _int(
        overrides, "actor_rollout_ref.rollout.n_gpus_per_node", 8
    )
    assert (trainer, rollout) == (8, 8)
    assert overrides["trainer.v1.trainer_mode"] == "separate_async"
    assert overrides["actor_rollout_ref.hybrid_engine"] == "false"
    assert overrides["trainer.v1.separate_async.num_warmup_batches"] == "1"
    assert overrides["trainer.v1.sampler.max_off_policy_threshold"] == "2"  # spans 2 versions
    assert overrides["trainer.v1.sampler.max_off_policy_strategy"] == "wait"
    _, overrides, _ = _export(*_colocated_async())
    assert overrides["trainer.v1.trainer_mode"] == "colocate_async"
    assert overrides["trainer.v1.colocate_async.num_warmup_batches"] == "1"
    assert (overrides["trainer.nnodes"], overrides["trainer.n_gpus_per_node"]) == ("1", "8")
    assert "actor_rollout_ref.rollout.nnodes" not in overrides
    _, overrides, _ = _export(*_hand("tiny_grpo_4gpu", GRPO_SEPARATE))
    assert overrides["trainer.v1.trainer_mode"] == "separate_async"
    assert overrides["trainer.v1.separate_async.num_warmup_batches"] == "0"  # on-policy
    assert overrides["trainer.v1.sampler.max_off_policy_threshold"] == "1"


def test_published_nemo_plan_as_verl():
    """Megatron (ZeRO-1) tp 1 pp 2, rollout tp 1 at 0.6, micro-batches 4 / 8, recompute,
    offload; old log-probs not offloaded while the actor is cannot be set."""
    lines = export_config(*_published(NEMO), "verl", "plan.json").splitlines()
    expected = [
        "# Hydra overrides for verl 0.9.1 (pip install verl==0.9.1): python3 -m "
        "verl.trainer.main_ppo --config-name=ppo_megatron_trainer followed by the key=value "
        "lines below",
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=32",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.max_num_seqs=1024",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1",
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
        "actor_rollout_ref.actor.megatron.use_distributed_optimizer=true",
        "actor_rollout_ref.actor.megatron.use_megatron_fsdp=false",
        "actor_rollout_ref.actor.megatron.param_offload=true",
        "actor_rollout_ref.actor.megatron.optimizer_offload=true",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "# not expressible in verl 0.9.1: actor.infer offload false while actor.train offload "
        "true (one param_offload per engine, read by its train and eval modes: "
        "verl/workers/engine/base.py BaseEngineCtx)",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2",
        "actor_rollout_ref.ref.megatron.param_offload=true",
        "reward.reward_model.enable=false",
        "reward.num_workers=8",
    ]
    for line in expected:
        assert line in lines
    assert lines.index(expected[5]) < lines.index(expected[7])  # kept in order
    assert sum(line.startswith("# not expressible") for line in lines) == 1
    for line in lines:
        assert line.startswith("# ") or ("=" in line and " " not in line)


def _variant(document: dict, **changes: dict) -> dict:
    """``document`` with some vertices' fields changed (``staleness`` replaces the map)."""
    changed = copy.deepcopy(document)
    for name, fields in changes.items():
        if name == "staleness":
            changed["staleness"] = fields
        else:
            changed["vertices"][name.replace("_", ".", 1)].update(fields)
    return changed


@pytest.mark.parametrize(
    ("instance", "document", "rule"),
    [
        (
            "tiny_dpo_2gpu_v2",
            {
                "staleness": {"actor": 0},
                "vertices": {
                    "actor.generate": {
                        "block": PAIR,
                        "dp": 1,
                        "pp": 1,
                        "tp": 2,
                        "gpu_memory_utilization": 0.2,
                        "max_num_seqs": 32,
                    },
                    **{
                        name: {"block": PAIR, "dp": 2, "pp": 1, "tp": 1, "microbatches": 4}
                        for name in ("actor.infer", "reference.infer", "actor.train")
                    },
                },
            },
            "no-online-dpo",
        ),
        (
            "ppo_8b_1x2x8_h100",
            {
                "staleness": {"actor": 0, "critic": 1},
                "vertices": {
                    "actor.generate": GRPO_FSDP["vertices"]["actor.generate"],
                    **{
                        name: {
                            "block": ALL,
                            "dp": 16,
                            "pp": 1,
                            "tp": 1,
                            "micro_batch_size": 4,
                            "offload": True,
                        }
                        for name in (
                            "actor.infer",
                            "reference.infer",
                            "reward.infer",
                            "critic.infer",
                            "actor.train",
                            "critic.train",
                        )
                    },
                },
            },
            "critic-on-policy",
        ),
        ("tiny_ppo_2gpu", _variant(PPO_HAND, critic_infer={"block": SECOND}), "values-on-critic"),
        (
            "tiny_ppo_2gpu",
            _variant(PPO_HAND, reference_infer={"block": SECOND}),
            "reference-on-global-pool",
        ),
        (
            "tiny_ppo_2gpu",
            _variant(PPO_HAND, critic_train={"block": SECOND}, critic_infer={"block": SECOND}),
            "critic-on-global-pool",
        ),
        (
            "tiny_ppo_2gpu",
            _variant(PPO_HAND, reward_infer={"block": PAIR, "dp": 2}),
            "resource-pools",
        ),
        (
            "grpo_7b_1x2x8_h100",
            _variant(GRPO_FSDP, actor_infer={"dp": 8, "tp": 2}),
            "logprobs-on-actor",
        ),
        (
            "grpo_7b_1x2x8_h100",
            _variant(GRPO_FSDP, reward_infer={"offload": False}),
            "colocated-reward-model-sleeps",
        ),
    ],
)
def test_rules_refuse_plans_verl_cannot_run(instance, document, rule):
    """Each rule removes the plans it describes; the base plans of these variants break none."""
    problem, plan = _hand(instance, document)
    assert any(rule in line for line in _broken(problem, plan))
