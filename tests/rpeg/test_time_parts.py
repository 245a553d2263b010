"""Where the time of a run goes: CostModel.time_parts (docs/cost-model.md#where-the-time-goes).

Hand computations on the tiny MoE instance of tests/rpeg/moe_instance.py under
A = dp2 pp1 tp2 mb1 ep2 (see tests/rpeg/test_cost_moe.py for its stage):
dense GEMM 8.92416e-7 s, experts 9.58464e-7 s, tp 16.192e-6 s, all-to-all
10.144e-6 s per forward. The dense GEMM's FLOPs per token and GPU-split:
attention 2 layers * (2*12288 + 2*(64/8)*64) = 51200, router 2 * 2*256 = 1024,
head 2*16384 = 32768, of 84992.
"""

from __future__ import annotations

import pytest

from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.time_parts import PART_KEYS
from tests.rpeg.conftest import _load
from tests.rpeg.moe_instance import ALPHA_COLL, GENERATE, INFER, NODE, TRAIN, moe_cost

A = Strategy(2, 1, 2, 1, ep=2)
DENSE_GEMM, EXPERTS, TP, ALL_TO_ALL = 8.92416e-7, 9.58464e-7, 16.192e-6, 10.144e-6


def test_train_parts_by_hand():
    parts = moe_cost().time_parts(TRAIN, NODE, A)
    assert tuple(parts) == PART_KEYS
    # GEMMs 3 forward-equivalents, everything per pass twice.
    expected = {
        "attention": 3 * DENSE_GEMM * 51200 / 84992,  # 1.6128e-6
        "dense_ffn": 3 * DENSE_GEMM * 1024 / 84992,
        "experts": 3 * EXPERTS,
        "all_to_all": 2 * ALL_TO_ALL,
        "head": 3 * DENSE_GEMM * 32768 / 84992,
        "non_gemm": 0.0,
        "tp_comm": 2 * TP,
        "pp_comm": 0.0,
        # dense part 57856 B and experts 49152 B, each all-reduced over 2 ranks.
        "dp_comm": 4 * ALPHA_COLL + 57.856e-6 + 49.152e-6,
        "cp_comm": 0.0,
        "colocation": 0.0,
    }
    for key, value in expected.items():
        assert parts[key] == pytest.approx(value, rel=1e-12, abs=1e-18), key
    assert parts["attention"] == pytest.approx(1.6128e-6, rel=1e-12)


def test_zero3_parts_put_the_gathers_beyond_the_stage_in_dp_comm():
    cost = moe_cost(placement__sharding=["zero1", "zero3"])
    strategy = Strategy(2, 1, 2, 1, sharding="zero3", ep=2)
    parts = cost.time_parts(TRAIN, NODE, strategy)
    # comm 166.512e-6 (test_cost_moe.py) minus the stage 3*1.85088e-6 + 2*26.336e-6.
    stage = 3 * (DENSE_GEMM + EXPERTS) + 2 * (TP + ALL_TO_ALL)
    assert parts["dp_comm"] == pytest.approx(166.512e-6 - stage, rel=1e-12)
    assert sum(parts.values()) == pytest.approx(cost.run_time(TRAIN, NODE, strategy), rel=1e-9)


def test_infer_parts_and_the_kernel_ratio():
    cost = moe_cost(hardware__non_gemm_ratio=0.5)
    parts = cost.time_parts(INFER, NODE, A)
    assert tuple(parts) == PART_KEYS
    # one forward: the ratio's share of every GEMM is non-GEMM time.
    assert parts["non_gemm"] == pytest.approx(0.5 * (DENSE_GEMM + EXPERTS), rel=1e-12)
    assert parts["experts"] == pytest.approx(EXPERTS, rel=1e-12)
    assert parts["all_to_all"] == pytest.approx(ALL_TO_ALL, rel=1e-12)
    assert sum(parts.values()) == pytest.approx(cost.run_time(INFER, NODE, A), rel=1e-9)


@pytest.mark.parametrize(
    "strategy",
    [
        A,
        Strategy(2, 1, 2, 2, recompute="full", ep=2, etp=2),
        Strategy(1, 1, 2, 1, sharding="zero3", cp=2),
        Strategy(2, 2, 1, 2, offload=True, ep=2),
        Strategy(4, 1, 1, 1, ep=4),
    ],
    ids=lambda strategy: strategy.label(),
)
def test_parts_sum_to_the_run_time(strategy):
    cost = moe_cost(
        actor__layers=3,
        actor__dense_layers=1,
        hardware__non_gemm_ratio=0.84,
        hardware__non_gemm_constant=1e-6,
        workload__optimizer_steps=2,
    )
    for vertex in (TRAIN, INFER):
        parts = cost.time_parts(vertex, NODE, strategy)
        assert all(value >= 0 for value in parts.values())
        assert sum(parts.values()) == pytest.approx(cost.run_time(vertex, NODE, strategy), rel=1e-9)


def test_parts_of_every_candidate_of_a_dense_instance_sum_to_its_time():
    directory = _load("ppo_8b_1x2x8_h100.yaml").directory
    cost = directory.cost
    checked = 0
    for index, per_shape in enumerate(directory.options):
        vertex = directory.template.vertices[index]
        for shape, candidates in per_shape.items():
            for candidate in candidates:
                parts = cost.time_parts(vertex, shape, candidate.strategy)
                assert sum(parts.values()) == pytest.approx(candidate.time, rel=1e-9)
                checked += 1
    assert checked > 100


def test_rollout_parts_sum_to_its_run_time():
    cost = moe_cost()
    engine = Strategy(4, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    parts = cost.time_parts(GENERATE, NODE, engine)
    assert sum(parts.values()) == pytest.approx(cost.run_time(GENERATE, NODE, engine), rel=1e-9)
