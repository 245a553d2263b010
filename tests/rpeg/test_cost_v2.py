"""Cost and memory model v2 (docs/cost-model.md) against hand computations.

Every test starts from the small DPO instance of tests/rpeg/conftest.py (v1
behaviour: gemm_efficiency 1, no non-GEMM ratio, no decode step overhead, no
flash attention, no packing, no rollout workspace) and switches on the one
mechanism it checks. Numbers of that instance used throughout:

    d=64, f=128, h=16, kv=2, L=2, V=256, heads a=4; F=1e12 FLOP/s,
    HBM 1e9 B/s at decode_bw_eff 0.5 (5e8 B/s), m_half=5, k_half=0;
    every alpha 0, every beta 1e9 B/s (1e-9 s/B); B=K=1, S=4, T=4.
    P_l  = 64*(64 + 2*2*16) + 64*64 + 3*64*128 = 36864
    head = V*d = 16384;  P = 2*36864 + 16384 + 16384 = 106496
    KV per token and layer: 2*kv*h*2 = 128 B (256 B over both layers)

and the forward pass of one padded sequence (l = S+T = 8, test_cost.py):
    per layer 2*36864*8 + 2*8^2*64 = 598016; x2 + head 2*16384*8 = 1_458_176 FLOP,
    eff 8/13 -> 1_458_176*13/8 / 1e12 = 2.369536e-6 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.model.candidates import enumerate_strategies
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.schema.instance import PlacementConfig
from rlplan.rpeg.schema.workload import Workload
from rlplan.rpeg.templates import Kind, Vertex
from tests.rpeg.conftest import _load

GENERATE = Vertex("actor", Kind.GENERATE)
REFERENCE = Vertex("reference", Kind.INFER)
TRAIN = Vertex("actor", Kind.TRAIN)

#: Forward GEMM time of one padded sequence (module docstring).
FORWARD = 2.369536e-6
P = 106_496

QUANTILES = [[0.5, 2], [1.0, 4]]


def cost_model(make_instance, data, **changes) -> CostModel:
    """The cost model of ``data`` with ``changes`` as ``section.key=value`` pairs."""
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        data.setdefault(section, {})[key] = value
    return CostModel(make_instance(data))


# -- lengths: E[T], E[(S+T)^2], survival ------------------------------------------------


def test_mean_lengths_of_piecewise_uniform_quantiles():
    """E[T] and E[T^2] of [[0.5, 2], [1.0, 4]]: uniform on (0, 2] and on (2, 4], half each."""
    workload = Workload(1, 1, 4, 4, gen_quantiles=((0.5, 2), (1.0, 4)))
    # E[T] = 0.5*(0+2)/2 + 0.5*(2+4)/2 = 0.5 + 1.5 = 2
    assert workload.mean_generated == pytest.approx(2.0, rel=1e-15)
    # uniform on (a, b]: E[T^2] = (a^2 + a*b + b^2)/3
    # 0.5*(0 + 0 + 4)/3 + 0.5*(4 + 8 + 16)/3 = 2/3 + 14/3 = 16/3
    assert workload.mean_generated_square == pytest.approx(16 / 3, rel=1e-15)


def test_mean_lengths_of_the_8b_quantiles():
    """[[0.5, 400], [0.9, 900], [1.0, 1024]]: E[T] = 456.2, E[T^2] = 296_672.5333..."""
    workload = Workload(512, 4, 1024, 1024, gen_quantiles=((0.5, 400), (0.9, 900), (1.0, 1024)))
    # E[T] = 0.5*200 + 0.4*650 + 0.1*962 = 100 + 260 + 96.2 = 456.2
    assert workload.mean_generated == pytest.approx(456.2, rel=1e-15)
    # E[T^2] = 0.5*(0 + 0 + 160000)/3 + 0.4*(160000 + 360000 + 810000)/3
    #        + 0.1*(810000 + 921600 + 1048576)/3
    #        = 26_666.666.. + 177_333.333.. + 92_672.5333.. = 296_672.5333..
    assert workload.mean_generated_square == pytest.approx(890_017.6 / 3, rel=1e-15)


def test_without_quantiles_every_sequence_runs_to_the_maximum():
    """No gen_quantiles: E[T] = T, E[T^2] = T^2, P(T > x) = 1 below T and 0 from T on."""
    workload = Workload(1, 1, 4, 4)
    assert workload.mean_generated == 4.0
    assert workload.mean_generated_square == 16.0
    assert list(workload.survival(np.array([0.5, 3.5, 3.999, 4.0, 5.0]))) == [1, 1, 1, 0, 0]


def test_survival_is_piecewise_linear_between_quantiles():
    """P(T > x) = 1 - F(x), F linear through (0, 0), (2, 0.5), (4, 1)."""
    workload = Workload(1, 1, 4, 4, gen_quantiles=((0.5, 2), (1.0, 4)))
    x = np.array([0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 6.0])
    # F: 0, 0.125, 0.25, 0.5, 0.625, 0.75, 0.875, 1, 1 (held at 1 beyond T)
    expected = [1.0, 0.875, 0.75, 0.5, 0.375, 0.25, 0.125, 0.0, 0.0]
    assert list(workload.survival(x)) == pytest.approx(expected, abs=1e-12)


def test_survival_with_a_point_mass():
    """[[0.5, 4], [1.0, 4]]: half uniform on (0, 4], half exactly 4 (a jump of F at 4)."""
    workload = Workload(1, 1, 4, 4, gen_quantiles=((0.5, 4), (1.0, 4)))
    # E[T] = 0.5*2 + 0.5*4 = 3; F(3.5) = 0.5*3.5/4 = 0.4375, so P(T > 3.5) = 0.5625
    assert workload.mean_generated == pytest.approx(3.0, rel=1e-15)
    assert float(workload.survival(3.5)) == pytest.approx(0.5625, abs=1e-9)
    assert float(workload.survival(4.0)) == pytest.approx(0.5, abs=1e-6)
    assert float(workload.survival(4.5)) == 0.0


def test_sequence_packing_uses_real_tokens(small_instance_data, make_instance):
    """Packing: tokens E[S+T] = 6 and E[(S+T)^2] = 112/3; padding: S+T = 8 and 64."""
    small_instance_data["workload"]["gen_quantiles"] = QUANTILES
    padded = cost_model(make_instance, small_instance_data)
    packed = cost_model(make_instance, small_instance_data, engine__sequence_packing=True)
    # E[S+T] = 4 + 2 = 6;  E[(S+T)^2] = S^2 + 2*S*E[T] + E[T^2] = 16 + 16 + 16/3 = 112/3
    assert packed.sequence_tokens == pytest.approx(6.0, rel=1e-15)
    assert packed.sequence_square == pytest.approx(112 / 3, rel=1e-15)
    assert (padded.sequence_tokens, padded.sequence_square) == (8.0, 64.0)
    # data edges move B*K*E[S+T]*8 = 48 bytes packed, B*K*(S+T)*8 = 64 padded
    assert packed.data_bytes == pytest.approx(48.0, rel=1e-15)
    assert padded.data_bytes == 64.0
    # infer of the one sequence: tokens M = 6,
    #   per layer 2*36864*6 + 2*(112/3)*64 = 442368 + 14336/3; x2 + head 2*16384*6 = 196608
    #   -> 3_272_704/3 FLOP, eff 6/11 -> 3_272_704/3 * 11/6 / 1e12 = 1.99998577...e-6 s
    expected = 3_272_704 / 3 * 11 / 6 / 1e12
    assert packed.run_time(REFERENCE, (1, 1, 1), Strategy(1, 1, 1, 1)) == pytest.approx(
        expected, rel=1e-12
    )
    assert padded.run_time(REFERENCE, (1, 1, 1), Strategy(1, 1, 1, 1)) == pytest.approx(
        FORWARD, rel=1e-12
    )


# -- activations and flash attention -----------------------------------------------------


def test_flash_attention_drops_the_attention_score_term(small_instance_data, make_instance):
    """Per layer 34*d*tokens/tp with flash attention; + 5*a*l^2 per sequence without."""
    plain = cost_model(make_instance, small_instance_data)
    flash = cost_model(make_instance, small_instance_data, engine__flash_attention=True)
    one = Strategy(1, 1, 1, 1)
    # one padded sequence, l = 8: 34*64*8 = 17_408; attention scores 5*a*l^2 = 5*4*64 = 1_280
    assert flash.activation_bytes("actor", one, 1) == pytest.approx(17_408, rel=1e-15)
    assert plain.activation_bytes("actor", one, 1) == pytest.approx(18_688, rel=1e-15)
    # tp 2 halves both terms
    assert flash.activation_bytes("actor", Strategy(1, 1, 2, 1), 1) == pytest.approx(8_704)
    # infer transient = one layer + fp32 logits 4*8*256 = 8_192
    assert flash.footprint(REFERENCE, one).transient == pytest.approx(25_600, rel=1e-15)
    assert plain.footprint(REFERENCE, one).transient == pytest.approx(26_880, rel=1e-15)
    # train transient = 2 layers (mb 1, pp 1: one microbatch in flight) + logits
    #   flash 2*17_408 + 8_192 = 43_008; without 2*18_688 + 8_192 = 45_568
    assert flash.footprint(TRAIN, one).transient == pytest.approx(43_008, rel=1e-15)
    assert plain.footprint(TRAIN, one).transient == pytest.approx(45_568, rel=1e-15)


def test_flash_attention_with_packing(small_instance_data, make_instance):
    """Packed and flash: one layer 34*64*6 = 13_056, logits 4*6*256 = 6_144."""
    small_instance_data["workload"]["gen_quantiles"] = QUANTILES
    cost = cost_model(
        make_instance,
        small_instance_data,
        engine__flash_attention=True,
        engine__sequence_packing=True,
    )
    # E[S+T] = 6 tokens: 13_056 + 6_144 = 19_200
    assert cost.footprint(REFERENCE, Strategy(1, 1, 1, 1)).transient == pytest.approx(
        19_200, rel=1e-15
    )


# -- GEMM-efficiency ceiling and non-GEMM kernels ------------------------------------------


@pytest.mark.parametrize(
    ("efficiency", "ratio", "expected"),
    [
        (1.0, 0.0, FORWARD),
        # eff = 0.5 * 8/13: twice the time, 4.739072e-6 s
        (0.5, 0.0, 4.739072e-6),
        # non-GEMM kernels add 0.7 of the GEMM time: 2.369536e-6 * 1.7 = 4.0282112e-6 s
        (1.0, 0.7, 4.0282112e-6),
        # both: 4.739072e-6 * 1.7 = 8.0564224e-6 s
        (0.5, 0.7, 8.0564224e-6),
    ],
)
def test_gemm_efficiency_ceiling(small_instance_data, make_instance, efficiency, ratio, expected):
    """eff = gemm_efficiency * M/(M + m_half); non-GEMM time = non_gemm_ratio * GEMM time."""
    cost = cost_model(
        make_instance,
        small_instance_data,
        hardware__gemm_efficiency=efficiency,
        hardware__non_gemm_ratio=ratio,
    )
    # M = 8 tokens: 8/13 * efficiency
    assert cost.efficiency(8, 64) == pytest.approx(efficiency * 8 / 13, rel=1e-15)
    assert cost.peak_rate == pytest.approx(efficiency * 1e12, rel=1e-15)
    time = cost.run_time(REFERENCE, (1, 1, 1), Strategy(1, 1, 1, 1))
    assert time == pytest.approx(expected, rel=1e-12)


def test_gemm_efficiency_ceiling_in_compute_bound_decode(small_instance_data, make_instance):
    """A GEMM-bound rollout at gemm_efficiency 0.5 takes twice the time of 1.0."""
    small_instance_data["hardware"]["memory_bandwidth"] = 1e15
    cost = cost_model(make_instance, small_instance_data, hardware__gemm_efficiency=0.5)
    # test_cost.py::test_compute_bound_decode_run_time: 6.03648e-6 s at efficiency 1,
    # every term a GEMM time -> 2 * 6.03648e-6 = 1.207296e-5 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    )
    assert time == pytest.approx(1.207296e-5, rel=1e-12)


# -- activation recompute --------------------------------------------------------------------


def test_full_recompute_costs_one_more_forward(small_instance_data, make_instance):
    """Train FLOPs 4x forward instead of 3x; non-GEMM and TP passes 3 instead of 2."""
    small_instance_data["hardware"]["non_gemm_constant"] = 1e-6
    cost = cost_model(make_instance, small_instance_data)
    # one sequence, dp=pp=tp=mb=1; non-GEMM 1e-6 s per layer and pass -> 2e-6 s per pass
    # none: 3*2.369536e-6 + 2*2e-6 = 7.108608e-6 + 4e-6 = 1.1108608e-5 s
    none = cost.run_time(TRAIN, (1, 1, 1), Strategy(1, 1, 1, 1))
    assert none == pytest.approx(1.1108608e-5, rel=1e-12)
    # full: 4*2.369536e-6 + 3*2e-6 = 9.478144e-6 + 6e-6 = 1.5478144e-5 s
    full = cost.run_time(TRAIN, (1, 1, 1), Strategy(1, 1, 1, 1, recompute="full"))
    assert full == pytest.approx(1.5478144e-5, rel=1e-12)


def test_full_recompute_keeps_layer_inputs_and_one_layer(small_instance_data, make_instance):
    """Kept activations: 2*d/tp bytes per token and layer, plus one layer's full activations."""
    cost = cost_model(make_instance, small_instance_data)
    # l = 8 tokens, b = 1: kept 2*64*8 = 1_024 per layer, 2 layers -> 2_048;
    # + one layer recomputed 18_688 + logits 8_192 = 28_928 (none: 2*18_688 + 8_192 = 45_568)
    full = cost.footprint(TRAIN, Strategy(1, 1, 1, 1, recompute="full"))
    assert full.transient == pytest.approx(28_928, rel=1e-15)
    # the states do not change: 16P = 1_703_936
    assert full.resident == pytest.approx(16 * P, rel=1e-15)
    assert cost.footprint(TRAIN, Strategy(1, 1, 1, 1)).transient == pytest.approx(45_568)


def test_full_recompute_with_a_pipeline(small_instance_data, make_instance):
    """pp 2, mb 2: min(pp, mb) = 2 microbatches keep their stage's layer inputs."""
    small_instance_data["hardware"]["gpus_per_node"] = 2
    small_instance_data["workload"]["batch_size"] = 4
    cost = cost_model(make_instance, small_instance_data)
    # 4 sequences, dp 1, mb 2 -> b = 2 sequences of 8 tokens; stage = 1 layer
    # kept 2*64*2*8 = 2_048 per layer and microbatch, x 2 in flight x 1 layer = 4_096
    # one layer's activations: 2*8*64*(34 + 5*4*8/64) = 1024*36.5 = 37_376
    # logits 4*2*8*256 = 16_384 -> 4_096 + 37_376 + 16_384 = 57_856
    full = cost.footprint(TRAIN, Strategy(1, 2, 1, 2, recompute="full"))
    assert full.transient == pytest.approx(57_856, rel=1e-15)


# -- ZeRO-3 ----------------------------------------------------------------------------------


def zero3_instance(small_instance_data, make_instance, batch, **changes):
    small_instance_data["hardware"]["gpus_per_node"] = 2
    small_instance_data["hardware"]["alpha_coll_g"] = 1e-6
    small_instance_data["workload"]["batch_size"] = batch
    return cost_model(make_instance, small_instance_data, **changes)


def test_zero3_shards_every_state_over_dp(small_instance_data, make_instance):
    """Resident 16P/(tp*pp*dp); transient + two gathered layers of 2*P_l/tp bytes."""
    cost = zero3_instance(small_instance_data, make_instance, 2)
    zero3 = cost.footprint(TRAIN, Strategy(2, 1, 1, 1, sharding="zero3"))
    # 16*106_496/2 = 851_968
    assert zero3.resident == pytest.approx(851_968, rel=1e-15)
    # activations 2*18_688 + logits 8_192 = 45_568, + 2 layers 2*2*36_864 = 147_456
    #   -> 193_024
    assert zero3.transient == pytest.approx(193_024, rel=1e-15)
    # zero1 for contrast: 2P + 2P + 12P/2 = 10P = 1_064_960, transient 45_568
    zero1 = cost.footprint(TRAIN, Strategy(2, 1, 1, 1))
    assert (zero1.resident, zero1.transient) == (pytest.approx(1_064_960), pytest.approx(45_568))
    # the weight layout of ZeRO-3 over dp 2 differs from every unsharded one
    assert Strategy(2, 1, 1, 1, sharding="zero3").layout == (1, 1, 2, 1, 1)
    assert Strategy(2, 1, 1, 1).layout == (1, 1, 1, 1, 1)


def test_zero3_time_is_communication_bound_per_microbatch(small_instance_data, make_instance):
    """Each microbatch: max(compute, 2 all-gathers + 1 reduce-scatter of the stage's weights)."""
    cost = zero3_instance(small_instance_data, make_instance, 2)
    # stage weights 2P/(tp*pp) = 212_992 B; all-gather over 2 ranks at level g:
    #   (2-1)*1e-6 + (1/2)*212_992*1e-9 = 1e-6 + 1.06496e-4 = 1.07496e-4 s; x3 = 3.22488e-4 s
    # compute of the one-sequence microbatch: 3*2.369536e-6 = 7.108608e-6 s < 3.22488e-4
    # -> (mb + pp - 1) * max = 3.22488e-4 s, and no gradient all-reduce afterwards
    time = cost.run_time(TRAIN, (1, 1, 2), Strategy(2, 1, 1, 1, sharding="zero3"))
    assert time == pytest.approx(3.22488e-4, rel=1e-12)
    # zero1 on the same block: 7.108608e-6 + all-reduce 2*1e-6 + 212_992e-9 = 2.22100608e-4 s
    zero1 = cost.run_time(TRAIN, (1, 1, 2), Strategy(2, 1, 1, 1))
    assert zero1 == pytest.approx(2.22100608e-4, rel=1e-12)


def test_zero3_gathers_again_for_every_microbatch(small_instance_data, make_instance):
    """4 sequences, dp 2, mb 2: two microbatches, each paying the gathers: 2 * 3.22488e-4."""
    cost = zero3_instance(small_instance_data, make_instance, 4)
    # replica 2 sequences, b = 1: compute per microbatch 7.108608e-6 s as before
    time = cost.run_time(TRAIN, (1, 1, 2), Strategy(2, 1, 1, 2, sharding="zero3"))
    assert time == pytest.approx(6.44976e-4, rel=1e-12)


def test_zero3_communication_hides_behind_compute(small_instance_data, make_instance):
    """With a near-free network the ZeRO-3 microbatch costs its compute only."""
    cost = zero3_instance(
        small_instance_data,
        make_instance,
        2,
        hardware__alpha_coll_g=0.0,
        hardware__beta_coll_g=1e15,
    )
    # comm 3 * (1/2)*212_992/1e15 = 3.19488e-10 s < compute 7.108608e-6 s
    time = cost.run_time(TRAIN, (1, 1, 2), Strategy(2, 1, 1, 1, sharding="zero3"))
    assert time == pytest.approx(7.108608e-6, rel=1e-12)


# -- offload -----------------------------------------------------------------------------------


def test_offloaded_infer_loads_its_weights(small_instance_data, make_instance):
    """Offload: resident 0, transient = weights + working set, time + load at host bandwidth."""
    cost = cost_model(make_instance, small_instance_data, hardware__host_bandwidth=1e9)
    offload = Strategy(1, 1, 1, 1, offload=True)
    # weights 2P = 212_992 B at 1e9 B/s = 2.12992e-4 s; + forward 2.369536e-6
    #   = 2.15361536e-4 s
    assert cost.run_time(REFERENCE, (1, 1, 1), offload) == pytest.approx(2.15361536e-4)
    # transient 212_992 + (18_688 + 8_192) = 239_872
    footprint = cost.footprint(REFERENCE, offload)
    assert (footprint.resident, footprint.transient) == (0.0, pytest.approx(239_872))


def test_offloaded_train_loads_and_stores_its_states(small_instance_data, make_instance):
    """A train vertex moves its states in and out: 2 * 16P / host_bandwidth."""
    cost = cost_model(make_instance, small_instance_data, hardware__host_bandwidth=1e9)
    offload = Strategy(1, 1, 1, 1, offload=True)
    # 16P = 1_703_936 B; 2 * 1_703_936 / 1e9 = 3.407872e-3; + 7.108608e-6 = 3.414980608e-3 s
    assert cost.run_time(TRAIN, (1, 1, 1), offload) == pytest.approx(3.414980608e-3, rel=1e-12)
    # transient = states 1_703_936 + working 45_568 = 1_749_504
    footprint = cost.footprint(TRAIN, offload)
    assert (footprint.resident, footprint.transient) == (0.0, pytest.approx(1_749_504))


def test_offload_with_zero3_moves_the_shard_only(small_instance_data, make_instance):
    """ZeRO-3 over dp 2 and offload: the host moves 16P/2 per GPU, twice."""
    cost = zero3_instance(small_instance_data, make_instance, 2, hardware__host_bandwidth=1e9)
    strategy = Strategy(2, 1, 1, 1, sharding="zero3", offload=True)
    # 3.22488e-4 (test above) + 2 * 851_968 / 1e9 = 3.22488e-4 + 1.703936e-3 = 2.026424e-3 s
    assert cost.run_time(TRAIN, (1, 1, 2), strategy) == pytest.approx(2.026424e-3, rel=1e-12)
    # transient 851_968 + 193_024 = 1_044_992
    assert cost.footprint(TRAIN, strategy).transient == pytest.approx(1_044_992, rel=1e-15)


SMALL_V2 = "tiny_dpo_2gpu_v2.yaml"


@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
def test_offload_twin_of_every_strategy(data):
    """For any train/infer strategy, its offloaded twin has resident 0, transient = r + t,
    and the run time plus one (infer) or two (train) host transfers of the states."""
    directory = _load(SMALL_V2).directory
    cost = directory.cost
    index = data.draw(st.sampled_from([1, 2, 3]), label="vertex")  # actor.infer, reference, train
    vertex = directory.template.vertices[index]
    shape = data.draw(st.sampled_from(directory.cluster.shapes), label="shape")
    strategies = [s for s in enumerate_strategies(directory.instance, vertex, shape) if s.offload]
    if not strategies:
        return
    offloaded = data.draw(st.sampled_from(strategies), label="strategy")
    kept = Strategy(
        offloaded.dp,
        offloaded.pp,
        offloaded.tp,
        offloaded.microbatches,
        offloaded.recompute,
        offloaded.sharding,
        False,
    )
    on, off = cost.footprint(vertex, offloaded), cost.footprint(vertex, kept)
    assert on.resident == 0.0
    assert on.transient == pytest.approx(off.resident + off.transient, rel=1e-12)
    transfers = 2 if vertex.kind is Kind.TRAIN else 1
    moved = transfers * off.resident / directory.instance.hardware.host_bandwidth
    assert cost.run_time(vertex, shape, offloaded) == pytest.approx(
        cost.run_time(vertex, shape, kept) + moved, rel=1e-12
    )


# -- rollout engine: its share of a GPU, KV pool, decode rounds ---------------------------------


@pytest.mark.parametrize(
    ("utilization", "pool"),
    [
        # 0.5 * 1e6 = 500_000 B: minus the weights 2P = 212_992 and the workspace 1_000
        #   -> 286_008 B of KV pool
        (0.5, 286_008),
        # 0.25 * 1e6 = 250_000 - 212_992 - 1_000 = 36_008 B
        (0.25, 36_008),
    ],
)
def test_rollout_engine_takes_its_share_and_the_pool_is_what_is_left(
    small_instance_data, make_instance, utilization, pool
):
    """Footprint: nothing resident, u*M transient; pool = u*M - 2P/(tp*pp) - workspace."""
    small_instance_data["workload"]["gen_quantiles"] = QUANTILES
    cost = cost_model(
        make_instance,
        small_instance_data,
        engine__rollout_workspace=1000,
        hardware__memory_per_gpu=1e6,
        # the default reserve's fixed 1 GiB would leave a 1 MB GPU no usable memory
        hardware__memory_reserve_bytes=0,
    )
    strategy = Strategy(1, 1, 1, 1, gpu_memory_utilization=utilization, max_num_seqs=1)
    footprint = cost.footprint(GENERATE, strategy)
    assert footprint.resident == 0.0
    assert footprint.transient == pytest.approx(utilization * 1e6, rel=1e-15)
    assert cost.rollout_pool_bytes("actor", strategy) == pytest.approx(pool, rel=1e-12)
    # KV per token over both layers 2*2*2*16*2 = 256 B: 286_008 / 256 = 1_117.2 and
    # 36_008 / 256 = 140.66 tokens
    assert cost.rollout_pool_tokens("actor", strategy) == pytest.approx(pool / 256, rel=1e-12)


def test_rollout_saturated_phase_then_tail(small_instance_data, make_instance):
    """n = 4 sequences, c = 2 (max_num_seqs 2; the 40 GB pool holds far more): prefill in 2
    chunks, (n-c)*E[T]/c saturated steps, then the tail."""
    small_instance_data["workload"]["batch_size"] = 4
    cost = cost_model(make_instance, small_instance_data)
    # Prefill: chunks of c = 2 sequences, M = 8 tokens:
    #   per layer 2*36864*8 + 2*16*64*2 = 589824 + 4096 = 593920; x2 + head 2*16384*8
    #   = 1_449_984 FLOP, eff 8/13 -> 2.356224e-6 s; 2 chunks -> 4.712448e-6 s
    # Saturated: (4-2)*4/2 = 4 steps with 2 sequences at context S + E[T]/2 = 6:
    #   bytes 180224 + 256*6*2 = 183_296 -> 3.66592e-4 s (GEMM ~1.3e-6 s) -> 1.466368e-3 s
    # Tail: the last 2 sequences, 2 active at contexts 5..8 (no gen_quantiles):
    #   bytes 180224 + 512*l: 182784 + 183296 + 183808 + 184320 = 734_208 -> 1.468416e-3 s
    # total 4.712448e-6 + 1.466368e-3 + 1.468416e-3 = 2.939496448e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=2)
    )
    assert time == pytest.approx(2.939496448e-3, rel=1e-12)
    # c = 4 >= n: no saturated phase; prefill one chunk of 4 (M = 16): 3.806208e-6 s
    # (test_cost.py::test_decode_with_gen_quantiles); 4 active at contexts 5..8:
    #   180224 + 1024*l: 185344 + 186368 + 187392 + 188416 = 747_520 -> 1.49504e-3 s
    # total 1.498846208e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=4)
    )
    assert time == pytest.approx(1.498846208e-3, rel=1e-12)


def test_decode_step_overhead_is_paid_per_round(small_instance_data, make_instance):
    """decode_step_overhead = 1e-4 s: 4 saturated + 4 tail rounds add 8e-4 s."""
    small_instance_data["workload"]["batch_size"] = 4
    cost = cost_model(make_instance, small_instance_data, hardware__decode_step_overhead=1e-4)
    # 2.939496448e-3 (previous test) + (4 + 4) * 1e-4 = 3.739496448e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=2)
    )
    assert time == pytest.approx(3.739496448e-3, rel=1e-12)


def test_eager_rollout_pays_the_launch_cost_of_every_layer(small_instance_data, make_instance):
    """cuda_graphs false: each of the 8 decode rounds adds eager_layer_overhead x 2 layers."""
    small_instance_data["workload"]["batch_size"] = 4
    cost = cost_model(
        make_instance,
        small_instance_data,
        hardware__decode_step_overhead=1e-4,
        hardware__eager_layer_overhead=5e-5,
        engine__cuda_graphs=False,
    )
    # 3.739496448e-3 s with CUDA graphs (previous tests) + 8 rounds * 2 layers * 5e-5 s
    #   = 3.739496448e-3 + 8e-4 = 4.539496448e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=2)
    )
    assert time == pytest.approx(4.539496448e-3, rel=1e-12)


def test_pipelined_decode_round_splits_into_virtual_batches(small_instance_data, make_instance):
    """pp 2: a round is 2 stage steps of ceil(active/2) sequences, each with its p2p."""
    small_instance_data["hardware"]["gpus_per_node"] = 2
    small_instance_data["workload"]["batch_size"] = 3
    cost = cost_model(make_instance, small_instance_data)
    # n = 3 = c. Stage: ceil(2/2) = 1 layer + the head.
    # Prefill, one chunk of 3 sequences (M = 12 tokens):
    #   layer 2*36864*12 + 2*16*64*3 = 890_880; head 2*16384*12 = 393_216 -> 1_284_096 FLOP
    #   eff 12/17 -> 1_284_096*17/12 / 1e12 = 1.819136e-6 s; p2p 12*64*2 = 1536 B -> 1.536e-6 s
    #   (mb + pp - 1) = 2 stage passes: 2 * 3.355136e-6 = 6.710272e-6 s
    # Decode, 3 active at contexts l = 5..8, virtual batch ceil(3/2) = 2 sequences:
    #   stage bytes 2*(36864 + 16384) + 128*l*2 = 106_496 + 256*l:
    #   107_776 + 108_032 + 108_288 + 108_544 = 432_640 B -> 8.6528e-4 s (GEMM ~7.6e-7 s)
    #   p2p of 2*64*2 = 256 B: 2.56e-7 s per stage step
    #   rounds: 2 * (8.6528e-4 + 4*2.56e-7) = 2 * 8.66304e-4 = 1.732608e-3 s
    # total 6.710272e-6 + 1.732608e-3 = 1.739318272e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 2), Strategy(1, 2, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=3)
    )
    assert time == pytest.approx(1.739318272e-3, rel=1e-12)


def test_active_sequences_follow_the_survival_midpoints(small_instance_data, make_instance):
    """Tail rounds: ceil(n * P(T > x - 1/2)) sequences active at step x."""
    small_instance_data["workload"]["batch_size"] = 10
    small_instance_data["workload"]["gen_quantiles"] = [[0.9, 1], [1.0, 4]]
    cost = cost_model(make_instance, small_instance_data)
    # 90 % of the lengths uniform on (0, 1], 10 % on (1, 4]; n = c = 10:
    #   x=1: P(T > 0.5) = 1 - 0.45 = 0.55 -> ceil(5.5) = 6
    #   x=2: P(T > 1.5) = 0.1*(2.5/3) -> ceil(0.833) = 1; x=3, 4: 0.05, 0.0167 -> 1, 1
    # Prefill, 10 sequences, M = 40 tokens: per layer 2*36864*40 + 2*16*64*10 = 2_969_600,
    #   x2 + head 2*16384*40 = 1_310_720 -> 7_249_920 FLOP, eff 40/45
    #   -> 7_249_920*45/40 / 1e12 = 8.15616e-6 s
    # Decode (memory-bound, GEMM ~2e-6 s): bytes 180224 + 256*l*a
    #   l=5,a=6: 187_904; l=6,a=1: 181_760; l=7,a=1: 182_016; l=8,a=1: 182_272
    #   sum 733_952 B / 5e8 = 1.467904e-3 s
    # total 8.15616e-6 + 1.467904e-3 = 1.47606016e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=10)
    )
    assert time == pytest.approx(1.47606016e-3, rel=1e-12)


# -- plan space --------------------------------------------------------------------------------


def test_micro_batch_sizes_give_microbatch_counts():
    """A micro-batch size m gives ceil(replica / m) microbatches; counts are taken as given."""
    sizes = PlacementConfig(micro_batch_sizes=(1, 2, 4, 8))
    # replica 32: 32/1, 32/2, 32/4, 32/8 -> (4, 8, 16, 32)
    assert sizes.microbatch_counts(32) == (4, 8, 16, 32)
    # replica 5: ceil(5/1)=5, ceil(5/2)=3, ceil(5/4)=2, ceil(5/8)=1
    assert sizes.microbatch_counts(5) == (1, 2, 3, 5)
    counts = PlacementConfig(microbatches=(1, 2, 4, 8), micro_batch_sizes=None)
    # counts above the replica are dropped
    assert counts.microbatch_counts(5) == (1, 2, 4)


def test_train_strategies_cross_the_v2_dimensions(small_instance_data, make_instance):
    """On one GPU a train vertex gets every (recompute, sharding, offload) of the lists."""
    small_instance_data["placement"].update(
        recompute=["none", "full"], sharding=["zero1", "zero3"], offload=[False, True]
    )
    small_instance_data["placement"].pop("microbatches")
    small_instance_data["placement"]["micro_batch_sizes"] = [1]
    instance = make_instance(small_instance_data)
    strategies = enumerate_strategies(instance, TRAIN, (1, 1, 1))
    # one (dp, pp, tp) = (1, 1, 1), mb ceil(1/1) = 1, 2*2*2 = 8 variants
    assert len(strategies) == 8
    assert {(s.recompute, s.sharding, s.offload) for s in strategies} == {
        (r, z, o) for r in ("none", "full") for z in ("zero1", "zero3") for o in (False, True)
    }
    assert {s.microbatches for s in strategies} == {1}
    # infer vertices: offload only; generate: gpu_memory_utilization and max_num_seqs only
    assert {s.offload for s in enumerate_strategies(instance, REFERENCE, (1, 1, 1))} == {
        False,
        True,
    }
    rollouts = enumerate_strategies(instance, GENERATE, (1, 1, 1))
    assert [(s.gpu_memory_utilization, s.max_num_seqs) for s in rollouts] == [(0.5, 1)]


def test_rollout_lower_bound_flops_stay_below_every_candidate():
    """The compute bound's generate FLOPs fit in every rollout candidate's time on the v2 tiny."""
    directory = _load(SMALL_V2).directory
    vertex = directory.template.vertices[0]
    flops = directory.cost.vertex_flops(vertex)
    peak = directory.cost.peak_rate
    for shape in directory.cluster.shapes:
        gpus = math.prod(shape)
        for strategy in enumerate_strategies(directory.instance, vertex, shape):
            assert directory.candidate(0, shape, strategy).time * gpus * peak >= flops
