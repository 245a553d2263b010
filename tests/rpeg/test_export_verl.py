"""``export-config --framework verl``: verl 0.9.1 settings and verl's plan space.

The plans (tests/rpeg/verl_plans.py): the published runs, all inside verl's
plan space (the NeMo RL runs: Megatron pp 2, a rule reward on 8 workers, the
reference offloaded, the async ones with generation on GPUs 8-15; verl's DAPO
run: no reference model, one reward worker), and hand-made ones covering
colocated async, PPO with a critic and a reward model, a rollout pool of its
own, and FSDP. The start-up checks are verl 0.9.1's own, re-implemented from
its source (tests/rpeg/verl_startup.py).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.release_keys.verl import DATA, key_problem
from rlplan.outputs.frameworks import export_config
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS
from rlplan.rpeg.model.frameworks.verl import RELEASE
from rlplan.rpeg.model.plan import plan_from_json
from tests.rpeg.verl_plans import (
    ALL,
    ASYNC,
    DAPO,
    GRPO_FSDP,
    GRPO_SEPARATE,
    NEMO,
    PAIR,
    PPO_HAND,
    SECOND,
    all_plans,
    broken,
    colocated_async,
    export,
    hand,
    published,
    variant,
)
from tests.rpeg.verl_startup import (
    need_reference_policy,
    optimizer_steps,
    setting,
    startup_problems,
)


@pytest.fixture(scope="module")
def plans() -> list[tuple[Problem, object]]:
    found = all_plans()
    assert len(found) == 17  # 12 dense plans, 5 published mixtures of experts
    return found


@pytest.fixture(scope="module")
def release() -> dict:
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_plans_lie_in_verl_plan_space(plans):
    """Every plan the tests export satisfies verl's rules (export-config would refuse it else)."""
    for problem, plan in plans:
        assert broken(problem, plan) == []


def test_emitted_keys_are_keys_of_the_release(plans, release):
    """(a) Every key=value is a key of verl 0.9.1's config for its --config-name, of its type."""
    assert release["release"] == RELEASE
    seen = set()
    for problem, plan in plans:
        config, overrides, _ = export(problem, plan)
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


def test_batch_settings_pass_verl_startup_checks(plans):
    """(b) The batch settings pass verl's start-up checks and take the workload's optimizer
    steps per RL step, as the plan times one gradient synchronisation per optimizer step."""
    for problem, plan in plans:
        config, overrides, _ = export(problem, plan)
        assert startup_problems(config, overrides) == []
        workload = problem.instance.workload
        assert optimizer_steps(overrides) == workload.optimizer_steps
        assert overrides["data.train_batch_size"] == str(workload.batch_size)
        assert overrides["actor_rollout_ref.rollout.n"] == str(workload.samples_per_prompt)
        assert overrides["data.max_response_length"] == str(workload.generation_length)


def test_startup_checks_catch_verl_defaults():
    """Without the mini-batch, verl's default 256 fails 64 prompts per step (the check bites)."""
    problem, plan = published(NEMO)
    config, overrides, _ = export(problem, plan)
    del overrides["actor_rollout_ref.actor.ppo_mini_batch_size"]
    assert "train_batch_size 64 < ppo_mini_batch_size 256" in startup_problems(config, overrides)
    overrides["actor_rollout_ref.actor.ppo_mini_batch_size"] = "16"
    assert startup_problems(config, overrides) == []
    assert optimizer_steps(overrides) == 4


def test_reference_follows_engine_reference_model(plans):
    """(c) verl builds a reference worker exactly when the instance has a reference model:
    a KL loss for GRPO, a KL reward penalty for PPO; none for verl's DAPO run."""
    kinds = set()
    for problem, plan in plans:
        _, overrides, comments = export(problem, plan)
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
    _, overrides, _ = export(*published(DAPO))
    assert overrides["actor_rollout_ref.actor.use_kl_loss"] == "false"
    assert overrides["algorithm.use_kl_in_reward"] == "false"


def test_rule_reward_is_a_function_not_a_model(plans):
    """(d) A rule reward sets no reward model: its workers are reward loop workers, and a line
    says where the scoring function goes. A reward model gets its pool and engine."""
    for problem, plan in plans:
        _, overrides, comments = export(problem, plan)
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
    _, overrides, _ = export(*hand("tiny_ppo_2gpu", PPO_HAND))
    assert overrides["reward.reward_model.enable_resource_pool"] == "true"
    assert (
        overrides["reward.reward_model.nnodes"],
        overrides["reward.reward_model.n_gpus_per_node"],
    ) == ("1", "1")
    assert overrides["reward.reward_model.rollout.free_cache_engine"] == "false"
    _, overrides, _ = export(*hand("grpo_7b_1x2x8_h100", GRPO_FSDP))
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
    problem, plan = published(NEMO)
    _, overrides, comments = export(problem, plan)
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
    _, overrides, _ = export(*published(NEMO))
    assert overrides["trainer.v1.trainer_mode"] == "sync"
    assert not any(key.startswith("trainer.v1.sampler") for key in overrides)
    _, overrides, _ = export(*published(ASYNC))
    trainer = setting(overrides, "trainer.nnodes", 1) * setting(
        overrides, "trainer.n_gpus_per_node", 8
    )
    rollout = setting(overrides, "actor_rollout_ref.rollout.nnodes", 0) * setting(
        overrides, "actor_rollout_ref.rollout.n_gpus_per_node", 8
    )
    assert (trainer, rollout) == (8, 8)
    assert overrides["trainer.v1.trainer_mode"] == "separate_async"
    assert overrides["actor_rollout_ref.hybrid_engine"] == "false"
    assert overrides["trainer.v1.separate_async.num_warmup_batches"] == "1"
    assert overrides["trainer.v1.sampler.max_off_policy_threshold"] == "2"  # spans 2 versions
    assert overrides["trainer.v1.sampler.max_off_policy_strategy"] == "wait"
    _, overrides, _ = export(*colocated_async())
    assert overrides["trainer.v1.trainer_mode"] == "colocate_async"
    assert overrides["trainer.v1.colocate_async.num_warmup_batches"] == "1"
    assert (overrides["trainer.nnodes"], overrides["trainer.n_gpus_per_node"]) == ("1", "8")
    assert "actor_rollout_ref.rollout.nnodes" not in overrides
    _, overrides, _ = export(*hand("tiny_grpo_4gpu", GRPO_SEPARATE))
    assert overrides["trainer.v1.trainer_mode"] == "separate_async"
    assert overrides["trainer.v1.separate_async.num_warmup_batches"] == "0"  # on-policy
    assert overrides["trainer.v1.sampler.max_off_policy_threshold"] == "1"


def test_published_nemo_plan_as_verl():
    """Megatron (ZeRO-1) tp 1 pp 2, rollout tp 1 at 0.6, micro-batches 4 / 8, recompute,
    offload; old log-probs not offloaded while the actor is cannot be set."""
    lines = export_config(*published(NEMO), "verl", "plan.json").splitlines()
    expected = [
        "# Hydra overrides for verl 0.9.1 (pip install verl==0.9.1): python3 -m "
        "verl.trainer.main_ppo --config-name=ppo_megatron_trainer followed by the key=value "
        "lines below",
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=32",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16",
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
        ("tiny_ppo_2gpu", variant(PPO_HAND, critic_infer={"block": SECOND}), "values-on-critic"),
        (
            "tiny_ppo_2gpu",
            variant(PPO_HAND, reference_infer={"block": SECOND}),
            "reference-on-global-pool",
        ),
        (
            "tiny_ppo_2gpu",
            variant(PPO_HAND, critic_train={"block": SECOND}, critic_infer={"block": SECOND}),
            "critic-on-global-pool",
        ),
        (
            "tiny_ppo_2gpu",
            variant(PPO_HAND, reward_infer={"block": PAIR, "dp": 2}),
            "resource-pools",
        ),
        (
            "grpo_7b_1x2x8_h100",
            variant(GRPO_FSDP, actor_infer={"dp": 8, "tp": 2}),
            "logprobs-on-actor",
        ),
        (
            "grpo_7b_1x2x8_h100",
            variant(GRPO_FSDP, reward_infer={"offload": False}),
            "colocated-reward-model-sleeps",
        ),
    ],
)
def test_rules_refuse_plans_verl_cannot_run(instance, document, rule):
    """Each rule removes the plans it describes; the base plans of these variants break none."""
    problem, plan = hand(instance, document)
    assert any(rule in line for line in broken(problem, plan))


def test_published_dapo_plan_takes_the_recipes_mini_batch():
    """The DAPO recipe's ppo_mini_batch_size 32 of 512 prompts (train_prompt_mini_bsz=32,
    recipe/one_step_off_policy/dapo_7b_math_megatron_colocate.sh): 16 optimizer steps."""
    problem, plan = published(DAPO)
    config, overrides, comments = export(problem, plan)
    assert overrides["data.train_batch_size"] == "512"
    assert overrides["actor_rollout_ref.actor.ppo_mini_batch_size"] == "32"
    assert optimizer_steps(overrides) == 16
    assert startup_problems(config, overrides) == []
    assert not [line for line in comments if "optimizer_steps" in line and "not expr" in line]


def test_optimizer_steps_verl_cannot_split_into_whole_prompts():
    """8 prompts x 4 in 16 optimizer steps: ppo_mini_batch_size counts prompts, so verl takes
    8 mini-batches of 1 prompt, says so, and separate_async syncs after those 8."""
    problem, _ = hand("tiny_grpo_4gpu", GRPO_SEPARATE)
    instance = problem.instance
    instance = dataclasses.replace(
        instance,
        workload=dataclasses.replace(instance.workload, optimizer_steps=16),
        placement=dataclasses.replace(instance.placement, microbatches=(16,)),
    )
    problem = Problem.from_instance(instance)
    sixteen = {"microbatches": 16}
    document = variant(
        GRPO_SEPARATE, actor_train=sixteen, reference_infer=sixteen, reward_infer=sixteen
    )
    config, overrides, comments = export(problem, plan_from_json(document, problem.directory))
    assert overrides["actor_rollout_ref.actor.ppo_mini_batch_size"] == "1"
    assert overrides["trainer.v1.separate_async.parameter_sync_step"] == "8"
    assert optimizer_steps(overrides) == 8
    assert startup_problems(config, overrides) == []
    assert any("workload.optimizer_steps 16" in line and "(8 here)" in line for line in comments)
