"""``export-config --framework nemo-rl``: plans as NeMo RL configs, checked against the release.

NeMo RL's own start-up checks are re-implemented from NVIDIA-NeMo/RL at the
targeted tag (:data:`rlplan.rpeg.model.frameworks.nemo_rl.RELEASE`) and run
on the exported keys alone; the keys and their types are checked against the
release's key list, tests/data/releases/nemo_rl.json
(benchmarks/release_keys/nemo_rl.py writes it).

Plans: the published NeMo RL runs inside NeMo RL's rules, and by hand
* a PPO plan on ppo_8b_1x2x8_h100: the policy, value model and rollout on
  node 0 (Megatron tp 2, dp 4), the reward model on node 1;
* an async GRPO plan on grpo_7b_1x2x8_h100: the rollout on GPUs 0-3, the
  policy (ZeRO-3, log-probs on its workers) on GPUs 4-7, the reward model on
  two GPUs of node 1.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from benchmarks.release_keys.nemo_rl import outside_bases, problems
from rlplan.outputs.frameworks import export_config, framework_settings
from rlplan.outputs.frameworks.common import optimizer_steps
from rlplan.outputs.frameworks.nemo_rl import BEYOND_BASES, KL_PENALTY
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.frameworks.nemo_rl import RELEASE
from rlplan.rpeg.model.plan import plan_from_json, read_plan
from rlplan.rpeg.templates import FUSED

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "instances" / "published"
RELEASE_KEYS = json.loads((ROOT / "tests" / "data" / "releases" / "nemo_rl.json").read_text())
NEMO = FRAMEWORKS["nemo-rl"]

NODE0 = {"origin": [0, 0, 0], "extent": [1, 1, 8]}
NODE1 = {"origin": [0, 1, 0], "extent": [1, 1, 8]}
_LAYOUT = {"block": NODE0, "dp": 4, "pp": 1, "tp": 2}
_TRAIN = {"micro_batch_size": 2, "recompute": "full", "sharding": "zero1", "offload": True}
PPO_NODE0 = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        "actor.generate": {
            **{"block": NODE0, "dp": 8, "pp": 1, "tp": 1},
            **{"gpu_memory_utilization": 0.5, "max_num_seqs": 256},
        },
        "actor.infer": {**_LAYOUT, "micro_batch_size": 4, "offload": False},
        "reference.infer": {**_LAYOUT, "micro_batch_size": 4, "offload": True},
        "critic.infer": {**_LAYOUT, "micro_batch_size": 2, "offload": True},
        "reward.infer": {"block": NODE1, "dp": 8, "pp": 1, "tp": 1, "micro_batch_size": 4},
        "actor.train": {**_LAYOUT, **_TRAIN},
        "critic.train": {**_LAYOUT, **_TRAIN},
    },
}


def _gpus(node: int, first: int, count: int) -> dict:
    return {"origin": [0, node, first], "extent": [1, 1, count]}


def grpo_async(reference: bool = True) -> dict:
    """grpo_7b_1x2x8_h100, one step off-policy: rollout on GPUs 0-3, the policy on 4-7."""
    policy = {"block": _gpus(0, 4, 4), "dp": 4, "pp": 1, "tp": 1}
    vertices = {
        "actor.generate": {
            **{"block": _gpus(0, 0, 4), "dp": 4, "pp": 1, "tp": 1},
            **{"gpu_memory_utilization": 0.8, "max_num_seqs": 256},
        },
        "actor.infer": {**policy, "micro_batch_size": 4, "offload": False},
        "reward.infer": {"block": _gpus(1, 0, 2), "dp": 2, "pp": 1, "tp": 1, "micro_batch_size": 8},
        "actor.train": {**policy, "micro_batch_size": 2, "sharding": "zero3", "recompute": "full"},
    }
    if reference:
        vertices["reference.infer"] = {**policy, "micro_batch_size": 4, "offload": True}
    return {"staleness": {"actor": 1}, "vertices": vertices}


def _published() -> list[tuple[str, Problem, object]]:
    pairs = []
    for plan in sorted(PUBLISHED.rglob("*.plan.json")):
        problem = Problem.load(str(plan).replace(".plan.json", ".yaml"))
        loaded = read_plan(plan, problem.directory)
        gpus = problem.instance.hardware.num_gpus
        if not plan_problems(NEMO, problem.directory.template, loaded, gpus):
            pairs.append((plan.name, problem, loaded))
    return pairs


@pytest.fixture(scope="module")
def exports() -> list[tuple[str, Problem, object]]:
    """(name, problem, plan) of the published plans inside NeMo RL's rules and the hand plans."""
    pairs = _published()
    ppo = Problem.load(str(ROOT / "instances" / "ppo_8b_1x2x8_h100.yaml"))
    pairs.append(("ppo node 0", ppo, plan_from_json(PPO_NODE0, ppo.directory)))
    grpo = Problem.load(str(ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml"))
    pairs.append(("grpo async", grpo, plan_from_json(grpo_async(), grpo.directory)))
    for name, problem, plan in pairs:
        gpus = problem.instance.hardware.num_gpus
        assert not plan_problems(NEMO, problem.directory.template, plan, gpus), name
    return pairs


def _keys(problem: Problem, plan: object) -> dict:
    settings = framework_settings(problem, plan, "nemo-rl", "plan.json")
    return {key: value for kind, key, value in settings.items if kind == "set"}


def _comments(problem: Problem, plan: object) -> list[str]:
    text = export_config(problem, plan, "nemo-rl", "plan.json")
    return [line for line in text.splitlines() if line.startswith("# ")]


def _policy_and_rollout_gpus(keys: dict) -> tuple[int, int]:
    """GPUs of the policy and of the rollout, as ``setup`` splits the cluster.

    NVIDIA-NeMo/RL v0.7.0 nemo_rl/algorithms/grpo.py ``setup`` (the reward
    model's nodes, or on one node its GPUs, come off first; generation apart
    takes its GPUs on one node and whole nodes on more), ppo.py ``setup``
    (colocated only).
    """
    nodes, width = keys["cluster.num_nodes"], keys["cluster.gpus_per_node"]
    rm_nodes = keys.get("env.reward_model.resources.num_nodes", 0)
    rm_width = keys.get("env.reward_model.resources.gpus_per_node", 0)
    policy_nodes = nodes if nodes == 1 else nodes - rm_nodes
    assert policy_nodes > 0
    if keys["policy.generation.colocated.enabled"]:
        per_node = width - rm_width if nodes == 1 else width
        assert per_node > 0
        return policy_nodes * per_node, policy_nodes * per_node
    inference_width = keys["policy.generation.colocated.resources.gpus_per_node"]
    inference_nodes = keys["policy.generation.colocated.resources.num_nodes"]
    if policy_nodes == 1:
        assert inference_width > 0 and inference_nodes in (None, 1)
        train = width - inference_width - (rm_width if nodes == 1 else 0)
        inference = inference_width
    else:
        assert inference_nodes > 0 and inference_width == width
        train, inference = (policy_nodes - inference_nodes) * width, inference_nodes * width
    assert train > 0
    return train, inference


def nemo_startup_problems(keys: dict) -> list[str]:
    """NeMo RL v0.7.0's start-up checks of the batch and layout, on the exported keys.

    Each is an assertion of NVIDIA-NeMo/RL at v0.7.0: ``shard_by_batch_size``
    and ``make_microbatch_iterator`` (nemo_rl/distributed/batched_data_dict.py),
    the world size check and the tp >= 4 micro-batch check of ``Policy``
    (nemo_rl/models/policy/lm_policy.py), ``VllmGeneration.__init__``
    (nemo_rl/models/generation/vllm/vllm_generation.py), ``setup`` and
    ``async_grpo_train`` (nemo_rl/algorithms/grpo.py), ``setup`` of ppo.py and
    the packer's bin check (nemo_rl/data/packing/algorithms.py).
    """
    algorithm = "ppo" if "ppo.num_prompts_per_step" in keys else "grpo"
    samples = (
        keys[f"{algorithm}.num_prompts_per_step"] * keys[f"{algorithm}.num_generations_per_prompt"]
    )
    gbs, mbs = keys["policy.train_global_batch_size"], keys["policy.train_micro_batch_size"]
    lbs = keys.get("policy.logprob_batch_size", mbs)
    train, inference = _policy_and_rollout_gpus(keys)
    if keys["policy.megatron_cfg.enabled"]:
        tp = keys["policy.megatron_cfg.tensor_model_parallel_size"]
        pp = keys["policy.megatron_cfg.pipeline_model_parallel_size"]
    else:
        tp, pp = keys["policy.dtensor_cfg.tensor_parallel_size"], 1
    found = []
    checks = {
        "world size a multiple of tp x pp": train % (tp * pp) == 0,
        "B*K a multiple of the global batch": samples % gbs == 0,
        "global batch a multiple of dp": gbs % (train // (tp * pp)) == 0,
        "B*K a multiple of dp (log-probs)": samples % (train // (tp * pp)) == 0,
        "tp >= 4: train and log-prob micro-batches equal": tp < 4 or mbs == lbs,
        "force_on_policy_ratio: global batch is B*K": (
            not keys.get("loss_fn.force_on_policy_ratio") or gbs == samples
        ),
    }
    dp = train // (tp * pp)
    if keys["policy.sequence_packing.enabled"]:
        longest = keys["policy.max_total_sequence_length"]
        checks["train bins hold the longest sequence"] = (
            keys["policy.sequence_packing.train_mb_tokens"] >= longest
        )
        checks["log-prob bins hold the longest sequence"] = (
            keys.get("policy.sequence_packing.logprob_mb_tokens", longest) >= longest
        )
    elif dp and gbs % dp == 0 and samples % dp == 0:
        checks["unpacked: micro-batch divides a rank's share"] = (gbs // dp) % mbs == 0
        checks["unpacked: log-prob batch divides a rank's share"] = (samples // dp) % lbs == 0
    vtp = keys["policy.generation.vllm_cfg.tensor_parallel_size"]
    vpp = keys["policy.generation.vllm_cfg.pipeline_parallel_size"]
    async_engine = keys["policy.generation.vllm_cfg.async_engine"]
    checks["rollout world a multiple of vLLM tp x pp"] = inference % (vtp * vpp) == 0
    checks["vLLM pp > 1 needs the async engine"] = vpp == 1 or async_engine
    if keys.get("grpo.async_grpo.enabled"):
        checks["async GRPO: generation not colocated"] = not keys[
            "policy.generation.colocated.enabled"
        ]
        checks["async GRPO: the async engine"] = async_engine
        checks["async GRPO: importance sampling"] = keys[
            "loss_fn.use_importance_sampling_correction"
        ]
    if algorithm == "ppo":
        checks["PPO: colocated generation"] = keys["policy.generation.colocated.enabled"]
    found += [name for name, holds in checks.items() if not holds]
    return found


def test_emitted_keys_are_keys_of_the_release(exports):
    """Every key the exporter sets exists at the release with the value's type; the ``++``
    keys it names are those its base config lacks."""
    assert RELEASE_KEYS["release"] == RELEASE
    for name, problem, plan in exports:
        keys = _keys(problem, plan)
        assert problems(list(keys.items()), RELEASE_KEYS) == [], name
        bases = [keys["defaults"]] if isinstance(keys["defaults"], str) else keys["defaults"]
        beyond = outside_bases(list(keys.items()), bases, RELEASE_KEYS)
        assert set(beyond) <= BEYOND_BASES, name
        overrides = [line for line in _comments(problem, plan) if "take ++" in line]
        if len(bases) == 1 and beyond:
            assert overrides == [
                f"# or as overrides: uv run examples/run_grpo.py --config examples/configs/"
                f"{bases[0]} key=value ...; keys {bases[0]} lacks take ++ (++key=value): "
                f"{', '.join(beyond)}"
            ], name


def test_a_wrong_key_or_type_is_found():
    """The check itself: an unknown key, a float for an int and an unknown base are caught."""
    found = problems(
        [
            ("policy.train_mini_batch_size", 4),
            ("policy.train_micro_batch_size", 0.5),
            ("policy.generation.vllm_cfg.gpu_memory_utilization", 1),
            ("defaults", "grpo_math_2B.yaml"),
        ],
        RELEASE_KEYS,
    )
    assert found == [
        "policy.train_mini_batch_size: not a key of the release",
        "policy.train_micro_batch_size: float 0.5, the release has int",
        "defaults: grpo_math_2B.yaml is not a base config",
    ]


def test_batch_settings_pass_nemo_startup_checks(exports):
    """NeMo RL's own checks hold on the keys; the optimizer steps are the workload's; the
    policy gets the plan's GPUs."""
    for name, problem, plan in exports:
        keys = _keys(problem, plan)
        assert nemo_startup_problems(keys) == [], name
        samples = problem.instance.workload.sequences
        assert samples // keys["policy.train_global_batch_size"] == optimizer_steps(
            problem.instance
        ), name
        train, inference = _policy_and_rollout_gpus(keys)
        template = problem.directory.template.names
        blocks = dict(zip(template, plan.placements, strict=True))
        assert train == blocks["actor.train"].block.size, name
        assert inference == blocks["actor.generate"].block.size, name
        assert keys.get("ppo.ppo_epochs", 1) == 1, name
        unexpressed = [line for line in _comments(problem, plan) if "not expressible" in line]
        if any(spec.is_moe for spec in problem.instance.models.values()):
            # The MoE runs pack micro-batches of their mean sequence, shorter than the
            # longest sequence a NeMo RL bin must hold: said in one line, nothing else.
            unexpressed = [line for line in unexpressed if "packed micro-batches" not in line]
        assert not unexpressed, name


def test_a_packed_micro_batch_holds_the_longest_sequence():
    """One sequence of 1,184 tokens on average per train micro-batch: the bin is raised to the
    2,048 tokens of the longest sequence, which NeMo RL's packer needs, and a line says so."""
    problem = Problem.load(str(ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml"))
    document = grpo_async()
    document["vertices"]["actor.train"]["micro_batch_size"] = 1
    plan = plan_from_json(document, problem.directory)
    keys = _keys(problem, plan)
    assert keys["policy.sequence_packing.train_mb_tokens"] == 2048
    assert nemo_startup_problems(keys) == []
    assert (
        "# not expressible in NeMo RL: actor.train packed micro-batches of 1184 tokens: a bin "
        "holds the longest sequence, 2048 tokens (nemo_rl/data/packing/algorithms.py), so it is set"
    ) in _comments(problem, plan)


def _grpo_7b(tmp_path: Path, **engine: bool) -> Problem:
    """grpo_7b_1x2x8_h100 with some ``engine`` facts changed."""
    document = yaml.safe_load((ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml").read_text())
    document.setdefault("engine", {}).update(engine)
    path = tmp_path / "grpo_7b.yaml"
    path.write_text(yaml.safe_dump(document))
    return Problem.load(str(path))


def test_reference_and_kl_follow_the_instance(tmp_path):
    """engine.reference_model on: a KL penalty above 0, which builds the reference copy
    (grpo.py: init_reference_model); off: 0, which skips it; PPO names the skip too."""
    grpo = Problem.load(str(ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml"))
    with_reference = _keys(grpo, plan_from_json(grpo_async(), grpo.directory))
    assert with_reference["loss_fn.reference_policy_kl_penalty"] == KL_PENALTY > 0
    bare = _grpo_7b(tmp_path, reference_model=False)
    assert not bare.instance.engine.reference_model
    without = _keys(bare, plan_from_json(grpo_async(reference=False), bare.directory))
    assert without["loss_fn.reference_policy_kl_penalty"] == 0
    ppo = Problem.load(str(ROOT / "instances" / "ppo_8b_1x2x8_h100.yaml"))
    keys = _keys(ppo, plan_from_json(PPO_NODE0, ppo.directory))
    assert keys["ppo.skip_reference_policy_logprobs_calculation"] is False
    assert keys["loss_fn.reference_policy_kl_penalty"] == KL_PENALTY


def test_without_old_logprobs_the_ratio_is_forced(tmp_path, exports):
    """No actor.infer (engine.recompute_logprobs false): force_on_policy_ratio, which grpo.py
    allows with one global batch of B*K; with actor.infer the ratio is computed."""
    keys = {name: _keys(problem, plan) for name, problem, plan in exports}
    assert "loss_fn.force_on_policy_ratio" not in keys["grpo async"]
    problem = _grpo_7b(tmp_path, recompute_logprobs=False)
    document = grpo_async()
    del document["vertices"]["actor.infer"]
    lean = _keys(problem, plan_from_json(document, problem.directory))
    assert lean["loss_fn.force_on_policy_ratio"] is True
    assert nemo_startup_problems(lean) == []


def test_a_rule_reward_is_an_environment_not_a_reward_model(exports):
    """The published runs' math verification: data.default.env_name math on env.math's
    workers, no reward model key, and a line saying where another reward goes."""
    published = [(n, p, plan) for n, p, plan in exports if n.endswith(".plan.json")]
    assert len(published) == 11  # 6 dense (GB200 included), 5 mixtures of experts
    for name, problem, plan in published:
        keys = _keys(problem, plan)
        assert keys["data.default.env_name"] == "math", name
        assert keys["env.math.num_workers"] == 8, name
        assert not [key for key in keys if "reward_model" in key], name
        assert "reward_model" not in str(keys["defaults"]), name
        assert any(
            "write your environment (nemo_rl/environments/interfaces.py" in line
            for line in _comments(problem, plan)
        ), name


def test_a_reward_model_has_its_environment_and_gpus(exports):
    """A reward model is the reward_model environment on GPUs of its own (grpo_rm_1B.yaml)."""
    keys = {name: _keys(problem, plan) for name, problem, plan in exports}
    grpo, ppo = keys["grpo async"], keys["ppo node 0"]
    assert grpo["defaults"] == "grpo_rm_1B.yaml"
    assert ppo["defaults"] == ["grpo_rm_1B.yaml", "ppo_math_1B_megatron.yaml"]
    for found, width in ((grpo, 2), (ppo, 8)):
        assert found["data.default.env_name"] == "reward_model"
        assert found["env.reward_model.resources.num_nodes"] == 1
        assert found["env.reward_model.resources.gpus_per_node"] == width
    assert ppo["data.env_name"] == "reward_model"


def test_the_header_names_the_release(exports):
    """Every export says which NeMo RL release its keys are for and how to get it."""
    for name, problem, plan in exports:
        header = _comments(problem, plan)[:3]
        assert header[1].startswith(
            f"# NeMo RL {RELEASE} (git clone --branch {RELEASE} https://github.com/NVIDIA-NeMo/RL"
        ), name
        assert header[2].startswith("# add: policy.model_name"), name


def test_published_plan_as_its_recipe(exports):
    """The published recipe's layout: colocated vLLM tp 1, Megatron tp 1 pp 2, checkpointing,
    4 and 8 sequences of 1,192.86 tokens on average per packed micro-batch, rounded up."""
    problem, plan = next((p, plan) for n, p, plan in exports if n.startswith("nemo_rl_grpo_llama"))
    document = yaml.safe_load(export_config(problem, plan, "nemo-rl", "plan.json"))
    policy = document["policy"]
    assert document["defaults"] == "grpo_math_1B_megatron.yaml"
    assert policy["generation"]["vllm_cfg"] == {
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "gpu_memory_utilization": 0.6,
        "async_engine": False,
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
    assert (policy["train_micro_batch_size"], policy["logprob_batch_size"]) == (4, 8)
    assert policy["sequence_packing"] == {
        "enabled": True,
        "train_mb_tokens": 4772,
        "logprob_mb_tokens": 9543,
    }
    # the recipe's global batch: 2,048 sequences in 4 optimizer steps (workload.optimizer_steps)
    assert (policy["train_global_batch_size"], policy["max_total_sequence_length"]) == (512, 4096)
    assert policy["generation"]["max_new_tokens"] == 3966
    assert document["grpo"] == {
        "num_prompts_per_step": 64,
        "num_generations_per_prompt": 32,
        "async_grpo": {"enabled": False},
    }
    assert document["cluster"] == {"num_nodes": 2, "gpus_per_node": 8}
    assert not [line for line in _comments(problem, plan) if "not expressible" in line]


def test_published_plans_lie_in_the_plan_space():
    """Every published NeMo RL run is inside NeMo RL's rules (a rule they broke would be wrong)."""
    names = [name for name, _, _ in _published()]
    assert sorted(names) == sorted(p.name for p in PUBLISHED.rglob("nemo_rl_*.plan.json"))


def _broken(instance: str, plan_file: str, change: dict) -> list[str]:
    problem = Problem.load(str(ROOT / "instances" / instance))
    document = json.loads((ROOT / "instances" / plan_file).read_text())
    for name, fields in change.get("vertices", {}).items():
        document["vertices"][name].update(fields)
    document["staleness"].update(change.get("staleness", {}))
    plan = plan_from_json(document, problem.directory)
    gpus = problem.instance.hardware.num_gpus
    return plan_problems(NEMO, problem.directory.template, plan, gpus)


def test_rules_name_what_nemo_rl_cannot_run():
    """Async with colocated generation, resident training states beside it, log-probs apart,
    a reference on the GPUs: each breaks its rule, with its source."""
    stem = "published/nemo_rl_grpo_llama31_8b_async_2x8_h100"
    colocated = {"vertices": {"actor.generate": {"block": NODE0}}}
    lines = _broken(f"{stem}.yaml", f"{stem}.plan.json", colocated)
    assert [line.split(": ")[0] for line in lines] == [
        "actor.train beside actor.generate",
        "actor.generate and actor.train",
    ]
    assert "NeMo RL rule train-offload-beside-rollout" in lines[0]
    assert "NeMo RL rule async-generation-apart" in lines[1]
    assert "nemo_rl/algorithms/grpo.py (async_grpo_train asserts" in lines[1]
    apart = {
        "vertices": {
            "actor.infer": {"block": NODE1, "dp": 8, "pp": 1},
            "reference.infer": {"offload": False},
        }
    }
    lines = _broken(f"{stem}.yaml", f"{stem}.plan.json", apart)
    assert len(lines) == 2
    assert any("rule reference-on-host" in line for line in lines)
    assert any("rule logprobs-on-policy" in line for line in lines)
    problem = Problem.load(str(ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml"))
    document = grpo_async()
    document["vertices"]["reward.infer"]["block"] = _gpus(0, 4, 2)
    plan = plan_from_json(document, problem.directory)
    lines = plan_problems(NEMO, problem.directory.template, plan, 16)
    assert [line.split(": NeMo RL rule ")[1].split(":")[0] for line in lines] == [
        "reward-model-apart-from-policy"
    ]


def test_algorithms_nemo_rl_has_no_trainer_for():
    """Online DPO, the fused actor-critic and PPO without old log-probs are unsupported."""
    dpo = Problem.load(str(ROOT / "instances" / "tiny_dpo_2gpu_v2.yaml")).instance
    assert NEMO.unsupported(dpo).name == "no-online-dpo"
    ppo = Problem.load(str(ROOT / "instances" / "tiny_ppo_2gpu.yaml")).instance
    assert not ppo.engine.recompute_logprobs
    assert NEMO.unsupported(ppo).name == "ppo-recomputes-logprobs"
    shared = Problem.load(str(ROOT / "instances" / "tiny_ppo_2gpu_ac.yaml")).instance
    fused = dataclasses.replace(shared, template=FUSED)
    assert fused.fused
    assert NEMO.unsupported(fused).name == "no-fused-actor-critic"
    grpo = Problem.load(str(ROOT / "instances" / "grpo_7b_1x2x8_h100.yaml")).instance
    assert NEMO.unsupported(grpo) is None
