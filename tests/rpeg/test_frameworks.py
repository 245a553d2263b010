"""``export-config``: plans as verl, OpenRLHF and NeMo RL settings (rpeg/frameworks/).

Known plans:

* the published NeMo RL run (instances/published/nemo_rl_grpo_llama31_8b_2x8_h100):
  everything colocated on 2 x 8 H100, rollout tp 1 (16 engines) at
  gpu_memory_utilization 0.6 and max_num_seqs 1024 (128 sequences in flight),
  Megatron tp 1 pp 2 with the distributed optimizer, full recompute, training
  states offloaded, 4 sequences per train micro-batch and 8 per log-prob
  micro-batch, the reference offloaded, on-policy;
* the placements of the proven optimum of tiny_dpo_2gpu_v2
  (tests/solvers/test_exhaustive.py), written by hand: ZeRO-3 training with full
  recompute and offload, both log-prob passes offloaded on a GPU each, staleness 1;
* a disaggregated plan on tiny_grpo_4gpu, written by hand: the rollout on
  GPUs 0-1, everything else on GPUs 2-3.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from rlplan.outputs.frameworks import FRAMEWORKS, export_config, framework_settings
from rlplan.outputs.frameworks.common import round_up
from rlplan.outputs.vocabulary import framework_view
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import plan_from_json, read_plan

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "instances" / "published"
NEMO = PUBLISHED / "nemo_rl_grpo_llama31_8b_2x8_h100"
NEMO_PLAN = Path(f"{NEMO}.plan.json")

BOTH = {"origin": [0, 0, 0], "extent": [1, 1, 2]}
HIGH = {"origin": [0, 0, 2], "extent": [1, 1, 2]}
LOW = {"origin": [0, 0, 0], "extent": [1, 1, 1]}
SECOND = {"origin": [0, 0, 1], "extent": [1, 1, 1]}

#: The placements of the proven optimum of tiny_dpo_2gpu_v2, by hand (its run order aside).
DPO_V2_OPTIMUM = {
    "staleness": {"actor": 1},
    "vertices": {
        "actor.generate": {
            "block": BOTH,
            "dp": 1,
            "pp": 1,
            "tp": 2,
            "gpu_memory_utilization": 0.2,
            "max_num_seqs": 32,
        },
        "actor.infer": {
            "block": LOW,
            "dp": 1,
            "pp": 1,
            "tp": 1,
            "microbatches": 4,
            "offload": True,
        },
        "reference.infer": {
            "block": SECOND,
            "dp": 1,
            "pp": 1,
            "tp": 1,
            "microbatches": 4,
            "offload": True,
        },
        "actor.train": {
            "block": BOTH,
            "dp": 2,
            "pp": 1,
            "tp": 1,
            "microbatches": 4,
            "recompute": "full",
            "sharding": "zero3",
            "offload": True,
        },
    },
}

#: tiny_grpo_4gpu with the rollout on GPUs 0-1 and the rest on GPUs 2-3.
GRPO_APART = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": {
            "block": BOTH,
            "dp": 1,
            "pp": 1,
            "tp": 2,
            "gpu_memory_utilization": 0.2,
            "max_num_seqs": 32,
        },
        "reference.infer": {"block": HIGH, "dp": 2, "pp": 1, "tp": 1, "microbatches": 1},
        "reward.infer": {"block": HIGH, "dp": 2, "pp": 1, "tp": 1, "microbatches": 1},
        "actor.train": {"block": HIGH, "dp": 2, "pp": 1, "tp": 1, "microbatches": 1},
    },
}


@pytest.fixture(scope="module")
def nemo() -> tuple[Problem, object]:
    problem = Problem.load(str(NEMO) + ".yaml")
    return problem, read_plan(NEMO_PLAN, problem.directory)


def _hand(instance: str, document: dict) -> tuple[Problem, object]:
    problem = Problem.load(str(ROOT / "instances" / f"{instance}.yaml"))
    plan = plan_from_json(document, problem.directory)
    assert problem.simulator.simulate(plan).feasible
    return problem, plan


def _lines(problem: Problem, plan: object, framework: str) -> list[str]:
    return export_config(problem, plan, framework, "plan.json").splitlines()


def test_round_up_never_gives_less_memory():
    """gpu_memory_utilization is rounded up to the hundredth (0.4759 -> 0.48; 0.48 stays)."""
    assert round_up(0.475910748672) == 0.48
    assert round_up(0.48) == 0.48
    assert round_up(0.4801) == 0.49
    assert round_up(0.1) == 0.1


def test_published_nemo_rollout_memory_is_computed_by_hand(nemo):
    """The recipe's gpu_memory_utilization 0.6 is exported as is; its KV pool holds every
    one of a replica's 128 sequences.

    Llama-3.1-8B has 8,030,261,248 parameters; the cost model leaves out its
    266,240 norm weights: 8,029,995,008 (16.06 GB in bf16). The engine takes
    0.6 x 80 GB = 48 GB per GPU; without the weights and the 3.27 GB workspace
    its KV pool is 28.67 GB, 218,734 tokens of 2 (k, v) x 32 layers x 8 kv
    heads x 128 x 2 bytes = 131,072 bytes. E[T] of the instance's length
    quantiles is 0.5*455 + 0.4*1395 + 0.08*2565 + 0.02*3608 = 1,062.86 and
    E[T^2] = 0.5*910^2/3 + 0.4*(910^2 + 910*1880 + 1880^2)/3
    + 0.08*(1880^2 + 1880*3250 + 3250^2)/3 + 0.02*(3250^2 + 3250*3966 + 3966^2)/3
    = 1,747,848.4, so a live sequence holds 130 + 1,747,848.4/2,125.72 = 952.24
    tokens: the pool holds 229 of them, more than the 2048/16 = 128 sequences
    of a replica.
    """
    problem, plan = nemo
    pool = 0.6 * 80e9 - 2 * 8_029_995_008 - 3.27e9
    assert pool == pytest.approx(28_670_009_984)
    assert pool / 131_072 == pytest.approx(218_734.82, rel=1e-7)
    live = 130 + 1_747_848.37 / (2 * 1062.86)
    assert math.floor(pool / 131_072 / live) == 229
    rollout = framework_view(problem, plan)["vertices"]["actor.generate"]
    assert rollout["kv_pool_tokens"] == 218_734
    assert rollout["effective_concurrency"] == 128
    settings = framework_settings(problem, plan, "verl", "plan.json")
    assert settings.value("actor_rollout_ref.rollout.gpu_memory_utilization") == 0.6
    assert settings.value("actor_rollout_ref.rollout.max_num_seqs") == 1024


def test_published_nemo_plan_as_verl(nemo):
    """Megatron (ZeRO-1), rollout tp 1, 0.6, micro-batches 4 / 8, recompute, offload."""
    lines = _lines(*nemo, "verl")
    expected = [
        "# Hydra overrides: python3 -m verl.trainer.main_ppo "
        "--config-name=ppo_megatron_trainer followed by the key=value lines below",
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=32",
        "trainer.nnodes=2",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "actor_rollout_ref.rollout.max_num_seqs=1024",
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1",
        "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
        "actor_rollout_ref.actor.megatron.use_distributed_optimizer=true",
        "actor_rollout_ref.actor.megatron.param_offload=true",
        "actor_rollout_ref.actor.megatron.grad_offload=true",
        "actor_rollout_ref.actor.megatron.optimizer_offload=true",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform",
        "actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=2",
        "actor_rollout_ref.ref.megatron.param_offload=true",
        # The published run's reward is a rule: no reward model, a scoring function.
        "# reward.rule: a rule-based reward (no model, no GPU) on 8 CPU workers, 0.02 s per "
        "sample, 5.12 s per step between actor.generate and actor.train; verl scores it with a "
        "function (custom_reward_function.path and .name, verl/trainer/config/ppo_trainer.yaml; "
        "default verl.utils.reward_score)",
        "reward_model.enable=false",
        "# not expressible in verl: 8 reward workers (the naive and dapo reward managers score "
        "the batch in one loop in the driver: verl/workers/reward_manager/naive.py; the prime "
        "manager runs a process pool of its own size, prime.py)",
        "# not expressible in verl: actor.infer offload false while actor.train offload true "
        "(one set of offload flags for the actor)",
    ]
    for line in expected:
        assert line in lines
    assert lines.index(expected[4]) < lines.index(expected[6])  # kept in order
    assert not any("staleness" in line for line in lines)  # on-policy: nothing to say
    assert not any(line.startswith("reward_model.enable_resource_pool") for line in lines)
    assert not any(line.startswith("reward_model.micro_batch_size_per_gpu") for line in lines)
    for line in lines:
        assert line.startswith("# ") or ("=" in line and " " not in line)


def test_published_nemo_plan_as_nemo_rl(nemo):
    """The published recipe's layout: colocated vLLM tp 1, Megatron tp 1 pp 2, checkpointing."""
    text = export_config(*nemo, "nemo-rl", "plan.json")
    document = yaml.safe_load(text)
    policy = document["policy"]
    assert policy["generation"]["vllm_cfg"] == {
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "gpu_memory_utilization": 0.6,
    }
    assert policy["generation"]["vllm_kwargs"] == {"max_num_seqs": 1024}
    assert policy["generation"]["colocated"] == {"enabled": True}
    assert policy["megatron_cfg"] == {
        "enabled": True,
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 2,
        "activation_checkpointing": True,
        "optimizer": {"use_distributed_optimizer": True},
    }
    assert policy["dtensor_cfg"] == {"enabled": False}
    assert policy["train_micro_batch_size"] == 4
    assert policy["logprob_batch_size"] == 8
    # 4 and 8 sequences of 1,192.86 tokens on average, rounded up.
    assert policy["sequence_packing"] == {
        "enabled": True,
        "train_mb_tokens": 4772,
        "logprob_mb_tokens": 9543,
    }
    assert document["grpo"] == {
        "num_prompts_per_step": 64,
        "num_generations_per_prompt": 32,
        "async_grpo": {"enabled": False},
    }
    assert document["cluster"] == {"num_nodes": 2, "gpus_per_node": 8}
    lines = text.splitlines()
    assert "      gpu_memory_utilization: 0.6" in lines
    # The rule reward: math verification on env.math.num_workers Ray workers, no GPU.
    assert document["env"] == {"math": {"num_workers": 8}}
    assert (
        "# reward.rule: a rule-based reward (no model, no GPU) on 8 CPU workers, 0.02 s per "
        "sample, 5.12 s per step between actor.generate and actor.train; a rule-based "
        "environment on Ray CPU workers (env.math here, the math environment of "
        "examples/configs/grpo_math_1B.yaml; use your task's)"
    ) in lines
    assert (
        "# actor.train offload: NeMo RL moves the training states to the host around "
        "colocated generation (nemo_rl/algorithms/grpo.py: offload_before_refit)"
    ) in lines


def test_zero3_optimum_with_staleness_1(tmp_path):
    """tiny_dpo_2gpu_v2's optimum: FSDP in verl, ZeRO-3 in OpenRLHF, DTensor in NeMo RL,
    with the training states offloaded.

    Staleness 1 is inexpressible in verl's synchronous trainer, is async with a
    queue of 1 in OpenRLHF, and async GRPO in NeMo RL, which needs generation
    apart from training; online DPO is inexpressible in all three, and so are
    log-prob passes on a GPU of their own.
    """
    problem, plan = _hand("tiny_dpo_2gpu_v2", DPO_V2_OPTIMUM)
    verl = _lines(problem, plan, "verl")
    for line in (
        "# Hydra overrides: python3 -m verl.trainer.main_ppo --config-name=ppo_trainer "
        "followed by the key=value lines below",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.2",
        "actor_rollout_ref.rollout.max_num_seqs=32",
        "actor_rollout_ref.actor.strategy=fsdp",
        "actor_rollout_ref.actor.fsdp_config.param_offload=true",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.ref.fsdp_config.param_offload=true",
        "# not expressible in verl: reference.infer on GPU 1 (tp 1, pp 1, dp 1) apart from "
        "actor.train on GPUs 0-1 (tp 1, pp 1, dp 2) (verl.trainer.main_ppo runs the rollout, "
        "actor, reference and critic on one resource pool, each on all of its GPUs)",
        "# not expressible in verl: actor staleness 1 (verl.trainer.main_ppo is synchronous, "
        "staleness 0; verl/experimental/one_step_off_policy runs a one-step off-policy "
        "rollout on GPUs of its own)",
    ):
        assert line in verl
    assert verl[3].startswith("# not expressible in verl: online DPO")
    nemo_text = export_config(problem, plan, "nemo-rl", "plan.json")
    document = yaml.safe_load(nemo_text)
    assert document["policy"]["dtensor_cfg"] == {
        "enabled": True,
        "tensor_parallel_size": 1,
        "activation_checkpointing": True,
    }
    assert document["policy"]["megatron_cfg"] == {"enabled": False}
    assert document["grpo"]["async_grpo"] == {"enabled": True, "max_trajectory_age_steps": 1}
    assert document["policy"]["generation"]["vllm_cfg"]["async_engine"] is True
    assert (
        "# not expressible in NeMo RL: actor staleness 1 with generation colocated (async vLLM "
        "generation runs on GPUs of its own: nemo_rl/algorithms/grpo.py asserts it)"
    ) in nemo_text.splitlines()
    assert (
        "# not expressible in NeMo RL: actor.infer offload true (the policy's weights stay on "
        "its GPUs)"
    ) in nemo_text.splitlines()


def test_rollout_apart_from_training():
    """tiny_grpo_4gpu, rollout on GPUs 0-1: one pool in verl, own GPUs in OpenRLHF and NeMo RL."""
    problem, plan = _hand("tiny_grpo_4gpu", GRPO_APART)
    verl = _lines(problem, plan, "verl")
    assert (
        "# not expressible in verl: actor.generate on GPUs 0-1 (tp 2, pp 1, dp 1) apart from "
        "actor.train on GPUs 2-3 (tp 1, pp 1, dp 2) (verl.trainer.main_ppo runs the rollout, "
        "actor, reference and critic on one resource pool, each on all of its GPUs)"
    ) in verl
    assert "trainer.n_gpus_per_node=2" in verl
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16" in verl
    document = yaml.safe_load(export_config(problem, plan, "nemo-rl", "plan.json"))
    assert document["policy"]["generation"]["colocated"] == {
        "enabled": False,
        "resources": {"num_nodes": 1, "gpus_per_node": 2},
    }
    assert document["cluster"] == {"num_nodes": 1, "gpus_per_node": 4}


def test_infeasible_plans_are_exported_with_a_warning():
    """A plan that overflows memory still exports, saying so in a comment line."""
    problem = Problem.load(str(ROOT / "instances" / "tiny_grpo_2gpu.yaml"))
    gpu1 = {"origin": [0, 0, 1], "extent": [1, 1, 1]}
    document = {
        "staleness": {"actor": 0},
        "vertices": {
            "actor.generate": {
                "block": gpu1,
                "dp": 1,
                "pp": 1,
                "tp": 1,
                "gpu_memory_utilization": 0.5,
                "max_num_seqs": 16,
            },
            **{
                name: {"block": gpu1, "dp": 1, "pp": 1, "tp": 1, "microbatches": 8}
                for name in ("actor.infer", "reference.infer", "reward.infer", "actor.train")
            },
        },
    }
    plan = plan_from_json(document, problem.directory)
    trace = problem.simulator.simulate(plan)
    assert not trace.feasible
    for framework in FRAMEWORKS:
        lines = _lines(problem, plan, framework)
        assert (
            f"# warning: this plan overflows GPU memory by {trace.violation_bytes / 1e9:.2f} GB "
            "in simulation"
        ) in lines


def test_cli_writes_to_stdout_or_a_file_and_finds_the_instance(cli, tmp_path):
    """The published plan's instance is found beside it; --out writes the same text."""
    problem = Problem.load(str(NEMO) + ".yaml")
    plan = read_plan(NEMO_PLAN, problem.directory)
    expected = export_config(problem, plan, "verl", NEMO_PLAN.name)
    code, out, _ = cli("export-config", NEMO_PLAN, "--framework", "verl")
    assert code == 0
    assert out == expected
    target = tmp_path / "verl.txt"
    code, out, _ = cli(
        "export-config",
        NEMO_PLAN,
        "--framework",
        "verl",
        "--instance",
        str(NEMO) + ".yaml",
        "--out",
        target,
    )
    assert code == 0
    assert out == f"wrote {target}\n"
    assert target.read_text() == expected


def test_cli_finds_the_instance_a_solve_recorded(cli, tmp_path):
    """plan.json of ``solve`` names its instance: export-config finds instances/<name>.yaml."""
    run = tmp_path / "run"
    code, _, _ = cli(
        "solve",
        ROOT / "instances" / "tiny_grpo_2gpu.yaml",
        "--solver",
        "greedy",
        "--out",
        run,
        "--quiet",
    )
    assert code == 0
    code, out, err = cli("export-config", run / "plan.json", "--framework", "nemo-rl")
    assert code == 0, err
    assert yaml.safe_load(out)["cluster"] == {"num_nodes": 1, "gpus_per_node": 2}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--framework", "slurm"],
            "error: --framework: unknown framework 'slurm' (allowed: verl, openrlhf, nemo-rl)",
        ),
        ([], "error: --framework: missing (one of verl, openrlhf, nemo-rl)"),
    ],
)
def test_cli_bad_framework_is_one_line_exit_2(cli, argv, message):
    code, out, err = cli("export-config", NEMO_PLAN, *argv)
    assert code == 2
    assert out == ""
    assert err.splitlines() == [message]


def test_cli_missing_plan_is_one_line_exit_2(cli, tmp_path):
    missing = tmp_path / "nope.json"
    code, out, err = cli("export-config", missing, "--framework", "verl")
    assert code == 2
    assert out == ""
    assert err.splitlines() == [f"error: {missing}: no such file"]


def test_cli_unknown_instance_is_one_line_exit_2(cli, tmp_path):
    """A plan naming no findable instance asks for --instance."""
    plan = tmp_path / "lonely.json"
    plan.write_text(NEMO_PLAN.read_text())
    code, _, err = cli("export-config", plan, "--framework", "verl")
    assert code == 2
    assert err.splitlines() == [
        f"error: --instance: cannot tell which instance {plan} was made for (it records no "
        "instance name); give --instance INSTANCE"
    ]
