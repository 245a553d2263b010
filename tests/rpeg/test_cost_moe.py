"""Mixture-of-experts and context-parallel times (docs/cost-model.md#mixtures-of-experts).

Hand computations on the tiny MoE instance of tests/rpeg/moe_instance.py
(its docstring has the parameter counts). Strategy A = dp2 pp1 tp2 mb1 ep2:
b = ceil(4/2) = 2 sequences of l = 8 per microbatch, M = 16 tokens per GPU.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest

from rlplan.compare.sweep import tornado_values
from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.model.blocks import GroupLevels
from rlplan.rpeg.model.collectives import hierarchical_alltoall_time
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.experts import context_kv_bytes
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.hardware import DEFAULT_MOE_IMBALANCE
from rlplan.rpeg.schema.models import ModelSpec
from tests.rpeg.conftest import build_instance
from tests.rpeg.moe_instance import (
    ALPHA_COLL,
    ALPHA_P2P,
    GENERATE,
    INFER,
    LEVELS,
    NODE,
    SMALL_INSTANCE,
    TRAIN,
    moe_cost,
    moe_data,
)

A = Strategy(2, 1, 2, 1, ep=2)


def test_moe_parameters_of_the_tiny_model():
    cost = moe_cost()
    assert cost.parameters["actor"] == 107_008
    assert cost.routed["actor"] == 49_152


def test_moe_imbalance_default_and_bad_value():
    data = moe_data()
    del data["hardware"]["moe_imbalance"]
    assert build_instance(data).hardware.moe_imbalance == DEFAULT_MOE_IMBALANCE == 1.18
    data["hardware"]["moe_imbalance"] = 0.5
    with pytest.raises(InstanceError) as caught:
        build_instance(data)
    assert caught.value.path == "hardware.moe_imbalance"
    assert "\n" not in str(caught.value)
    # The sensitivity tornado halves a field but not below its floor of 1.
    assert tornado_values("moe_imbalance", 1.18) == (1.0, pytest.approx(1.77))


def test_vertex_flops_use_active_parameters():
    # per token 2*(2 layers * 24832 + head 16384) = 132096; per sequence and layer the
    # causal attention 2*l^2*q = 2*64*64 = 8192:
    # 4 sequences * (8*132096 + 2*8192) = 4 * 1_073_152 = 4_292_608; train 3x.
    cost = moe_cost()
    assert cost.vertex_flops(INFER) == 4_292_608
    assert cost.vertex_flops(TRAIN) == 3 * 4_292_608


def test_expert_rows_gemm_and_imbalance():
    # A: M_e = k*M*ep*etp/(tp*E) = 2*16*2*1/(2*4) = 8; with k_half 32 the inner
    # dimension f_e/etp = 32: eff = 8/(8+5) * 32/(32+32) = 4/13.
    # FLOPs 2*k*c*d*f_e*M/tp = 2*2*6144*16/2 = 196_608; x 1.5 (ep > 1):
    # 1.5 * 196608 * 13/4 / 1e12 = 9.58464e-7 s.
    cost = moe_cost(hardware__gemm_k_half=32.0)
    spec = cost.instance.models["actor"]
    assert cost.expert_rows(spec, A, 16.0) == 8.0
    assert cost.imbalance(A) == 1.5
    assert cost.expert_gemm(spec, A, 16.0) == pytest.approx(9.58464e-7, rel=1e-12)
    # dp1 tp4 ep2 etp2, M = 32: M_e = 2*32*2*2/(4*4) = 16, inner 32/2 = 16:
    # eff = 16/21 * 16/48 = 16/63; FLOPs 2*2*6144*32/4 = 196_608, x 1.5:
    # 1.5 * 196608 * 63/16 / 1e12 = 1.161216e-6 s.
    split = Strategy(1, 1, 4, 1, ep=2, etp=2)
    assert cost.expert_rows(spec, split, 32.0) == 16.0
    assert cost.expert_gemm(spec, split, 32.0) == pytest.approx(1.161216e-6, rel=1e-12)
    # ep = 1: every GPU holds every expert, no imbalance. dp2 tp2: M_e = 2*16/(2*4) = 4,
    # eff = 4/9 * 1/2; 196608 * 9/2 / 1e12 = 8.84736e-7 s.
    alone = Strategy(2, 1, 2, 1)
    assert cost.imbalance(alone) == 1.0
    assert cost.expert_gemm(spec, alone, 16.0) == pytest.approx(8.84736e-7, rel=1e-12)


def test_all_to_all_of_one_moe_layer():
    # A: k*(M/tp)*d*2 = 2*8*64*2 = 2048 bytes, x 1.5 = 3072; ep = 2:
    # (ep-1)*alpha + 3072*(1/2)*1e-9 = 1e-6 + 1.536e-6, dispatch and combine: 5.072e-6.
    cost = moe_cost()
    spec = cost.instance.models["actor"]
    assert cost.all_to_all(spec, A, 16.0, LEVELS) == pytest.approx(
        2 * (ALPHA_COLL + 1.536e-6), rel=1e-12
    )
    assert cost.all_to_all(spec, Strategy(2, 1, 2, 1), 16.0, LEVELS) == 0.0


def test_context_ring_of_one_layer():
    # GQA, tp 2: K and V of a token 2*kv*h*2/min(tp, kv) = 2*2*16*2/2 = 64 bytes;
    # cp 2, 16 tokens per GPU: (cp-1) * (alpha_p2p + 16*64*1e-9) = 2e-6 + 1.024e-6.
    cost = moe_cost()
    spec = cost.instance.models["actor"]
    strategy = Strategy(1, 1, 2, 1, cp=2)
    assert context_kv_bytes(spec, 2) == 64.0
    assert cost.context_ring(spec, strategy, 16.0, LEVELS) == pytest.approx(
        ALPHA_P2P + 1.024e-6, rel=1e-12
    )
    assert cost.context_ring(spec, A, 16.0, LEVELS) == 0.0
    # MLA, 4 heads of (rope 4 + nope 8) and values 8: 4*(4+8+8)*2/tp = 160/2 = 80 bytes.
    mla = ModelSpec(
        2, 64, 128, 256, head_dim=16, attention="mla", kv_lora_rank=8, qk_rope_head_dim=4,
        qk_nope_head_dim=8, v_head_dim=8,
    )  # fmt: skip
    assert context_kv_bytes(mla, 2) == 80.0


#: A's stage, one forward (hand computed):
#:   dense GEMM per MoE layer (2*(12288+256)*16 + 2*64*64*2)/2 = 208_896, x2 layers,
#:   + head 2*16384*16/2 = 262_144: 679_936 FLOP at eff 16/21: 8.92416e-7 s;
#:   experts 2 layers * 1.5 * 196_608 * 13/8 / 1e12 = 9.58464e-7 s;
#:   tp: 2 layers * 2 all-reduces of 16*64*2 = 2048 B over 2: 4*(2*alpha + 2048e-9) = 16.192e-6;
#:   all-to-all: 2 layers * 5.072e-6 = 10.144e-6.
A_GEMM = 8.92416e-7 + 9.58464e-7
A_COMM = 16.192e-6 + 10.144e-6


def test_infer_time_of_an_moe_model():
    cost = moe_cost()
    # (mb + pp - 1) * stage = 1 * (GEMM + comm) = 1.85088e-6 + 26.336e-6
    assert cost.run_time(INFER, NODE, A) == pytest.approx(A_GEMM + A_COMM, rel=1e-12)


def test_train_time_of_an_moe_model_zero1():
    cost = moe_cost()
    # stage = 3 * GEMM + 2 * comm = 5.55264e-6 + 52.672e-6 = 58.22464e-6;
    # gradients: dense shard 2*57856/2 = 57856 B over dp*cp = 2: 2*alpha + 57.856e-6,
    # experts 2*49152/2 = 49152 B over edp = 2*1*2/2 = 2: 2*alpha + 49.152e-6.
    stage = 3 * A_GEMM + 2 * A_COMM
    sync = 4 * ALPHA_COLL + 57.856e-6 + 49.152e-6
    assert cost.run_time(TRAIN, NODE, A) == pytest.approx(stage + sync, rel=1e-12)


def test_train_time_of_an_moe_model_zero3():
    cost = moe_cost(placement__sharding=["zero1", "zero3"])
    strategy = Strategy(2, 1, 2, 1, sharding="zero3", ep=2)
    # per microbatch 3 * (all-gather of 57856 B over 2 + of 49152 B over 2)
    # = 3 * (alpha + 28.928e-6 + alpha + 24.576e-6) = 166.512e-6 > stage 58.22464e-6.
    comm = 3 * (2 * ALPHA_COLL + 28.928e-6 + 24.576e-6)
    assert comm > 3 * A_GEMM + 2 * A_COMM
    assert cost.run_time(TRAIN, NODE, strategy) == pytest.approx(comm, rel=1e-12)


def test_context_parallel_times():
    cost = moe_cost(placement__context_parallel=[1, 2])
    cp = Strategy(1, 1, 2, 1, cp=2)
    # dp1 tp2 cp2: b = 4 sequences, M = 4*8/2 = 16 tokens per GPU, attention 2*64*64*4/2.
    #   dense GEMM (2*12544*16 + 16384)/2 * 2 + 262144 = 679_936 FLOP: 8.92416e-7 s;
    #   experts (ep 1, no imbalance): M_e = 2*16/(2*4) = 4, 2 * 196608*9/4/1e12 = 8.84736e-7;
    #   tp 16.192e-6; ring 2 layers * (2e-6 + 1.024e-6) = 6.048e-6.
    gemm = 8.92416e-7 + 8.84736e-7
    comm = 16.192e-6 + 2 * (ALPHA_P2P + 1.024e-6)
    assert cost.run_time(INFER, NODE, cp) == pytest.approx(gemm + comm, rel=1e-12)
    # train: dense shard 57856 B over dp*cp = 2: 2*alpha + 57.856e-6; experts 98304 B
    # over edp = 1*2*2/1 = 4: 6*alpha + 2*(3/4)*98304e-9 = 6e-6 + 147.456e-6.
    sync = 8 * ALPHA_COLL + 57.856e-6 + 147.456e-6
    assert cost.run_time(TRAIN, NODE, cp) == pytest.approx(3 * gemm + 2 * comm + sync, rel=1e-12)


def _stage_test_cost(alpha: float, beta: float):
    """One dense layer and one MoE layer, pp 2 (a stage holds either)."""
    return moe_cost(
        actor__layers=2,
        actor__dense_layers=1,
        hardware__alpha_coll_g=alpha,
        hardware__beta_coll_g=beta,
    )


#: dp2 pp2 tp1 ep2: b = 2 sequences, M = 16. The dense layer's stage:
#:   (2*36864*16 + 2*64*64*2) + head 2*16384*16 = 1_720_320 FLOP at 16/21: 2.25792e-6 s,
#:   p2p of 16*64*2 = 2048 B: 2e-6 + 2.048e-6;  infer = (1 + 2 - 1) * stage.
PIPELINE = Strategy(2, 2, 1, 1, ep=2)
DENSE_STAGE = 2.25792e-6 + ALPHA_P2P + 2.048e-6


def test_slowest_stage_is_the_dense_one_when_its_ffn_costs_more():
    # The MoE layer's stage: (2*12544*16 + 16384) + 524288 = 942_080 FLOP: 1.23648e-6 s;
    # experts 1.5 * 2*2*6144*16 * 21/16 / 1e12 (M_e = 2*16*2/4 = 16) = 7.74144e-7 s;
    # all-to-all at alpha 0, 1e12 B/s: 2 * 6144/2 * 1e-12 = 6.144e-9; + p2p 4.048e-6.
    # 6.064768e-6 < the dense stage's 6.30592e-6.
    cost = _stage_test_cost(0.0, 1e12)
    assert cost.run_time(INFER, NODE, PIPELINE) == pytest.approx(2 * DENSE_STAGE, rel=1e-12)


def test_slowest_stage_is_the_moe_one_when_its_all_to_all_costs_more():
    # alpha 1e-6, 1e9 B/s: all-to-all 2 * (1e-6 + 6144/2 * 1e-9) = 8.144e-6, so the MoE
    # stage 1.23648e-6 + 7.74144e-7 + 8.144e-6 + 4.048e-6 = 14.202624e-6 is the slowest.
    cost = _stage_test_cost(ALPHA_COLL, 1e9)
    assert cost.run_time(INFER, NODE, PIPELINE) == pytest.approx(2 * 14.202624e-6, rel=1e-12)


@pytest.mark.parametrize(("alpha", "beta", "faster"), [(0.0, 1e12, True), (1e-3, 1e9, False)])
def test_expert_parallelism_trades_gemm_efficiency_for_all_to_all(alpha, beta, faster):
    """dp4 tp1 (M = 8 tokens per GPU): ep 1 has M_e = 2*8/4 = 4 rows (eff 4/9), ep 4 has
    16 (eff 16/21): expert GEMM time 1.5*21/16 = 1.96875 against 9/4 = 2.25 per FLOP (12.5 %
    less). On a free network ep 4 is faster; at alpha 1 ms its all-to-all (2 layers * 2 passes
    * 2 * 3 alpha = 24 ms) outweighs the expert all-reduce it saves (6 ms)."""
    cost = moe_cost(hardware__alpha_coll_g=alpha, hardware__beta_coll_g=beta)
    one, four = Strategy(4, 1, 1, 1), Strategy(4, 1, 1, 1, ep=4)
    one_parts = cost.time_parts(TRAIN, NODE, one)
    four_parts = cost.time_parts(TRAIN, NODE, four)
    assert four_parts["experts"] == pytest.approx(one_parts["experts"] * 0.875, rel=1e-12)
    assert (cost.run_time(TRAIN, NODE, four) < cost.run_time(TRAIN, NODE, one)) is faster


def test_every_train_and_infer_candidate_is_above_its_compute_bound():
    """run_time * gpus * F >= vertex_flops for every strategy of an MoE plan space.

    A model with a dense first layer (the slowest stage is either kind), 16
    sequences, every ep, etp, cp, recompute and sharding choice. Rollouts are
    left to the rollout model's own tests.
    """
    from rlplan.rpeg.model.candidates import enumerate_strategies

    cost = moe_cost(
        actor__layers=3,
        actor__dense_layers=1,
        workload__batch_size=16,
        placement__microbatches=[1, 2],
        placement__recompute=["none", "full"],
        placement__sharding=["zero1", "zero3"],
        placement__expert_parallel=[1, 2, 4],
        placement__expert_tensor_parallel=[1, 2],
        placement__context_parallel=[1, 2],
    )
    rate = cost.hardware.flops_per_gpu
    checked = 0
    for vertex in (TRAIN, INFER):
        bound = cost.vertex_flops(vertex) / rate
        for shape in cost.cluster.shapes:
            for strategy in enumerate_strategies(cost.instance, vertex, shape):
                assert cost.run_time(vertex, shape, strategy) * strategy.gpus >= bound, strategy
                checked += 1
    assert checked > 100


def test_hierarchical_all_to_all_prices_each_level_on_its_link():
    # 16 ranks, 1,600 bytes each, 100 to each peer; peers 7 in the node, 8 in the
    # rack's other node: latency of the farthest level (n) 1e-5 plus the slower
    # link's share, max(7 * 1e-9, 8 * 1e-8) * 100 = 8e-6 -> 1.8e-5 s. The old
    # single-level price, 1e-5 + 15/16 * 1600 * 1e-8, was 1.6e-5 + 1e-5 = 2.6e-5.
    alphas, betas = (1e-6, 1e-5, 2e-5), (1e-9, 1e-8, 1e-7)
    assert hierarchical_alltoall_time(1600.0, 16, (7, 8, 0), alphas, betas) == pytest.approx(
        1.8e-5, rel=1e-12
    )
    # Every peer in the node: 1e-6 + 3/4 * 400 * 1e-9 = 1.3e-6 s; one rank: nothing.
    assert hierarchical_alltoall_time(400.0, 4, (3, 0, 0), alphas, betas) == pytest.approx(
        1.3e-6, rel=1e-12
    )
    assert hierarchical_alltoall_time(400.0, 1, (0, 0, 0), alphas, betas) == 0.0
    # One peer beyond the rack sets the latency and, at 1e-7 s/B, the time:
    # 2e-5 + 1600/16 * max(7e-9, 7e-8, 1e-7) = 2e-5 + 1e-5.
    assert hierarchical_alltoall_time(1600.0, 16, (7, 7, 1), alphas, betas) == pytest.approx(
        3e-5, rel=1e-12
    )


def test_all_to_all_of_an_expert_group_over_two_nodes():
    # Strategy A (k*(M/tp)*d*2 * 1.5 = 3072 bytes per GPU) with its ep 2 group split
    # over two nodes (peers (0, 1, 0)) joined at alpha 1e-5 s and 1e9 B/s:
    # 2 * (1e-5 + 3072/2 * 1e-9) = 2 * 1.1536e-5 = 2.3072e-5 s, dispatch and combine.
    cost = moe_cost(hardware__alpha_coll_n=1e-5, hardware__beta_coll_n=1e9)
    spec = cost.instance.models["actor"]
    levels = GroupLevels("g", "g", "n", "g", "n", (0, 1, 0))
    assert cost.all_to_all(spec, A, 16.0, levels) == pytest.approx(2.3072e-5, rel=1e-12)


def test_the_moe_layers_fixed_time():
    # hardware.moe_expert_overhead x per expert a GPU holds, MoE layer and pass.
    # A (ep 2 of E = 4): 2 experts per GPU, 2 MoE layers: 2 * 2 * x = 4x per pass.
    # Train: 1 slot (mb 1, pp 1) of 2 passes: + 8x; infer: 1 slot of 1 pass: + 4x;
    # ep 1 holds all 4 experts: + 8x per pass. The rollout (vLLM) pays none of it.
    x = 1e-3
    plain, timed = moe_cost(), moe_cost(hardware__moe_expert_overhead=x)
    spec = timed.instance.models["actor"]
    assert timed.dispatch_time(spec, A) == pytest.approx(2 * x, rel=1e-12)
    train = timed.run_time(TRAIN, NODE, A) - plain.run_time(TRAIN, NODE, A)
    assert train == pytest.approx(8 * x, rel=1e-9)
    infer = timed.run_time(INFER, NODE, A) - plain.run_time(INFER, NODE, A)
    assert infer == pytest.approx(4 * x, rel=1e-9)
    whole = Strategy(2, 1, 2, 1)
    infer = timed.run_time(INFER, NODE, whole) - plain.run_time(INFER, NODE, whole)
    assert infer == pytest.approx(8 * x, rel=1e-9)
    rollout = Strategy(2, 1, 2, 0, max_num_seqs=256)
    assert timed.run_time(GENERATE, NODE, rollout) == plain.run_time(GENERATE, NODE, rollout)
    # The report's parts put it with the all-to-all, and still sum to the run time.
    parts = timed.time_parts(TRAIN, NODE, A)
    assert sum(parts.values()) == pytest.approx(timed.run_time(TRAIN, NODE, A), rel=1e-12)
    assert parts["all_to_all"] - plain.time_parts(TRAIN, NODE, A)["all_to_all"] == (
        pytest.approx(8 * x, rel=1e-9)
    )


def test_the_fixed_time_is_in_an_moe_instances_fingerprint_only():
    """A plan file of an MoE instance records moe_expert_overhead; a dense one does not,
    so dense plan files written before the knob keep their fingerprint."""

    def changed(instance):
        hardware = dataclasses.replace(instance.hardware, moe_expert_overhead=1e-3)
        return dataclasses.replace(instance, hardware=hardware)

    moe = moe_cost().instance
    assert instance_fingerprint(changed(moe)) != instance_fingerprint(moe)
    dense = build_instance(copy.deepcopy(SMALL_INSTANCE))
    assert not any(spec.is_moe for spec in dense.models.values())
    assert instance_fingerprint(changed(dense)) == instance_fingerprint(dense)
