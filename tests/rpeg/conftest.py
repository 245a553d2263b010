"""Shared fixtures: the repository's instances and a small hand-checkable instance."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.schema.instance import Instance, parse_instance

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
#: Frozen instances whose numbers the hand computations of the tests rely on.
DATA = Path(__file__).resolve().parents[1] / "data"

#: A deliberately small DPO instance whose costs can be computed by hand:
#: one GPU, a 2-layer model (d=64, f=128, h=16, kv=2, V=256), one sequence of
#: 4 prompt + 4 generated tokens, F = 1e12 FLOP/s, HBM 1e9 B/s at 50 %.
#: The cost model v2 knobs are set to the v1 behaviour the hand computations
#: of test_cost.py use: no GEMM-efficiency ceiling (1.0), no non-GEMM ratio,
#: no decode step overhead, attention scores materialised, sequences padded
#: to S+T, no actor.infer vertex, no rollout workspace; the plan space has no
#: recompute, ZeRO-3 or offload, and a rollout engine at gpu_memory_utilization
#: 0.5 (a 40 GB pool, far more than the model needs) with max_num_seqs 1 (= B*K).
SMALL_INSTANCE: dict[str, Any] = {
    "hardware": {
        "racks": 1,
        "nodes_per_rack": 1,
        "gpus_per_node": 1,
        "flops_per_gpu": 1e12,
        "memory_per_gpu": 80e9,
        "memory_bandwidth": 1e9,
        "alpha_coll_g": 0.0,
        "beta_coll_g": 1e9,
        "alpha_coll_n": 0.0,
        "beta_coll_n": 1e9,
        "alpha_coll_r": 0.0,
        "beta_coll_r": 1e9,
        "alpha_p2p_g": 0.0,
        "beta_p2p_g": 1e9,
        "alpha_p2p_n": 0.0,
        "beta_p2p_n": 1e9,
        "alpha_p2p_r": 0.0,
        "beta_p2p_r": 1e9,
        "gemm_m_half": 5.0,
        "gemm_k_half": 0.0,
        "decode_bw_eff": 0.5,
        "non_gemm_constant": 0.0,
        "non_gemm_scaling": 0.0,
        "gemm_efficiency": 1.0,
        "non_gemm_ratio": 0.0,
        "decode_step_overhead": 0.0,
    },
    "models": {
        "actor": {
            "layers": 2,
            "hidden_dim": 64,
            "ffn_dim": 128,
            "vocab_size": 256,
            "head_dim": 16,
            "kv_heads": 2,
        }
    },
    "workload": {
        "batch_size": 1,
        "samples_per_prompt": 1,
        "context_length": 4,
        "generation_length": 4,
    },
    "policy": {"algorithm": "dpo"},
    "optimizer": {"k_eval": 1},
    "placement": {
        "min_block_gpus": 1,
        "microbatches": [1],
        "recompute": ["none"],
        "sharding": ["zero1"],
        "offload": [False],
        "gpu_memory_utilization": [0.5],
        "max_num_seqs": [1],
    },
    "engine": {
        "flash_attention": False,
        "sequence_packing": False,
        "recompute_logprobs": False,
        "rollout_workspace": 0,
    },
}


@pytest.fixture
def small_instance_data() -> dict[str, Any]:
    """A fresh, mutable copy of :data:`SMALL_INSTANCE`."""
    return copy.deepcopy(SMALL_INSTANCE)


def build_instance(data: dict[str, Any]) -> Instance:
    """Parse an instance dict (helper for the factory fixture)."""
    return parse_instance(data, name="test")


@pytest.fixture(scope="session")
def make_instance():
    """Factory: parse an instance dict into an :class:`Instance`."""
    return build_instance


@functools.cache
def _load(name: str) -> Problem:
    return Problem.load(str(INSTANCES / name))


@functools.cache
def _load_frozen(name: str) -> Problem:
    return Problem.load(str(DATA / name))


@pytest.fixture(scope="session")
def load_problem():
    """Factory: the cached :class:`Problem` of ``instances/<name>`` (files may evolve)."""
    return _load


@pytest.fixture(scope="session")
def frozen_problem():
    """Factory: the cached :class:`Problem` of ``tests/data/<name>`` (numbers fixed)."""
    return _load_frozen


def place_on_single_gpus(directory, gpu_of: dict[str, int], staleness: int = 0) -> Plan:
    """A plan putting each vertex on the single GPU ``gpu_of[name]`` (dp=pp=tp=1).

    The strategy is the fastest single-GPU option of the candidate directory;
    every trained model gets ``staleness``; no explicit order.
    """
    cluster = directory.cluster
    placements = []
    for index, vertex in enumerate(directory.template.vertices):
        block = cluster.block_index[((0, 0, gpu_of[vertex.name]), (1, 1, 1))]
        candidate = directory.options[index][(1, 1, 1)][0]
        placements.append(Placement(block, candidate.strategy))
    values = dict.fromkeys(directory.template.trained_models, staleness)
    return Plan(tuple(placements), make_staleness(values))


@pytest.fixture(scope="session")
def single_gpu_plan():
    """Factory: :func:`place_on_single_gpus`."""
    return place_on_single_gpus
