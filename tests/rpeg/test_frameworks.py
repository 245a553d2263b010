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

#: tiny_grpo_4gpu with the rollout on GPUs 0-1 and the rest on GPUs 2-3.


@pytest.fixture(scope="module")
def nemo() -> tuple[Problem, object]:
    problem = Problem.load(str(NEMO) + ".yaml")
    return problem, read_plan(NEMO_PLAN, problem.directory)


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
        # The settings themselves: the plan breaks rules an export would refuse first.
        settings = framework_settings(problem, plan, framework, "plan.json")
        lines = FRAMEWORKS[framework].render(settings).splitlines()
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
        ROOT / "instances" / "tiny_grpo_4gpu.yaml",
        "--solver",
        "exhaustive",
        "--framework",
        "verl",
        "--out",
        run,
        "--quiet",
    )
    assert code == 0
    code, out, err = cli("export-config", run / "plan.json", "--framework", "verl")
    assert code == 0, err
    assert "trainer.nnodes=1" in out.splitlines()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--framework", "slurm"],
            "error: --framework: unknown framework 'slurm' (allowed: verl, openrlhf, nemo-rl, "
            "slime); did you mean 'slime'?",
        ),
        ([], "error: --framework: missing (one of verl, openrlhf, nemo-rl, slime)"),
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
