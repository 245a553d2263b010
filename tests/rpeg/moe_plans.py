"""A tiny mixture-of-experts instance and hand-made plans for the MoE export tests.

The instances are tiny_grpo_4gpu.yaml and tiny_ppo_2gpu.yaml on one node of
8 GPUs, every model (actor, reference, reward, critic) a mixture of 8
experts, 2 per token, of width 64 (``experts``, ``experts_per_token``,
``expert_ffn_dim``), with old log-probs recomputed (an ``actor.infer``
vertex) and wider candidate lists (micro-batches, offload, ZeRO-3, ep, etp,
cp). S + T = 128 + 256 = 384 tokens, so cp 2 splits a sequence into 4 equal
chunks. The plans are written by hand (tests/rpeg/test_export_moe.py).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from rlplan.outputs.frameworks import export_config, framework_settings
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.plan import plan_from_json

ROOT = Path(__file__).resolve().parents[2]
MIXTURE = {"experts": 8, "experts_per_token": 2, "expert_ffn_dim": 64}
ALL = {"origin": [0, 0, 0], "extent": [1, 1, 8]}
LOW = {"origin": [0, 0, 0], "extent": [1, 1, 4]}
HIGH = {"origin": [0, 0, 4], "extent": [1, 1, 4]}


def moe_instance(folder: Path, base: str, packing: bool = True) -> Path:
    """``base`` (an instances/ file) on 8 GPUs with every model a mixture of experts."""
    document = yaml.safe_load((ROOT / "instances" / f"{base}.yaml").read_text(encoding="utf-8"))
    document["hardware"]["gpus_per_node"] = 8
    document["engine"]["recompute_logprobs"] = True
    document["engine"]["sequence_packing"] = packing
    document["optimizer"]["staleness_candidates"]["actor"] = [0, 1]
    for spec in document["models"].values():
        spec.update(MIXTURE)
    document["placement"].update(
        microbatches=[1, 2, 4, 8, 16, 32],
        offload=[False, True],
        sharding=["zero1", "zero3"],
        expert_parallel=[1, 2, 4, 8],
        expert_tensor_parallel=[1, 2],
        context_parallel=[1, 2],
        max_num_seqs=[8, 16, 32],
    )
    name = f"moe_{base}{'' if packing else '_unpacked'}"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def vertex(block: dict, dp: int, tp: int, **fields: object) -> dict:
    """A plan-file vertex entry at pp 1."""
    return {"block": block, "dp": dp, "pp": 1, "tp": tp, **fields}


def rollout(block: dict, dp: int, tp: int, ep: int) -> dict:
    """A rollout entry: gpu_memory_utilization 0.5, max_num_seqs 32."""
    return vertex(block, dp, tp, ep=ep, gpu_memory_utilization=0.5, max_num_seqs=32)


#: Every trained or scored vertex but the reward model on all 8 GPUs in one layout:
#: dp 2 x cp 2 x tp 2 = 8 GPUs; experts over ep 4 (8 / 4 = 2 experts per GPU), etp 1.
TRAIN = {"dp": 2, "tp": 2, "cp": 2, "ep": 4, "etp": 1, "microbatches": 2}

#: verl GRPO: all on GPUs 0-7; the rollout dp 4 x tp 2 with ep 8 (one copy of the
#: experts over all 8 GPUs, 4 attention ranks); the reward model (vLLM) dp 4 x tp 2,
#: ep 2 (tp 2 x 1 data-parallel rank), asleep beside the actor (verl's rule).
VERL_GRPO = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": rollout(ALL, 4, 2, ep=8),
        "actor.train": {"block": ALL, "pp": 1, **TRAIN},
        "actor.infer": {"block": ALL, "pp": 1, **TRAIN},
        "reference.infer": {"block": ALL, "pp": 1, **TRAIN},
        "reward.infer": vertex(ALL, 4, 2, ep=2, etp=1, microbatches=2, offload=True),
    },
}

#: The policy's layout on GPUs 0-3 for NeMo RL: dp 1 x cp 2 x tp 2 = 4 GPUs, ep 4, etp 1.
POLICY = {"dp": 1, "tp": 2, "cp": 2, "ep": 4, "etp": 1, "microbatches": 4}

#: NeMo RL GRPO: the policy and colocated generation on GPUs 0-3 (training states
#: offloaded beside it, the reference in host memory: NeMo RL's rules), the reward
#: model under DTensor on GPUs 4-7 (the GPUs the policy does not get).
NEMO_GRPO = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": rollout(LOW, 2, 2, ep=4),
        "actor.train": {"block": LOW, "pp": 1, **POLICY, "offload": True},
        "actor.infer": {"block": LOW, "pp": 1, **POLICY},
        "reference.infer": {"block": LOW, "pp": 1, **POLICY, "offload": True},
        "reward.infer": vertex(HIGH, 4, 1, microbatches=8),
    },
}

#: NeMo RL PPO: NEMO_GRPO with the value model on the policy's GPUs in the policy's
#: layout (value-on-policy-cluster, offloaded: value-model-on-host); PPO's 8 x 2 = 16
#: sequences give the reward model's 4 replicas 4 each, one micro-batch of 4.
NEMO_PPO = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        **NEMO_GRPO["vertices"],
        "reward.infer": vertex(HIGH, 4, 1, microbatches=1),
        "critic.train": {"block": LOW, "pp": 1, **POLICY, "offload": True},
        "critic.infer": {"block": LOW, "pp": 1, **POLICY, "offload": True},
    },
}

#: verl PPO: VERL_GRPO with the critic in the actor's layout (critic-on-global-pool).
VERL_PPO = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        **VERL_GRPO["vertices"],
        "critic.train": {"block": ALL, "pp": 1, **TRAIN},
        "critic.infer": {"block": ALL, "pp": 1, **TRAIN},
    },
}


def variant(document: dict, **changes: dict) -> dict:
    """``document`` with vertex fields changed (``actor_train={"ep": 2}``)."""
    out = copy.deepcopy(document)
    for key, fields in changes.items():
        out["vertices"][key.replace("_", ".", 1)].update(fields)
    return out


def load(path: Path, document: dict) -> tuple[Problem, object]:
    """The problem of instance ``path`` and ``document`` as its plan."""
    problem = Problem.load(str(path))
    return problem, plan_from_json(document, problem.directory)


def broken(problem: Problem, plan: object, framework: str) -> list[str]:
    """The rules of ``framework`` the plan breaks."""
    problem = problem.for_plan(plan)
    gpus = problem.instance.hardware.num_gpus
    return plan_problems(FRAMEWORKS[framework], problem.directory.template, plan, gpus)


def keys(problem: Problem, plan: object, framework: str) -> dict:
    """The keys ``framework``'s exporter sets for the plan (dotted key -> value)."""
    settings = framework_settings(problem, plan, framework, "plan.json")
    return {key: value for kind, key, value in settings.items if kind == "set"}


def comments(problem: Problem, plan: object, framework: str) -> list[str]:
    """The comment lines of the plan's export (not checked against the rules)."""
    settings = framework_settings(problem, plan, framework, "plan.json")
    return [text for kind, text, _ in settings.items if kind == "comment"]


def verl_overrides(problem: Problem, plan: object) -> tuple[str, dict[str, str]]:
    """(config name, overrides) of the plan's checked verl export."""
    lines = export_config(problem, plan, "verl", "plan.json").splitlines()
    overrides = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    megatron = "--config-name=ppo_megatron_trainer" in lines[1]
    return ("ppo_megatron_trainer" if megatron else "ppo_trainer"), overrides
