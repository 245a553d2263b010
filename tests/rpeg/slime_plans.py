"""Plans slime can run, written by hand, for the slime exporter's tests.

The instances are instances/tiny_grpo_4gpu.yaml (GRPO with a reward model,
4 GPUs of one node) and instances/tiny_ppo_2gpu.yaml (PPO, 2 GPUs), widened
as tests/rpeg/test_framework_slime.py widens them (old log-probs recomputed,
offload and ZeRO-3 among the candidates) plus full recompute, 1 or 3
microbatches and, per plan, engine keys. The base plans are that module's
(grpo_colocated, grpo_async, ppo_plan).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan, plan_from_json, read_plan
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from tests.rpeg.test_framework_slime import (
    _block,
    _megatron,
    _rollout,
    grpo_async,
    grpo_colocated,
    ppo_plan,
)

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "instances" / "published"
PUBLISHED_PLANS = sorted(PUBLISHED.glob("**/*.plan.json"))
NEMO = PUBLISHED / "nemo_rl_grpo_llama31_8b_2x8_h100"
NEMO_ASYNC = PUBLISHED / "nemo_rl_grpo_llama31_8b_async_2x8_h100"


def problem(stem: str, staleness: dict[str, list[int]], **engine: Any) -> Problem:
    """``instances/<stem>.yaml`` widened, with ``engine`` keys replaced."""
    data = read_yaml_file(ROOT / "instances" / f"{stem}.yaml")
    data["engine"]["recompute_logprobs"] = True
    data["engine"].update(engine)
    placement = data["placement"]
    placement.update(offload=[False, True], sharding=["zero1", "zero3"])
    placement.update(recompute=["none", "full"], microbatches=[1, 3])
    data["optimizer"]["staleness_candidates"] = staleness
    return Problem.from_instance(parse_instance(data, stem))


def grpo(**engine: Any) -> Problem:
    """tiny_grpo_4gpu widened (staleness 0, 1 or 2)."""
    return problem("tiny_grpo_4gpu", {"actor": [0, 1, 2]}, **engine)


def static_tp2() -> dict[str, Any]:
    """No packing, no CUDA graphs: rollout tp 2 on GPUs 0-1, reward on 2-3, Megatron tp 2
    with full recompute on all four, 3 microbatches of ceil(32 / 2 / 3) = 6 sequences."""
    plan = grpo_colocated()
    vertices = plan["vertices"]
    vertices["actor.generate"].update(dp=1, tp=2)
    for name in ("actor.infer", "reference.infer", "actor.train"):
        vertices[name].update(dp=2, tp=2, microbatches=3)
    vertices["actor.train"]["recompute"] = "full"
    return plan


def no_reference() -> dict[str, Any]:
    """No reference model and no actor.infer: rollout, reward model and Megatron only."""
    plan = grpo_colocated()
    for name in ("actor.infer", "reference.infer"):
        del plan["vertices"][name]
    return plan


def async_offloaded() -> dict[str, Any]:
    """grpo_async with actor.train's states offloaded (GPUs of its own: --offload-train)."""
    plan = grpo_async()
    plan["vertices"]["actor.train"]["offload"] = True
    return plan


def rollout_pp2() -> dict[str, Any]:
    """grpo_colocated with one rollout engine of pp 2 on GPUs 0-1."""
    plan = grpo_colocated()
    plan["vertices"]["actor.generate"].update(dp=1, pp=2, tp=1)
    return plan


def reference_apart() -> dict[str, Any]:
    """Outside slime's space: the reference on GPUs 2-3 of its own (rule reference-on-actor)."""
    plan = grpo_colocated()
    plan["vertices"]["reference.infer"] = _megatron(2, 2, offload=True)
    return plan


def moe(**engine: Any) -> Problem:
    """tiny_grpo_4gpu with a mixture-of-experts actor (8 experts, top 2, FFN 1024 each).

    ep 1, 2 or 4, etp 1 or 2 and cp 1 or 2 among the candidates; generations
    of 101 tokens at the median and 256 at most, so a sequence holds 242.5
    tokens on average (128 of prompt).
    """
    data = read_yaml_file(ROOT / "instances" / "tiny_grpo_4gpu.yaml")
    data["engine"].update(recompute_logprobs=True, **engine)
    data["models"]["actor"].update(experts=8, experts_per_token=2, expert_ffn_dim=1024)
    placement = data["placement"]
    placement.update(offload=[False, True], microbatches=[1, 3], expert_parallel=[1, 2, 4])
    placement.update(expert_tensor_parallel=[1, 2], context_parallel=[1, 2])
    data["workload"]["gen_quantiles"] = [[0.5, 101], [1.0, 256]]
    return Problem.from_instance(parse_instance(data, "tiny_moe_grpo_4gpu"))


def moe_dp_attention() -> dict[str, Any]:
    """One rollout engine of ep 2 over tp 1 on GPUs 0-1 (2 attention replicas); Megatron dp 2,
    cp 2, ep 2, etp 1 on all four GPUs, 3 microbatches of ceil(16 / 3) = 6 sequences."""
    plan = grpo_colocated()
    vertices = plan["vertices"]
    vertices["actor.generate"].update(dp=2, tp=1, ep=2)
    for name in ("actor.infer", "reference.infer", "actor.train"):
        vertices[name].update(dp=2, tp=1, cp=2, ep=2, microbatches=3)
    return plan


def moe_expert_tensor() -> dict[str, Any]:
    """A rollout engine of ep 2 = tp 2 (no dp attention); Megatron tp 2, cp 2, ep 2, etp 2."""
    plan = grpo_colocated()
    vertices = plan["vertices"]
    vertices["actor.generate"].update(dp=1, tp=2, ep=2)
    for name in ("actor.infer", "reference.infer", "actor.train"):
        vertices[name].update(dp=1, tp=2, cp=2, ep=2, etp=2)
    return plan


def moe_logprobs_ep1() -> dict[str, Any]:
    """actor.infer at ep 1 while actor.train is at ep 2: outside slime's layout rule."""
    plan = moe_dp_attention()
    plan["vertices"]["actor.infer"]["ep"] = 1
    return plan


def built(build: Any, document: Any) -> tuple[Problem, Plan]:
    """(problem, plan) of a problem builder and a plan document builder."""
    made = build()
    return made, plan_from_json(copy.deepcopy(document()), made.directory)


def _ppo() -> Problem:
    return problem("tiny_ppo_2gpu", {"actor": [0, 1], "critic": [0, 1]})


def _static() -> Problem:
    return grpo(sequence_packing=False, cuda_graphs=False)


def _no_reference() -> Problem:
    return grpo(recompute_logprobs=False, reference_model=False)


#: Plans inside slime's plan space: name -> (problem, plan).
HAND = {
    "grpo-colocated": lambda: built(grpo, grpo_colocated),
    "grpo-async": lambda: built(grpo, grpo_async),
    "ppo": lambda: built(_ppo, ppo_plan),
    "static-tp2": lambda: built(_static, static_tp2),
    "no-reference": lambda: built(_no_reference, no_reference),
    "async-offloaded": lambda: built(grpo, async_offloaded),
    "rollout-pp2": lambda: built(grpo, rollout_pp2),
    "reward-on-actor": lambda: built(grpo, reward_on_actor),
    "moe-dp-attention": lambda: built(moe, moe_dp_attention),
    "moe-expert-tensor": lambda: built(moe, moe_expert_tensor),
}
#: A plan outside slime's space: its layout rule compares ep too.
LOGPROBS_EP1 = {"moe-logprobs-ep1": lambda: built(moe, moe_logprobs_ep1)}


def published(path: Path) -> tuple[Problem, Plan]:
    """A published plan and its instance."""
    made = Problem.load(str(path).removesuffix(".plan.json") + ".yaml")
    return made, read_plan(path, made.directory)


#: Every case: the published plans (all inside slime's space) and the hand plans.
CASES = {path.name: (lambda path=path: published(path)) for path in PUBLISHED_PLANS} | HAND

__all__ = ["CASES", "HAND", "NEMO", "NEMO_ASYNC", "_block", "_rollout", "reference_apart"]


def reward_on_actor() -> dict[str, Any]:
    """On-policy, rollout on GPU 0, the reward model on GPU 2 of Megatron's GPUs 2-3."""
    plan = grpo_async()
    plan["staleness"] = {"actor": 0}
    plan["vertices"]["reward.infer"].update(_rollout(2, 1))
    return plan


def logprobs_tp2() -> dict[str, Any]:
    """Outside slime's space: actor.infer on actor.train's GPUs in a layout of its own."""
    plan = grpo_colocated()
    plan["vertices"]["actor.infer"].update(dp=2, tp=2)
    return plan
