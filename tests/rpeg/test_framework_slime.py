"""slime's plan space (rlplan/rpeg/model/frameworks/slime.py): one broken plan per rule.

Plans are written by hand on two tiny instances, widened so that every rule can
be broken: instances/tiny_grpo_4gpu.yaml (GRPO with a reward model, on 4 GPUs)
and instances/tiny_ppo_2gpu.yaml (PPO, 2 GPUs), both with old log-probs
recomputed (an ``actor.infer`` vertex), offload and ZeRO-3 among the candidates
and staleness up to 2 (GRPO) or 1 (PPO, actor and critic). Each plan that
breaks a rule starts from a plan slime can run and changes one thing; it must
break that rule and no other.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.frameworks.slime import FRAMEWORK, RELEASE
from rlplan.rpeg.model.plan import plan_from_json, read_plan
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.templates import FUSED

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


def _block(start: int, size: int) -> dict[str, list[int]]:
    return {"origin": [0, 0, start], "extent": [1, 1, size]}


def _rollout(start: int, size: int) -> dict[str, Any]:
    return {"block": _block(start, size), "dp": size, "pp": 1, "tp": 1}


def _megatron(start: int, size: int, offload: bool = False, tp: int = 1) -> dict[str, Any]:
    entry = {"block": _block(start, size), "dp": size // tp, "pp": 1, "tp": tp}
    return {**entry, "microbatches": 1, "offload": offload}


def _problem(stem: str, staleness: dict[str, list[int]]) -> Problem:
    """The instance ``stem`` with actor.infer, offload, ZeRO-3 and ``staleness`` allowed."""
    data = read_yaml_file(INSTANCES / f"{stem}.yaml")
    data["engine"]["recompute_logprobs"] = True
    data["placement"]["offload"] = [False, True]
    data["placement"]["sharding"] = ["zero1", "zero3"]
    data["optimizer"]["staleness_candidates"] = staleness
    return Problem.from_instance(parse_instance(data, stem))


@pytest.fixture(scope="module")
def grpo() -> Problem:
    return _problem("tiny_grpo_4gpu", {"actor": [0, 1, 2]})


@pytest.fixture(scope="module")
def ppo() -> Problem:
    return _problem("tiny_ppo_2gpu", {"actor": [0, 1], "critic": [0, 1]})


@pytest.fixture(scope="module")
def grpo_nodes() -> Problem:
    """tiny_grpo_4gpu on four one-GPU nodes: runs of nodes such as nodes 1-3 are blocks."""
    data = read_yaml_file(INSTANCES / "tiny_grpo_4gpu.yaml")
    data["hardware"].update(nodes_per_rack=4, gpus_per_node=1)
    data["engine"]["recompute_logprobs"] = True
    data["placement"]["offload"] = [False, True]
    return Problem.from_instance(parse_instance(data, "tiny_grpo_4gpu_nodes"))


def _nodes(first: int, count: int, **fields: Any) -> dict[str, Any]:
    block = {"origin": [0, first, 0], "extent": [1, count, 1]}
    return {"block": block, "dp": count, "pp": 1, "tp": 1, **fields}


def grpo_partly_shared() -> dict[str, Any]:
    """On four nodes: the rollout on nodes 0-2, Megatron on nodes 1-3, the reward on 3."""
    megatron = {"microbatches": 1, "offload": False}
    return {
        "staleness": {"actor": 0},
        "vertices": {
            "actor.generate": _nodes(0, 3, gpu_memory_utilization=0.2, max_num_seqs=32),
            "actor.infer": _nodes(1, 3, **megatron),
            "reference.infer": _nodes(1, 3, microbatches=1, offload=True),
            "reward.infer": _nodes(3, 1, microbatches=1),
            "actor.train": _nodes(1, 3, **megatron, sharding="zero1"),
        },
    }


def grpo_colocated() -> dict[str, Any]:
    """On-policy: the rollout on GPUs 0-1, the reward model on 2-3, Megatron on all four."""
    generate = {**_rollout(0, 2), "gpu_memory_utilization": 0.2, "max_num_seqs": 32}
    return {
        "staleness": {"actor": 0},
        "vertices": {
            "actor.generate": generate,
            "actor.infer": _megatron(0, 4),
            "reference.infer": _megatron(0, 4, offload=True),
            "reward.infer": {**_rollout(2, 2), "microbatches": 1},
            "actor.train": {**_megatron(0, 4), "sharding": "zero1"},
        },
    }


def grpo_async() -> dict[str, Any]:
    """One-step off-policy: the rollout on GPU 0, the reward model on 1, Megatron on 2-3."""
    plan = grpo_colocated()
    plan["staleness"] = {"actor": 1}
    vertices = plan["vertices"]
    vertices["actor.generate"].update(_rollout(0, 1))
    vertices["reward.infer"].update(_rollout(1, 1))
    vertices["actor.infer"] = _megatron(2, 2)
    vertices["reference.infer"] = _megatron(2, 2, offload=True)
    vertices["actor.train"].update(_megatron(2, 2))
    return plan


def ppo_plan() -> dict[str, Any]:
    """PPO on-policy: rollout on GPU 0, reward on GPU 1, actor and critic on both, offloaded."""
    generate = {**_rollout(0, 1), "gpu_memory_utilization": 0.2, "max_num_seqs": 16}
    return {
        "staleness": {"actor": 0, "critic": 0},
        "vertices": {
            "actor.generate": generate,
            "actor.infer": _megatron(0, 2),
            "reference.infer": _megatron(0, 2, offload=True),
            "reward.infer": {**_rollout(1, 1), "microbatches": 1},
            "critic.infer": _megatron(0, 2, offload=True),
            "actor.train": _megatron(0, 2, offload=True),
            "critic.train": _megatron(0, 2, offload=True),
        },
    }


def _problems(problem: Problem, document: dict[str, Any]) -> list[str]:
    plan = plan_from_json(document, problem.directory)
    gpus = problem.directory.cluster.num_gpus
    return plan_problems(FRAMEWORK, problem.directory.template, plan, gpus)


def _changed(base: dict[str, Any], staleness=None, **vertices: dict[str, Any]) -> dict[str, Any]:
    """``base`` with some vertices' fields (``actor_train`` for actor.train) replaced."""
    document = copy.deepcopy(base)
    if staleness is not None:
        document["staleness"].update(staleness)
    for key, fields in vertices.items():
        document["vertices"][key.replace("_", ".")].update(fields)
    return document


#: rule name -> (instance, plan that breaks it and no other rule).
BROKEN = {
    "logprobs-on-actor": (
        "grpo",
        lambda: _changed(grpo_colocated(), actor_infer={"dp": 2, "tp": 2}),
    ),
    "reference-on-actor": (
        "grpo",
        lambda: _changed(grpo_colocated(), reference_infer=_megatron(2, 2, True)),
    ),
    "reference-on-host": (
        "grpo",
        lambda: _changed(grpo_colocated(), reference_infer={"offload": False}),
    ),
    "critic-on-actor": (
        "ppo",
        lambda: _changed(
            ppo_plan(), critic_train={"dp": 1, "tp": 2}, critic_infer={"dp": 1, "tp": 2}
        ),
    ),
    "values-on-critic": ("ppo", lambda: _changed(ppo_plan(), critic_infer={"dp": 1, "tp": 2})),
    "ppo-offloads-critic": ("ppo", lambda: _changed(ppo_plan(), critic_train={"offload": False})),
    "ppo-offloads-actor": ("ppo", lambda: _changed(ppo_plan(), actor_train={"offload": False})),
    "critic-on-policy": ("ppo", lambda: _changed(ppo_plan(), staleness={"critic": 1})),
    "staleness-0-or-1": ("grpo", lambda: _changed(grpo_async(), staleness={"actor": 2})),
    "rollout-nested-or-apart": ("grpo_nodes", grpo_partly_shared),
    "async-rollout-apart": ("grpo", lambda: _changed(grpo_async(), actor_generate=_rollout(2, 1))),
    "async-reward-apart": ("grpo", lambda: _changed(grpo_async(), reward_infer=_rollout(3, 1))),
    "reward-apart-from-rollout": (
        "grpo",
        lambda: _changed(grpo_colocated(), reward_infer=_rollout(1, 1)),
    ),
    "distributed-optimizer": (
        "grpo",
        lambda: _changed(grpo_colocated(), actor_train={"sharding": "zero3"}),
    ),
}


def test_registered_with_its_release_and_sources():
    """``engine.framework: slime`` names this plan space; every rule cites the release."""
    assert FRAMEWORKS["slime"] is FRAMEWORK
    assert FRAMEWORK.release == RELEASE == "v0.3.1"
    names = [rule.name for rule in FRAMEWORK.rules]
    assert len(names) == len(set(names))
    for rule in FRAMEWORK.rules:
        assert rule.words and rule.need
        assert f"THUDM/slime {RELEASE} " in rule.source


def test_every_plan_rule_has_a_broken_plan():
    """Each rule other than the two Unsupported ones is broken by a plan below."""
    unsupported = {"no-online-dpo", "no-fused-actor-critic"}
    assert set(BROKEN) | unsupported == {rule.name for rule in FRAMEWORK.rules}


@pytest.mark.parametrize(
    ("problem", "document"),
    [("grpo", grpo_colocated), ("grpo", grpo_async), ("ppo", ppo_plan)],
    ids=["grpo-colocated", "grpo-async", "ppo"],
)
def test_plans_slime_can_run_break_no_rule(problem, document, request):
    assert _problems(request.getfixturevalue(problem), document()) == []


def test_a_plan_file_slime_can_run_breaks_no_rule(grpo, tmp_path):
    """The same through a plan file (read_plan), as ``solve`` and ``export-config`` read it."""
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(grpo_async()))
    plan = read_plan(path, grpo.directory)
    assert plan_problems(FRAMEWORK, grpo.directory.template, plan, 4) == []


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_rule_is_reported_alone(name, request):
    problem_name, document = BROKEN[name]
    problems = _problems(request.getfixturevalue(problem_name), document())
    assert len(problems) == 1, problems
    assert f"slime rule {name}: " in problems[0]


def test_broken_lines_name_the_vertices_and_values(grpo, ppo):
    """What the lines say: the vertex pair, or the vertex and the value it took."""
    (line,) = _problems(grpo, BROKEN["distributed-optimizer"][1]())
    assert line.startswith("actor.train: slime rule distributed-optimizer: train sharding zero1")
    assert line.endswith("; got sharding zero3")
    (line,) = _problems(grpo, BROKEN["reference-on-actor"][1]())
    assert line.startswith("reference.infer vs actor.train: ")
    (line,) = _problems(ppo, BROKEN["critic-on-policy"][1]())
    assert line.startswith("critic.infer and critic.train: ")
    (line,) = _problems(grpo, BROKEN["staleness-0-or-1"][1]())
    assert line.startswith("staleness.actor 2: ")


def test_online_dpo_and_the_fused_actor_critic_are_unsupported():
    """DPO and the AC-share template have no plan; GRPO and separate PPO do."""
    dpo = Problem.load(str(INSTANCES / "tiny_dpo_4gpu.yaml")).instance
    assert FRAMEWORK.unsupported(dpo).name == "no-online-dpo"
    ac = Problem.load(str(INSTANCES / "tiny_ppo_2gpu_ac.yaml")).instance
    assert ac.templates == ("separate", FUSED)
    assert FRAMEWORK.unsupported(ac) is None
    assert FRAMEWORK.unsupported(ac.restricted(FUSED)).name == "no-fused-actor-critic"
    for stem in ("tiny_grpo_4gpu", "tiny_ppo_2gpu", "tiny_rule_grpo_2gpu"):
        assert FRAMEWORK.unsupported(Problem.load(str(INSTANCES / f"{stem}.yaml")).instance) is None
