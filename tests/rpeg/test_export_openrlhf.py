"""``export-config --framework openrlhf`` and OpenRLHF's plan space (OpenRLHF v0.11.0).

The flags are checked against the release's own list
(tests/data/releases/openrlhf.json, written by benchmarks/release_keys/openrlhf.py
from openrlhf/cli/train_ppo_ray.py of the PyPI wheel openrlhf==0.11.0) and
against OpenRLHF's start-up checks, re-implemented below from its source.

Plans:

* the shipped published plans (instances/published/), mostly outside
  OpenRLHF's space (pipeline stages, max_num_seqs 1024) but exported anyway;
* plans inside the space, written by hand on the published NeMo RL instances
  and ppo_8b_1x2x8_h100 with 128 added to ``placement.max_num_seqs`` (the
  rollout's only value in OpenRLHF): everything colocated on 16 GPUs;
  asynchronous with the rollout on node 0; PPO with critic and reward model on
  node 1 beside the colocated actor; without a reference model.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rlplan.outputs.frameworks import openrlhf
from rlplan.outputs.frameworks.common import PlanFacts
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS
from rlplan.rpeg.model.plan import plan_from_json, read_plan
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "instances" / "published"
PUBLISHED_PLANS = sorted(PUBLISHED.glob("**/*.plan.json"))
KEYS = json.loads((ROOT / "tests" / "data" / "releases" / "openrlhf.json").read_text())
SPACE = FRAMEWORKS["openrlhf"]

NEMO = PUBLISHED / "nemo_rl_grpo_llama31_8b_2x8_h100"
NEMO_ASYNC = PUBLISHED / "nemo_rl_grpo_llama31_8b_async_2x8_h100"
PPO = ROOT / "instances" / "ppo_8b_1x2x8_h100"

ALL = {"origin": [0, 0, 0], "extent": [1, 2, 8]}
NODE0 = {"origin": [0, 0, 0], "extent": [1, 1, 8]}
NODE1 = {"origin": [0, 1, 0], "extent": [1, 1, 8]}
ROLLOUT = {"pp": 1, "tp": 1, "gpu_memory_utilization": 0.6, "max_num_seqs": 128}
TRAIN = {"pp": 1, "tp": 1, "recompute": "full", "sharding": "zero3", "offload": True}


def _vertex(block: dict, dp: int, **fields: Any) -> dict:
    return {"block": block, "dp": dp, "pp": 1, "tp": 1, **fields}


#: GRPO on the published NeMo RL instance, everything on the 16 GPUs, on-policy.
COLOCATED = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": {"block": ALL, "dp": 16, **ROLLOUT},
        "actor.infer": _vertex(ALL, 16, micro_batch_size=8, offload=False),
        "reference.infer": _vertex(ALL, 16, micro_batch_size=8, offload=True),
        "actor.train": {"block": ALL, "dp": 16, "micro_batch_size": 4, **TRAIN},
    },
}
#: GRPO on the published async instance: the rollout on node 0, training on node 1.
ASYNC_APART = {
    "staleness": {"actor": 1},
    "vertices": {
        "actor.generate": {"block": NODE0, "dp": 8, **{**ROLLOUT, "gpu_memory_utilization": 0.8}},
        "actor.infer": _vertex(NODE1, 8, micro_batch_size=8, offload=False),
        "reference.infer": _vertex(NODE1, 8, micro_batch_size=8, offload=False),
        "actor.train": {"block": NODE1, "dp": 8, "micro_batch_size": 2, **TRAIN},
    },
}
#: PPO: rollout, actor and reference on node 0, critic and reward model on node 1.
PPO_SPLIT = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        "actor.generate": {"block": NODE0, "dp": 8, **{**ROLLOUT, "gpu_memory_utilization": 0.5}},
        "actor.infer": _vertex(NODE0, 8, micro_batch_size=4, offload=False),
        "reference.infer": _vertex(NODE0, 8, micro_batch_size=4, offload=True),
        "reward.infer": _vertex(NODE1, 8, micro_batch_size=4, offload=True),
        "critic.infer": _vertex(NODE1, 8, micro_batch_size=4, offload=False),
        "actor.train": {"block": NODE0, "dp": 8, "micro_batch_size": 2, **TRAIN},
        "critic.train": {"block": NODE1, "dp": 8, "micro_batch_size": 2, **TRAIN},
    },
}


def _problem(base: Path, **engine: Any) -> Problem:
    """The instance at ``base``.yaml with max_num_seqs 128 allowed (and ``engine`` keys)."""
    data = read_yaml_file(f"{base}.yaml")
    data["placement"]["max_num_seqs"] = [128, 256, 1024]
    data.setdefault("engine", {}).update(engine)
    data.pop("reference", None)
    return Problem.from_instance(parse_instance(data, name=base.name))


def _hand(base: Path, document: dict, **engine: Any) -> tuple[Problem, Any]:
    problem = _problem(base, **engine)
    return problem, plan_from_json(copy.deepcopy(document), problem.directory)


def _without_reference(document: dict) -> dict:
    changed = copy.deepcopy(document)
    del changed["vertices"]["reference.infer"]
    return changed


HAND = {
    "colocated": lambda: _hand(NEMO, COLOCATED),
    "async-apart": lambda: _hand(NEMO_ASYNC, ASYNC_APART),
    "ppo-split": lambda: _hand(PPO, PPO_SPLIT),
    "no-reference": lambda: _hand(NEMO, _without_reference(COLOCATED), reference_model=False),
}


def _published(path: Path) -> tuple[Problem, Any]:
    problem = Problem.load(str(path).removesuffix(".plan.json") + ".yaml")
    return problem, read_plan(path, problem.directory)


def _settings(problem: Problem, plan: Any) -> openrlhf.Settings:
    """The exporter's settings, called directly (whatever refuses plans outside the space)."""
    return openrlhf.settings(PlanFacts(problem, plan), "plan.json")


def _flags(problem: Problem, plan: Any) -> dict[str, Any]:
    return {key: value for kind, key, value in _settings(problem, plan).items if kind == "set"}


def _lines(problem: Problem, plan: Any) -> list[str]:
    """The rendered export (the exporter's own, whatever refuses plans outside the space)."""
    return openrlhf.render(_settings(problem, plan)).splitlines()


def _cluster(problem: Problem) -> int:
    hardware = problem.instance.hardware
    return hardware.racks * hardware.nodes_per_rack * hardware.gpus_per_node


CASES = {path.name: (lambda path=path: _published(path)) for path in PUBLISHED_PLANS} | HAND


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> tuple[str, Problem, Any]:
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


def test_every_flag_is_a_release_flag_of_its_type(case):
    """(a) Every flag the exporter sets is in train_ppo_ray.py of the release, with its type."""
    name, problem, plan = case
    assert KEYS["release"] == SPACE.release
    for key, value in _flags(problem, plan).items():
        assert key in KEYS["keys"], f"{name}: {key} is no flag of OpenRLHF {KEYS['release']}"
        assert _fits(value, KEYS["keys"][key]), f"{name}: {key} {value!r}"


def _size(flags: dict[str, Any], group: str) -> int:
    """A group's GPUs; argparse defaults 1 node x 8 GPUs (train_ppo_ray.py)."""
    return flags.get(f"--{group}.num_nodes", 1) * flags.get(f"--{group}.num_gpus_per_node", 8)


def _groups(flags: dict[str, Any]) -> list[str]:
    """The DeepSpeed groups train_ppo_ray.py's train() builds from these flags."""
    groups = ["actor"]
    if flags.get("--algo.kl.init_coef", 0.01) > 0:  # ref_model only when init_coef > 0
        groups.append("ref")
    if "--reward.remote_url" not in flags:  # reward_model only without remote_url
        groups.append("reward")
    if flags.get("--algo.advantage.estimator", "gae") == "gae":  # critic for gae only
        groups.append("critic")
    return groups


def _ray_gpus(flags: dict[str, Any]) -> int:
    """GPUs the groups ask Ray for: shared placement groups count once (train())."""
    groups = _groups(flags)
    colocate_all = "--train.colocate_all" in flags
    synchronous = "--train.async_enable" not in flags
    actor_pg = colocate_all or "--train.colocate_actor_ref" in flags
    pair = "critic" in groups and "--train.colocate_critic_reward" in flags
    total = _size(flags, "actor")
    if not (colocate_all and synchronous):
        total += flags["--vllm.num_engines"] * flags.get("--vllm.tensor_parallel_size", 1)
    if "ref" in groups and not actor_pg:
        total += _size(flags, "ref")
    if pair:
        total += _size(flags, "critic")
    elif not colocate_all:
        total += sum(_size(flags, g) for g in ("critic", "reward") if g in groups)
    return total


def startup_errors(flags: dict[str, Any], cluster_gpus: int) -> list[str]:
    """OpenRLHF v0.11.0's start-up checks that these flags fail, and its silent changes.

    Sources (OpenRLHF/OpenRLHF v0.11.0): openrlhf/cli/train_ppo_ray.py (its
    asserts and train()), openrlhf/utils/deepspeed/deepspeed.py (every group's
    DeepSpeed config has train_batch_size = --train.batch_size x tp and
    train_micro_batch_size_per_gpu = --train.micro_batch_size), and DeepSpeed's
    deepspeed/runtime/config.py ``_batch_assertion`` (train_batch_size ==
    micro x gradient_accumulation_steps x world_size, with
    gradient_accumulation_steps = train_batch // (micro x world_size)).
    """
    errors = []
    n, prompts = flags["--rollout.n_samples_per_prompt"], flags["--rollout.batch_size"]
    batch, micro = flags["--train.batch_size"], flags.get("--train.micro_batch_size", 1)
    tp = flags.get("--ds.tensor_parallel_size", 1)
    for group in _groups(flags):
        world = _size(flags, group)
        accumulation = batch * tp // (micro * world)
        if accumulation < 1 or batch * tp != micro * accumulation * world:
            errors.append(f"DeepSpeed batch assertion in the {group} group")
    actors = _size(flags, "actor") // tp
    if n * prompts // flags.get("--rollout.micro_batch_size", 1) < actors:
        errors.append("fewer sample batches than actor processes")
    colocate_all = "--train.colocate_all" in flags
    asynchronous = "--train.async_enable" in flags
    if colocate_all and not asynchronous:
        engines = flags["--vllm.num_engines"] * flags.get("--vllm.tensor_parallel_size", 1)
        if _size(flags, "actor") != engines:
            errors.append("actor GPUs != vLLM engines x tp under colocate_all")
    colocated_ref = colocate_all or "--train.colocate_actor_ref" in flags
    if "ref" in _groups(flags) and colocated_ref and _size(flags, "ref") != _size(flags, "actor"):
        errors.append("colocated actor and ref differ in size")
    paired = "--train.colocate_critic_reward" in flags and "critic" in _groups(flags)
    if paired and _size(flags, "critic") != _size(flags, "reward"):
        errors.append("colocated critic and reward differ in size")
    if flags.get("--algo.advantage.estimator") == "group_norm" and n < 2:
        errors.append("group_norm requires n_samples_per_prompt > 1")
    if asynchronous and "--vllm.enable_sleep" in flags:
        errors.append("async with --vllm.enable_sleep")
    if "--vllm.enable_sleep" in flags and not colocate_all:
        errors.append("--vllm.enable_sleep dropped without colocate_all")
    if "--ds.packing_samples" in flags and not flags.get("--vllm.num_engines"):
        errors.append("packing without vLLM engines")
    if _ray_gpus(flags) > cluster_gpus:
        errors.append(f"Ray asked for {_ray_gpus(flags)} of {cluster_gpus} GPUs")
    return errors


def test_batch_settings_pass_openrlhfs_start_up_checks(case):
    """(b) The batch flags pass OpenRLHF's and DeepSpeed's checks, and the workload's
    optimizer steps per RL step follow (``workload.optimizer_steps``, one gradient
    synchronisation each in the plan's actor.train).

    OpenRLHF takes rollout.batch_size x n_samples_per_prompt // train.batch_size
    optimizer steps per epoch (openrlhf/trainer/ppo_trainer.py prepare_datasets,
    max_steps; replay_buffer.py expected_num_steps) and --train.max_epochs epochs.
    """
    name, problem, plan = case
    flags = _flags(problem, plan)
    assert startup_errors(flags, _cluster(problem)) == [], name
    workload = problem.instance.workload
    sequences = flags["--rollout.batch_size"] * flags["--rollout.n_samples_per_prompt"]
    assert sequences == workload.sequences
    assert sequences % flags["--train.batch_size"] == 0
    steps = sequences // flags["--train.batch_size"] * flags["--train.max_epochs"]
    assert steps == workload.optimizer_steps, name
    assert flags["--data.max_len"] == workload.context_length + workload.generation_length
    assert flags["--rollout.max_new_tokens"] == workload.generation_length


def test_start_up_checks_catch_what_they_guard():
    """The re-implemented checks fail on flags OpenRLHF refuses."""
    problem, plan = HAND["colocated"]()
    flags = _flags(problem, plan)
    assert startup_errors(flags, 16) == []
    assert startup_errors({**flags, "--train.batch_size": 2040}, 16) == [
        "DeepSpeed batch assertion in the actor group",
        "DeepSpeed batch assertion in the ref group",
    ]
    assert "Ray asked for 48 of 16 GPUs" in startup_errors(
        {k: v for k, v in flags.items() if k != "--train.colocate_all"}, 16
    )
    assert "fewer sample batches than actor processes" in startup_errors(
        {**flags, "--rollout.micro_batch_size": 256}, 16
    )


def test_train_micro_batch_is_lowered_until_deepspeed_accepts_it():
    """80 sequences over dp 8: the plan's micro-batch 4 (10 per replica in 3 micro-batches,
    ceil(10 / 3) = 4) is no divisor of the 10, so DeepSpeed would refuse it; 2 is.

    PPO_SPLIT with the workload cut to 20 prompts x 4 = 80 = 2 x 5 x 8.
    """
    data = read_yaml_file(f"{PPO}.yaml")
    data["placement"]["max_num_seqs"] = [128]
    data["workload"]["batch_size"] = 20
    problem = Problem.from_instance(parse_instance(data, name="ppo_80"))
    document = copy.deepcopy(PPO_SPLIT)
    for name in ("actor.train", "critic.train"):
        document["vertices"][name]["micro_batch_size"] = 4
    plan = plan_from_json(document, problem.directory)
    facts = PlanFacts(problem, plan)
    assert facts.micro_batch("actor.train") == 4
    settings = _settings(problem, plan)
    assert settings.value("--train.micro_batch_size") == 2
    assert startup_errors(_flags(problem, plan), 16) == []
    assert (
        "not expressible in OpenRLHF: train micro-batch 4 per GPU (80 sequences are no multiple "
        "of 4 x dp in every group, as DeepSpeed asserts): 2 here"
    ) in [text for kind, text, _ in settings.items if kind == "comment"]


@pytest.mark.parametrize("name", ["colocated", "no-reference"])
def test_reference_and_kl_follow_engine_reference_model(name):
    """(c) A reference model builds the ref group (--algo.kl.init_coef above 0, train_ppo_ray.py
    ``if args.algo.kl.init_coef > 0``), engine.reference_model false builds none.

    Also the published verl DAPO run, which has no reference model.
    """
    problem, plan = HAND[name]()
    flags = _flags(problem, plan)
    if problem.instance.engine.reference_model:
        assert flags["--algo.kl.init_coef"] > 0
        assert "ref" in _groups(flags)
        assert _size(flags, "ref") == _size(flags, "actor")  # colocated: one placement group
    else:
        assert flags["--algo.kl.init_coef"] == 0
        assert "ref" not in _groups(flags)
        assert not any(key.startswith("--ref.") for key in flags)
    dapo = _flags(*_published(PUBLISHED / "verl_dapo_qwen25_math_7b_16_h20.plan.json"))
    assert dapo["--algo.kl.init_coef"] == 0


def test_rule_reward_is_a_reward_function_not_a_reward_model(case):
    """(d) A rule reward is --reward.remote_url naming the reward function's .py file
    (openrlhf/utils/agent.py), so train_ppo_ray.py builds no reward group; a reward model
    gets its group and a line asking for its path.
    """
    _, problem, plan = case
    settings = _settings(problem, plan)
    flags = _flags(problem, plan)
    comments = [text for kind, text, _ in settings.items if kind == "comment"]
    asks_for_model = any(text.startswith("add: --reward.model_name_or_path") for text in comments)
    if problem.instance.reward_rule is not None:
        assert flags["--reward.remote_url"].endswith(".py")
        assert "reward" not in _groups(flags)
        assert not any(key.startswith("--reward.num_") for key in flags)
        assert not asks_for_model
    else:
        assert "--reward.remote_url" not in flags
        assert "reward" in _groups(flags)
        assert _size(flags, "reward") == 8
        assert asks_for_model


def test_header_names_the_release(case):
    """(e) The export says which release its flags are valid for, and how to get it."""
    _, problem, plan = case
    lines = _lines(problem, plan)
    assert lines[1].startswith(
        "# valid for OpenRLHF v0.11.0 (pip install openrlhf==0.11.0, vLLM 0.27.1): flags of "
        "python3 -m openrlhf.cli.train_ppo_ray"
    )
    assert SPACE.release == "v0.11.0" == KEYS["release"]
    assert lines[-2:] == [")", 'python3 -m openrlhf.cli.train_ppo_ray "${args[@]}"']
    assert "args=(" in lines
    assert any(line.startswith("# add: --actor.model_name_or_path") for line in lines)
    hardware = problem.instance.hardware
    nodes = hardware.racks * hardware.nodes_per_rack
    assert any(
        line.startswith(f"# cluster: {nodes} nodes x {hardware.gpus_per_node} GPUs in one Ray")
        for line in lines
    )


def test_published_nemo_plan_as_openrlhf():
    """16 engines of tp 1, everything colocated, ZeRO-1; pp 2 and max_num_seqs 1024 written
    as inexpressible (the plan lies outside OpenRLHF's space), the rule reward a function."""
    lines = _lines(*_published(Path(f"{NEMO}.plan.json")))
    expected = [
        "--algo.advantage.estimator group_norm",
        "--rollout.batch_size 64",
        "--rollout.n_samples_per_prompt 32",
        "--train.batch_size 512",
        "--train.max_epochs 1",
        "--data.max_len 4096",
        "--rollout.max_new_tokens 3966",
        "--algo.kl.init_coef 0.01",
        "--reward.remote_url reward_func.py",
        "--actor.num_nodes 2",
        "--actor.num_gpus_per_node 8",
        "--ref.num_nodes 2",
        "--ref.num_gpus_per_node 8",
        "--vllm.num_engines 16",
        "--vllm.tensor_parallel_size 1",
        "--vllm.gpu_memory_utilization 0.6",
        "# not expressible in OpenRLHF: rollout max_num_seqs 1024 (no flag: vLLM 0.27.1's engine "
        "default 128 applies)",
        "--train.colocate_all",
        "--vllm.enable_sleep",
        "# not expressible in OpenRLHF: actor.train pp 2 (DeepSpeed models have no pipeline "
        "stages)",
        "--ds.zero_stage 1",
        "--actor.gradient_checkpointing_enable",
        "--ds.enable_sleep",
        "--train.micro_batch_size 4",
        "--rollout.micro_batch_size 8",
        "# not expressible in OpenRLHF: reference.infer offload true under ZeRO-1 (--ref.offload "
        "is DeepSpeed's offload_param, which acts under ZeRO-3 only: the weights stay on the "
        "GPUs)",
    ]
    positions = [lines.index(line) for line in expected]
    assert positions == sorted(positions)
    assert not any(line.startswith(("--reward.num_", "--ds.adam_offload")) for line in lines)
    assert "--train.async_enable" not in lines
    assert "--ref.offload" not in lines


def test_rollout_apart_from_training():
    """tiny_grpo_4gpu, rollout on GPUs 0-1 (test_frameworks.GRPO_APART): actor and reference
    colocate; the reward model beside them needs --train.colocate_all, which would also put
    the rollout there."""
    from tests.rpeg.test_frameworks import GRPO_APART

    problem = Problem.load(str(ROOT / "instances" / "tiny_grpo_4gpu.yaml"))
    plan = plan_from_json(copy.deepcopy(GRPO_APART), problem.directory)
    lines = _lines(problem, plan)
    assert "--train.colocate_all" not in lines
    for line in (
        "--actor.num_gpus_per_node 2",
        "--vllm.num_engines 1",
        "--vllm.tensor_parallel_size 2",
        "--train.colocate_actor_ref",
        "# not expressible in OpenRLHF: actor.train on GPUs 2-3 and reward.infer on GPUs 2-3 "
        "(with these flags the actor and reward groups share no GPU)",
    ):
        assert line in lines
