"""Plans the verl export tests use, and how they export them (tests/rpeg/test_export_verl.py).

* the published runs (instances/published/**/X.yaml with X.plan.json);
* by hand: a one-step off-policy run with the rollout on the actor's GPUs
  (the published NeMo RL async plan with generation moved to GPUs 0-7); tiny
  PPO with a critic and a reward model on a GPU of its own; tiny GRPO with the
  rollout and the reward model on GPUs of their own; GRPO 7B on 16 GPUs in
  ZeRO-3 (FSDP) with the reward model asleep beside the actor.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from benchmarks.release_keys.verl import published_pairs
from rlplan.outputs.frameworks import export_config
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
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


def one(block: dict, **fields: object) -> dict:
    return {"block": block, "dp": 1, "pp": 1, "tp": 1, **fields}


#: tiny_ppo_2gpu: everything on GPU 0, the reward model on GPU 1 (no actor.infer:
#: the instance sets engine.recompute_logprobs false).
PPO_HAND = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        "actor.generate": one(LOW, gpu_memory_utilization=0.3, max_num_seqs=16),
        **{
            name: one(LOW, microbatches=1)
            for name in ("reference.infer", "critic.infer", "actor.train", "critic.train")
        },
        "reward.infer": one(SECOND, microbatches=1),
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
        "reward.infer": one(THIRD, microbatches=1),
        "reference.infer": one(FOURTH, microbatches=1),
        "actor.train": one(FOURTH, microbatches=1),
    },
}


def hand(instance: str, document: dict) -> tuple[Problem, object]:
    problem = Problem.load(str(ROOT / "instances" / f"{instance}.yaml"))
    return problem, plan_from_json(document, problem.directory)


def published(stem: Path) -> tuple[Problem, object]:
    problem = Problem.load(f"{stem}.yaml")
    return problem, read_plan(Path(f"{stem}.plan.json"), problem.directory)


def colocated_async() -> tuple[Problem, object]:
    """The published async plan with actor.generate moved onto actor.train's GPUs 0-7."""
    document = json.loads(Path(f"{ASYNC}.plan.json").read_text(encoding="utf-8"))
    document = copy.deepcopy(document)
    vertices = document["vertices"]
    vertices["actor.generate"]["block"] = vertices["actor.train"]["block"]
    problem = Problem.load(f"{ASYNC}.yaml")
    return problem, plan_from_json(document, problem.directory)


def broken(problem: Problem, plan: object) -> list[str]:
    """The verl rules a plan breaks, with an Unsupported rule first."""
    problem = problem.for_plan(plan)
    framework = FRAMEWORKS["verl"]
    unsupported = framework.unsupported(problem.instance)
    found = [unsupported.name] if unsupported else []
    gpus = problem.instance.hardware.num_gpus
    return found + plan_problems(framework, problem.directory.template, plan, gpus)


def export(problem: Problem, plan: object) -> tuple[str, dict[str, str], list[str]]:
    """(config name, overrides, comment lines) of a plan's verl export."""
    lines = export_config(problem, plan, "verl", "plan.json").splitlines()
    comments = [line for line in lines if line.startswith("#")]
    overrides = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    config = "ppo_megatron_trainer" if "--config-name=ppo_megatron_trainer" in lines[1] else ""
    return config or "ppo_trainer", overrides, comments


def hand_plans() -> list[tuple[Problem, object]]:
    return [
        colocated_async(),
        hand("tiny_ppo_2gpu", PPO_HAND),
        hand("tiny_grpo_4gpu", GRPO_SEPARATE),
        hand("grpo_7b_1x2x8_h100", GRPO_FSDP),
    ]


def all_plans() -> list[tuple[Problem, object]]:
    """The published plans, then the hand-made ones."""
    stems = [Path(str(plan)[: -len(".plan.json")]) for _, plan in published_pairs()]
    return [published(stem) for stem in stems] + hand_plans()


def variant(document: dict, **changes: dict) -> dict:
    """``document`` with some vertices' fields changed (``staleness`` replaces the map)."""
    changed = copy.deepcopy(document)
    for name, fields in changes.items():
        if name == "staleness":
            changed["staleness"] = fields
        else:
            changed["vertices"][name.replace("_", ".", 1)].update(fields)
    return changed
