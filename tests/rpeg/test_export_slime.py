"""``export-config --framework slime`` (THUDM/slime v0.3.1).

The flags are checked against the release's own list
(tests/data/releases/slime.json, written by benchmarks/release_keys/slime.py
from slime/utils/arguments.py at v0.3.1, Megatron-LM 1dcf0daf with slime's
patch, and SGLang 0.5.15.post1's ServerArgs) and against slime's start-up
checks, re-implemented below from its source. The plans are the published
ones (all inside slime's space) and the hand plans of tests/rpeg/slime_plans.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from rlplan.outputs.frameworks import FRAMEWORKS as EXPORTERS
from rlplan.outputs.frameworks import export_config, slime
from rlplan.outputs.frameworks.common import PlanFacts
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.plan import plan_from_json
from rlplan.rpeg.schema.engine import FRAMEWORK_NAMES
from rlplan.rpeg.schema.yamlio import read_yaml_file
from tests.rpeg.slime_plans import (
    CASES,
    HAND,
    LOGPROBS_EP1,
    NEMO,
    NEMO_ASYNC,
    ROOT,
    grpo,
    logprobs_tp2,
    published,
)
from tests.rpeg.slime_plans import reference_apart as reference_apart_plan

KEYS = json.loads((ROOT / "tests" / "data" / "releases" / "slime.json").read_text())
SPACE = FRAMEWORKS["slime"]


def _settings(problem: Any, plan: Any) -> slime.SlimeSettings:
    """The exporter's settings, called directly (whatever refuses plans outside the space)."""
    return slime.settings(PlanFacts(problem, plan), "plan.json")


def _flags(problem: Any, plan: Any) -> dict[str, Any]:
    return {key: value for kind, key, value in _settings(problem, plan).items if kind == "set"}


def _comments(problem: Any, plan: Any) -> list[str]:
    return [text for kind, text, _ in _settings(problem, plan).items if kind == "comment"]


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, Any, Any]:
    problem, plan = CASES[request.param]()
    return request.param, problem, plan


def _fits(value: Any, type_name: str) -> bool:
    """argparse's view: a switch is given bare, a number or string as its type parses it."""
    if type_name == "bool":
        return value is True
    if isinstance(value, bool):
        return False
    return {
        "int": isinstance(value, int),
        "float": isinstance(value, int | float),
        "str": isinstance(value, str),
    }.get(type_name, False)


def test_hand_plans_lie_in_slimes_space():
    """The hand plans break no rule of slime's plan space: export-config lets them through."""
    for name, build in HAND.items():
        problem, plan = build()
        gpus = problem.directory.cluster.num_gpus
        assert SPACE.unsupported(problem.instance) is None, name
        assert plan_problems(SPACE, problem.directory.template, plan, gpus) == [], name
        assert export_config(problem, plan, "slime", "plan.json") == slime.render(
            _settings(problem, plan)
        )


def test_every_flag_is_a_release_flag_of_its_type(case):
    """Every flag the exporter sets is one slime v0.3.1's parse_args takes, with its type."""
    name, problem, plan = case
    assert KEYS["release"] == SPACE.release == "v0.3.1"
    for key, value in _flags(problem, plan).items():
        assert key in KEYS["keys"], f"{name}: {key} is no flag of slime {KEYS['release']}"
        assert _fits(value, KEYS["keys"][key]), f"{name}: {key} {value!r}"


def test_release_list_has_no_flag_slime_sets_itself():
    """slime sets SGLang's tp_size from --rollout-num-gpus-per-engine (skipped_args): no
    --sglang-tp-size; and SGLang v0.5.15 has no --enable-ep-moe (ep is --ep-size)."""
    keys = KEYS["keys"]
    assert "--sglang-tp-size" not in keys and "--sglang-enable-ep-moe" not in keys
    assert keys["--sglang-ep-size"] == keys["--sglang-dp-size"] == "int"
    assert keys["--no-offload-train"] == keys["--sglang-enable-dp-attention"] == "bool"


def startup_errors(flags: dict[str, Any], script: str, cluster_gpus: int) -> list[str]:
    """slime v0.3.1's start-up checks that these flags fail.

    Sources (THUDM/slime v0.3.1): train_async.py (no --colocate);
    slime/utils/dp_schedule.py build_dp_schedule (the samples of a step split
    into micro-batches whose count is a multiple of dp; steps of
    --global-batch-size samples); slime_validate_args (dynamic batches need
    --max-tokens-per-gpu); slime/backends/sglang_utils/arguments.py
    validate_args (pp divides the GPUs per engine, dp_size > 1 needs dp
    attention); placement_group.py (one placement group of the actor's and the
    rollout's GPUs, max of them under --colocate); Megatron-LM initialize
    (GPUs = dp x tp x pp x cp).
    """
    errors = []
    gpus = flags["--actor-num-nodes"] * flags["--actor-num-gpus-per-node"]
    model = flags["--tensor-model-parallel-size"] * flags["--pipeline-model-parallel-size"]
    model *= flags["--context-parallel-size"]
    if gpus % model:
        errors.append("actor GPUs are no multiple of tp x pp x cp")
    samples = flags["--rollout-batch-size"] * flags["--n-samples-per-prompt"]
    batch = flags["--global-batch-size"]
    if samples % batch:
        errors.append("samples are no multiple of the global batch")
    if "--use-dynamic-batch-size" in flags:
        if "--max-tokens-per-gpu" not in flags:
            errors.append("dynamic batch size without max tokens per GPU")
    elif batch % (gpus // model * flags.get("--micro-batch-size", 1)):
        errors.append("static micro-batches are no multiple of dp")
    if script == "train_async.py" and "--colocate" in flags:
        errors.append("train_async.py with --colocate")
    if flags["--rollout-num-gpus-per-engine"] % flags.get("--sglang-pp-size", 1):
        errors.append("sglang pp does not divide the GPUs per engine")
    if flags.get("--sglang-dp-size", 1) > 1 and "--sglang-enable-dp-attention" not in flags:
        errors.append("sglang dp size without dp attention")
    rollout = flags["--rollout-num-gpus"]
    total = max(gpus, rollout) if "--colocate" in flags else gpus + rollout
    if total > cluster_gpus:
        errors.append(f"placement group of {total} of {cluster_gpus} GPUs")
    return errors


def test_flags_pass_slimes_start_up_checks(case):
    """The exported flags pass slime's checks; the step's samples and optimizer steps follow."""
    name, problem, plan = case
    out = _settings(problem, plan)
    flags = {key: value for kind, key, value in out.items if kind == "set"}
    assert startup_errors(flags, out.script, problem.instance.hardware.num_gpus) == [], name
    workload = problem.instance.workload
    samples = flags["--rollout-batch-size"] * flags["--n-samples-per-prompt"]
    assert samples == workload.sequences
    assert samples // flags["--global-batch-size"] == workload.optimizer_steps, name


def test_start_up_checks_catch_what_they_guard():
    """The re-implemented checks fail on flags slime refuses."""
    problem, plan = HAND["static-tp2"]()
    flags = _flags(problem, plan)
    assert startup_errors(flags, "train.py", 4) == []
    assert startup_errors({**flags, "--micro-batch-size": 6}, "train.py", 4) == [
        "static micro-batches are no multiple of dp"
    ]
    assert startup_errors(flags, "train_async.py", 4) == ["train_async.py with --colocate"]
    apart = {key: value for key, value in flags.items() if key != "--colocate"}
    assert startup_errors(apart, "train.py", 4) == ["placement group of 8 of 4 GPUs"]
    assert startup_errors({**flags, "--sglang-dp-size": 2}, "train.py", 4) == [
        "sglang dp size without dp attention"
    ]


#: (case, flag, value): each derived flag once, its value worked out by hand.
DERIVED = [
    # published NeMo RL run: 2 nodes x 8 GPUs, everything on the 16 GPUs
    (f"{NEMO.name}.plan.json", "--actor-num-nodes", 2),
    (f"{NEMO.name}.plan.json", "--actor-num-gpus-per-node", 8),  # the 16-GPU block, 8 a node
    (f"{NEMO.name}.plan.json", "--rollout-num-gpus", 16),  # the rollout's 16 GPUs, no reward model
    (f"{NEMO.name}.plan.json", "--colocate", True),  # rollout and training share GPUs 0-15
    (f"{NEMO.name}.plan.json", "--rollout-batch-size", 64),  # workload.batch_size
    (f"{NEMO.name}.plan.json", "--n-samples-per-prompt", 32),
    (f"{NEMO.name}.plan.json", "--global-batch-size", 512),  # 64 x 32 / 4 optimizer steps
    (f"{NEMO.name}.plan.json", "--rollout-max-response-len", 3966),  # generation_length
    (f"{NEMO.name}.plan.json", "--pipeline-model-parallel-size", 2),  # actor.train pp 2
    (f"{NEMO.name}.plan.json", "--tensor-model-parallel-size", 1),
    (f"{NEMO.name}.plan.json", "--rollout-num-gpus-per-engine", 1),  # rollout tp 1, pp 1
    (f"{NEMO.name}.plan.json", "--sglang-mem-fraction-static", 0.6),  # gpu_memory_utilization
    (f"{NEMO.name}.plan.json", "--sglang-max-running-requests", 1024),  # max_num_seqs
    (f"{NEMO.name}.plan.json", "--sglang-server-concurrency", 1024),  # 1024 > slime's 512
    (f"{NEMO.name}.plan.json", "--use-dynamic-batch-size", True),  # sequence_packing
    # 4 sequences per micro-batch x 1192.86 mean tokens = 4771.4, up: 4772
    (f"{NEMO.name}.plan.json", "--max-tokens-per-gpu", 4772),
    (f"{NEMO.name}.plan.json", "--recompute-granularity", "full"),  # recompute full
    (f"{NEMO.name}.plan.json", "--use-kl-loss", True),  # a reference model
    (f"{NEMO.name}.plan.json", "--rm-type", "math"),  # the rule reward
    # published async run: training on node 0, the rollout on node 1
    (f"{NEMO_ASYNC.name}.plan.json", "--actor-num-nodes", 1),
    (f"{NEMO_ASYNC.name}.plan.json", "--rollout-num-gpus", 8),
    (f"{NEMO_ASYNC.name}.plan.json", "--sglang-mem-fraction-static", 0.8),
    # 4 x 1256.59 = 5026.4, up: 5027
    (f"{NEMO_ASYNC.name}.plan.json", "--max-tokens-per-gpu", 5027),
    # tiny_grpo_4gpu: rollout GPUs 0-1 + reward model GPUs 2-3 = 4 rollout GPUs
    ("grpo-colocated", "--rollout-num-gpus", 4),
    ("grpo-colocated", "--actor-num-gpus-per-node", 4),
    ("grpo-colocated", "--num-gpus-per-node", 4),  # the cluster's 4 GPUs per node, not 8
    ("grpo-colocated", "--no-offload-train", True),  # actor.train offload false beside the rollout
    ("grpo-colocated", "--sglang-config", "sglang_config.yaml"),  # the reward model's group
    ("grpo-async", "--actor-num-gpus-per-node", 2),  # Megatron on GPUs 2-3
    ("grpo-async", "--rollout-num-gpus", 2),  # rollout GPU 0 + reward GPU 1
    ("async-offloaded", "--offload-train", True),  # offload true on GPUs of its own
    ("ppo", "--advantage-estimator", "ppo"),
    ("static-tp2", "--tensor-model-parallel-size", 2),
    ("static-tp2", "--sequence-parallel", True),  # tp 2
    # etp 1 written: Megatron's default would be tp (validate_args), 2 here
    ("static-tp2", "--expert-tensor-parallel-size", 1),
    ("static-tp2", "--rollout-num-gpus-per-engine", 2),  # rollout tp 2
    # 32 samples, dp 2: the plan's ceil(16 / 3) = 6 x 2 = 12 and 5 x 2 = 10 do not divide
    # 32, 4 x 2 = 8 does
    ("static-tp2", "--micro-batch-size", 4),
    ("static-tp2", "--recompute-method", "uniform"),
    ("static-tp2", "--recompute-num-layers", 1),
    ("static-tp2", "--sglang-cuda-graph-backend-decode", "disabled"),  # cuda_graphs false
    ("static-tp2", "--sglang-cuda-graph-backend-prefill", "disabled"),
    ("no-reference", "--use-rollout-logprobs", True),  # no actor.infer
    ("rollout-pp2", "--sglang-pp-size", 2),
    ("rollout-pp2", "--rollout-num-gpus-per-engine", 2),  # tp 1 x pp 2
    # mixture of experts: an engine of ep 2 over tp 1 is SGLang tp 2, ep 2, dp attention 2
    ("moe-dp-attention", "--rollout-num-gpus-per-engine", 2),  # ep 2 x pp 1
    ("moe-dp-attention", "--sglang-ep-size", 2),
    ("moe-dp-attention", "--sglang-enable-dp-attention", True),  # ep 2 > tp 1
    ("moe-dp-attention", "--sglang-dp-size", 2),  # ep 2 / tp 1 attention replicas
    ("moe-dp-attention", "--sglang-max-running-requests", 64),  # max_num_seqs 32 x 2 replicas
    ("moe-dp-attention", "--context-parallel-size", 2),
    ("moe-dp-attention", "--expert-model-parallel-size", 2),
    ("moe-dp-attention", "--expert-tensor-parallel-size", 1),
    # 6 sequences x 242.5 tokens = 1455 per micro-batch, over cp 2: 727.5, up: 728
    ("moe-dp-attention", "--max-tokens-per-gpu", 728),
    ("moe-expert-tensor", "--sglang-ep-size", 2),  # ep 2 = tp 2: experts over the engine's tp
    ("moe-expert-tensor", "--sglang-max-running-requests", 32),  # one attention replica
    ("moe-expert-tensor", "--rollout-num-gpus-per-engine", 2),
    ("moe-expert-tensor", "--expert-tensor-parallel-size", 2),
    ("moe-expert-tensor", "--tensor-model-parallel-size", 2),
]


@pytest.mark.parametrize(
    ("name", "flag", "value"), DERIVED, ids=[f"{c}:{f}" for c, f, _ in DERIVED]
)
def test_derived_flag(name, flag, value):
    problem, plan = CASES[name]()
    assert _flags(problem, plan)[flag] == value


#: (case, flags the export must not set).
ABSENT = [
    (f"{NEMO.name}.plan.json", "--sequence-parallel"),  # tp 1: Megatron turns it off
    (f"{NEMO.name}.plan.json", "--use-rollout-logprobs"),  # actor.infer recomputes them
    (f"{NEMO.name}.plan.json", "--offload-train"),  # --colocate offloads by default
    (f"{NEMO_ASYNC.name}.plan.json", "--colocate"),  # the rollout on a node of its own
    ("ppo", "--no-offload-train"),  # PPO offloads actor and critic
    ("static-tp2", "--use-dynamic-batch-size"),  # no packing
    ("no-reference", "--use-kl-loss"),  # no reference model
    ("grpo-colocated", "--recompute-granularity"),  # recompute none
    ("grpo-colocated", "--sglang-server-concurrency"),  # 32 running requests <= 512
    ("grpo-colocated", "--sglang-ep-size"),  # a dense model
    ("moe-expert-tensor", "--sglang-enable-dp-attention"),  # ep 2 = tp 2: one replica
    ("moe-expert-tensor", "--sglang-dp-size"),
]


@pytest.mark.parametrize(("name", "flag"), ABSENT, ids=[f"{c}:{f}" for c, f in ABSENT])
def test_flag_left_out(name, flag):
    problem, plan = CASES[name]()
    assert flag not in _flags(problem, plan)


def test_launch_script_follows_staleness():
    """Actor staleness 1 runs train_async.py (the next rollout generates while one trains)."""
    for name, script in (("grpo-async", "train_async.py"), ("grpo-colocated", "train.py")):
        problem, plan = CASES[name]()
        lines = export_config(problem, plan, "slime", "plan.json").splitlines()
        assert lines[-1] == f'python3 {script} "${{args[@]}}"'
        assert f"flags of python3 {script}" in lines[1]


def test_header_and_user_lines(case):
    """The export names the release and how to get it, and what the user must add."""
    _, problem, plan = case
    lines = slime.render(_settings(problem, plan)).splitlines()
    assert lines[1].startswith(
        "# valid for slime v0.3.1 (git clone --branch v0.3.1 https://github.com/THUDM/slime; "
        "its image slimerl/slime: SGLang v0.5.15.post1, Megatron-LM 1dcf0daf)"
    )
    assert lines[-2] == ")" and "args=(" in lines
    assert any(line.startswith("# add: --hf-checkpoint") for line in lines)
    asks_ref = any(line.startswith("# add: --ref-load") for line in lines)
    assert asks_ref == ("reference.infer" in problem.directory.template.names)


def test_not_expressible_lines():
    """What slime cannot express is a comment line, never a dropped setting."""
    comments = _comments(*published(NEMO.with_name(NEMO.name + ".plan.json")))
    # log-prob passes take the training micro-batches: 8 x 1192.86 = 9543 tokens vs 4772
    assert (
        "not expressible in slime: actor.infer micro-batches of 9543 tokens per GPU while "
        "actor.train 4772 (every Megatron pass takes the training micro-batches)"
    ) in comments
    assert (
        "not expressible in slime: 8 reward workers (the rule runs in the rollout manager's "
        "asyncio loop, one process)"
    ) in comments
    static = _comments(*HAND["static-tp2"]())
    assert (
        "not expressible in slime: actor.train micro-batch 6 per GPU (32 samples per step are no "
        "multiple of 6 x dp 2, as build_dp_schedule asserts): 4 here"
    ) in static
    # the reward model on GPUs 2-3 of the Megatron GPUs 0-3: slime sleeps it under --colocate
    assert (
        "not expressible in slime: reward.infer offload false (slime offloads a reward server "
        "group on the Megatron GPUs under --colocate)"
    ) in static


def test_a_reference_on_gpus_of_its_own_is_a_comment_line():
    """Outside the space (settings called directly): the reference has its own block."""
    problem = grpo()
    plan = plan_from_json(reference_apart_plan(), problem.directory)
    assert (
        "not expressible in slime: reference.infer on GPUs 2-3 (tp 1, pp 1, dp 2, cp 1, ep 1, "
        "etp 1) while actor.train on GPUs 0-3 (tp 1, pp 1, dp 4, cp 1, ep 1, etp 1): slime "
        "computes it on actor.train's Megatron model, on its GPUs and in its layout"
    ) in _comments(problem, plan)


def test_a_layout_of_its_own_is_a_comment_line():
    """Outside the space: old log-probs on actor.train's GPUs, but in tp 2 x dp 2."""
    problem = grpo()
    plan = plan_from_json(logprobs_tp2(), problem.directory)
    assert (
        "not expressible in slime: actor.infer on GPUs 0-3 (tp 2, pp 1, dp 2, cp 1, ep 1, etp 1) "
        "while actor.train on GPUs 0-3 (tp 1, pp 1, dp 4, cp 1, ep 1, etp 1): slime computes it "
        "on actor.train's Megatron model, on its GPUs and in its layout"
    ) in _comments(problem, plan)


def test_an_expert_layout_of_its_own_is_outside_slimes_space():
    """Old log-probs at ep 1 while the actor trains at ep 2: slime runs them on the training
    model, at ep 2, so its layout rule (which compares ep, etp and cp too) refuses the plan."""
    problem, plan = LOGPROBS_EP1["moe-logprobs-ep1"]()
    gpus = problem.directory.cluster.num_gpus
    broken = plan_problems(SPACE, problem.directory.template, plan, gpus)
    assert len(broken) == 1 and "logprobs-on-actor" in broken[0]


def test_placement_slime_cannot_make_is_a_comment_line():
    """A reward model on Megatron's GPUs with the rollout apart: without --colocate slime puts
    every server group after the actor's GPUs (slots 2 and 3 here), so they share none."""
    problem, plan = HAND["reward-on-actor"]()
    assert SPACE.unsupported(problem.instance) is None
    comments = _comments(problem, plan)
    assert (
        "not expressible in slime: reward.infer on GPU 2 and actor.train on GPUs 2-3 (slime's "
        "placement puts them on separate GPUs)"
    ) in comments
    assert not any("actor.generate on GPU 0 and" in line for line in comments)


def test_plan_outside_slimes_space_is_refused():
    """export_config refuses the plan in one line naming the rule it breaks."""
    problem = grpo()
    plan = plan_from_json(reference_apart_plan(), problem.directory)
    with pytest.raises(PlanError) as caught:
        export_config(problem, plan, "slime", "plan.json")
    assert "breaks slime rule reference-on-actor" in str(caught.value)
    assert "solve with --framework slime" in str(caught.value)


def test_refused_on_the_command_line(cli, tmp_path):
    """``export-config --framework slime`` on that plan: one line, exit code 2."""
    data = read_yaml_file(ROOT / "instances" / "tiny_grpo_4gpu.yaml")
    data["engine"]["recompute_logprobs"] = True
    data["placement"].update(offload=[False, True])
    instance = tmp_path / "widened.yaml"
    instance.write_text(yaml.safe_dump(data))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(reference_apart_plan()))
    code, out, err = cli("export-config", path, "--instance", instance, "--framework", "slime")
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("error: plan.json: reference.infer")
    assert "breaks slime rule reference-on-actor" in line


def test_every_plan_space_has_an_exporter():
    """engine.framework's names are export-config's: no plan space without an exporter."""
    assert set(FRAMEWORK_NAMES) == set(EXPORTERS)
    assert EXPORTERS["slime"] is slime
