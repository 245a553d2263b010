"""Tiny mixture-of-experts instances for plan-space and exact-backend tests.

The model's fields are written out (no published model is this small): a
Qwen3-MoE-shaped actor (8 layers, d 1024, 16 heads of 64, 4 key/value heads,
4 routed experts of width 1408, top-2, no shared expert), on the 2-GPU GRPO
instance with a rule reward (instances/tiny_rule_grpo_2gpu.yaml, whose actor it
replaces).
"""

from __future__ import annotations

import copy
import functools
import pathlib
from typing import Any

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.instance import Instance, parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file

INSTANCES = pathlib.Path(__file__).resolve().parents[2] / "instances"

#: The tiny MoE actor: dims of no published model (small enough for the oracle).
TINY_MOE = {
    "layers": 8,
    "hidden_dim": 1024,
    "ffn_dim": 2816,
    "vocab_size": 32000,
    "head_dim": 64,
    "kv_heads": 4,
    "experts": 4,
    "experts_per_token": 2,
    "expert_ffn_dim": 1408,
}

#: The narrow variant: d 960 in 15 heads of 64 (5 key/value heads) admits tp 1 only, so
#: on 2 GPUs only ep splits the experts (expert width 2816, dense width 2560 unused).
NARROW = {"hidden_dim": 960, "kv_heads": 5, "ffn_dim": 2560, "expert_ffn_dim": 2816}

#: The plan-space lists of the tiny MoE instance: ep, etp and cp free, the
#: other dimensions at one value (the oracle enumerates every combination).
TINY_PLACEMENT = {
    "min_block_gpus": 1,
    "microbatches": [4],
    "recompute": ["none"],
    "sharding": ["zero1"],
    "offload": [False],
    "gpu_memory_utilization": [0.5],
    "max_num_seqs": [16],
    "expert_parallel": [1, 2, 4],
    "expert_tensor_parallel": [1, 2],
    "context_parallel": [1, 2],
}


def tiny_moe_document(
    pin: Any = None,
    hardware: dict[str, Any] | None = None,
    narrow: bool = False,
    **placement: Any,
) -> dict[str, Any]:
    """The tiny MoE instance as a YAML document, ``hardware`` and ``placement`` keys
    replaced; ``narrow``: the :data:`NARROW` actor."""
    data = copy.deepcopy(read_yaml_file(INSTANCES / "tiny_rule_grpo_2gpu.yaml"))
    data["models"]["actor"] = {**TINY_MOE, **(NARROW if narrow else {})}
    # The hand-derived optima leave the MoE layers' fixed time out (0); the oracle,
    # CP-SAT and the MILP agree with it set as well (it is part of every candidate time).
    data["hardware"].update({"moe_expert_overhead": 0.0, **(hardware or {})})
    data["placement"] = {**TINY_PLACEMENT, **placement}
    if pin is not None:
        data["placement"]["pin"] = pin
    return data


def tiny_moe_instance(
    pin: Any = None,
    hardware: dict[str, Any] | None = None,
    narrow: bool = False,
    **placement: Any,
) -> Instance:
    """The parsed tiny MoE instance."""
    document = tiny_moe_document(pin, hardware, narrow, **placement)
    return parse_instance(document, "tiny_moe_2gpu")


@functools.cache
def tiny_moe_problem(expert_parallel: tuple[int, ...] = (1, 2, 4), narrow: bool = False) -> Problem:
    """The tiny MoE problem (cached per ``placement.expert_parallel`` and variant)."""
    instance = tiny_moe_instance(narrow=narrow, expert_parallel=list(expert_parallel))
    return Problem.from_instance(instance)
