"""Cost and memory model (docs/cost-model.md) against hand computations.

The instances here set the v2 knobs to the v1 behaviour (tests/rpeg/conftest.py,
tests/data/frozen_*.yaml), so the section-6 formulas v2 keeps are checked with
their original arithmetic; tests/rpeg/test_cost_v2.py covers the v2 mechanisms.
"""

from __future__ import annotations

import pytest

from rlplan.rpeg.model.candidates import enumerate_strategies
from rlplan.rpeg.model.collectives import allreduce_time, p2p_time
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.parameters import layer_parameters, parameter_count
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.templates import Kind, Vertex

GENERATE = Vertex("actor", Kind.GENERATE)
ACTOR_TRAIN = Vertex("actor", Kind.TRAIN)

LLAMA_8B = ModelSpec(
    layers=32,
    hidden_dim=4096,
    ffn_dim=14336,
    vocab_size=128256,
    head_dim=128,
    kv_heads=8,
    gated_ffn=True,
)


# -- parameters ---------------------------------------------------------------------


def test_llama_8b_layer_parameters():
    """One Llama-3-8B layer has d(d+2*kv*h) + d*d + 3*d*f parameters."""
    # d=4096, kv=8, h=128, f=14336:
    #   q,k,v: 4096 * (4096 + 2*8*128) = 4096 * 6144 = 25_165_824
    #   o:     4096 * 4096                             = 16_777_216
    #   ffn:   3 * 4096 * 14336                        = 176_160_768
    #   total                                          = 218_103_808
    assert layer_parameters(LLAMA_8B) == 218_103_808


def test_llama_8b_actor_parameter_count():
    """A Llama-3-8B-shaped actor has L*P_l + 2*V*d parameters, within 1 % of 8.03e9."""
    # 32 * 218_103_808 = 6_979_321_856; 2 * 128256 * 4096 = 1_050_673_152
    # P = 6_979_321_856 + 1_050_673_152 = 8_029_995_008 (the published 8_030_261_248
    # also counts the 266_240 norm weights, which the model ignores)
    count = parameter_count(LLAMA_8B, "actor")
    assert count == 8_029_995_008
    assert abs(count - 8.03e9) / 8.03e9 < 0.01
    # the reference has the actor's head too
    assert parameter_count(LLAMA_8B, "reference") == 8_029_995_008


@pytest.mark.parametrize("role", ["critic", "reward"])
def test_llama_8b_scalar_head_parameter_count(role):
    """A critic/reward of the same shape has V*d + d instead of 2*V*d."""
    # 6_979_321_856 + 128256*4096 + 4096 = 6_979_321_856 + 525_336_576 + 4096
    #   = 7_504_662_528
    assert parameter_count(LLAMA_8B, role) == 7_504_662_528


def test_ungated_ffn_uses_two_matrices():
    """Without a gated FFN the feed-forward block counts 2*d*f parameters."""
    spec = ModelSpec(
        layers=2, hidden_dim=64, ffn_dim=128, vocab_size=256, head_dim=16, gated_ffn=False
    )
    # kv defaults to heads = 64/16 = 4: 64*(64 + 2*4*16) + 64*64 + 2*64*128
    #   = 64*192 + 4096 + 16384 = 12288 + 4096 + 16384 = 32768
    assert layer_parameters(spec) == 32_768
    # P = 2*32768 + 2*256*64 = 65536 + 32768 = 98304
    assert parameter_count(spec, "actor") == 98_304


def test_instance_parameters_of_the_16_gpu_ppo_instance(frozen_problem):
    """The cost model of the Llama-3-8B PPO instance uses the hand-computed counts."""
    cost = frozen_problem("frozen_ppo_8b_1x2x8_h100.yaml").directory.cost
    # as in the two tests above
    assert cost.parameters["actor"] == 8_029_995_008
    assert cost.parameters["reference"] == 8_029_995_008
    assert cost.parameters["critic"] == 7_504_662_528
    assert cost.parameters["reward"] == 7_504_662_528


# -- communication -----------------------------------------------------------------


def test_ring_allreduce_time():
    """Ring all-reduce costs 2(p-1)*alpha + 2(p-1)/p*n*beta."""
    # p=4, alpha=1e-5 s, beta=1e-9 s/B, n=4e6 B:
    #   2*3*1e-5 = 6e-5;  2*3/4 * 4e6 * 1e-9 = 6e-3;  total 6.06e-3 s
    assert allreduce_time(4e6, 4, 1e-5, 1e-9) == pytest.approx(6.06e-3, rel=1e-12)
    # p=8, alpha=5e-6, beta=1/450e9, n=9e8:
    #   2*7*5e-6 = 7e-5;  2*7/8 * 9e8 / 450e9 = 1.75 * 2e-3 = 3.5e-3;  total 3.57e-3
    assert allreduce_time(9e8, 8, 5e-6, 1 / 450e9) == pytest.approx(3.57e-3, rel=1e-12)


def test_allreduce_over_one_rank_is_free():
    """An all-reduce over one rank takes no time, whatever alpha and n."""
    assert allreduce_time(1e9, 1, 1.0, 1.0) == 0.0


def test_p2p_time():
    """A point-to-point transfer costs alpha + n*beta."""
    # 2e-6 + 1e6 * 1e-9 = 2e-6 + 1e-3 = 1.002e-3
    assert p2p_time(1e6, 2e-6, 1e-9) == pytest.approx(1.002e-3, rel=1e-12)


def test_bandwidths_are_normalised_to_inverse(frozen_problem):
    """beta given as bytes/s (>= 1) becomes s/byte; collectives use the level's numbers."""
    cost = frozen_problem("frozen_tiny_ppo_2gpu.yaml").directory.cost
    # beta_coll_g: 25e9 B/s -> 4e-11 s/B; alpha_coll_g = 1e-5
    # all-reduce of 1e9 B over 2 ranks: 2*1*1e-5 + 2*1/2 * 1e9 * 4e-11 = 2e-5 + 0.04 = 0.04002
    assert cost.allreduce(1e9, 2, "g") == pytest.approx(0.04002, rel=1e-12)
    # p2p at level n: alpha_p2p_n = 1.5e-5, beta_p2p_n = 1/12.5e9 = 8e-11
    #   1.5e-5 + 1e9 * 8e-11 = 1.5e-5 + 0.08 = 0.080015
    assert cost.p2p(1e9, "n") == pytest.approx(0.080015, rel=1e-12)


def test_transfer_lags(frozen_problem):
    """Data and pub lags follow section 6's transfer rules on the tiny PPO instance."""
    cost = frozen_problem("frozen_tiny_ppo_2gpu.yaml").directory.cost
    # data bytes = B*K*(S+T)*8 = 16*2*512*8 = 131072
    assert cost.data_bytes == 131_072
    # another block: alpha_p2p_g + bytes*beta_p2p_g = 8e-6 + 131072/25e9
    #   = 8e-6 + 5.24288e-6 = 1.324288e-5
    assert cost.data_lag(False, "g") == pytest.approx(1.324288e-5, rel=1e-12)
    assert cost.data_lag(True, "g") == 0.0
    # actor P = 24*14_909_440 + 2*151936*896 = 357_826_560 + 272_269_312 = 630_095_872
    # pub to another block, dst tp=pp=1: 8e-6 + 2*630_095_872/25e9
    #   = 8e-6 + 0.05040766976 = 0.05041566976
    single = Strategy(1, 1, 1, 4)
    assert cost.pub_lag("actor", False, False, "g", single) == pytest.approx(
        0.05041566976, rel=1e-12
    )
    # same block, other layout, dst tp=2: alpha_coll_g + 2P/2 * beta_coll_g
    #   = 1e-5 + 630_095_872/25e9 = 1e-5 + 0.02520383488 = 0.02521383488
    tp2 = Strategy(1, 1, 2, 4)
    assert cost.pub_lag("actor", True, False, "g", tp2) == pytest.approx(0.02521383488, rel=1e-12)
    assert cost.pub_lag("actor", True, True, "g", tp2) == 0.0


# -- run time ------------------------------------------------------------------------

# Numbers of the small instance (tests/rpeg/conftest.py) used below:
#   d=64, f=128, h=16, kv=2, L=2, V=256, F=1e12, HBM 1e9 B/s, decode_bw_eff 0.5,
#   m_half=5, k_half=0, non-GEMM 0, gemm_efficiency 1, decode_step_overhead 0.
#   P_l  = 64*(64 + 2*2*16) + 64*64 + 3*64*128 = 8192 + 4096 + 24576 = 36864
#   head = V*d = 256*64 = 16384
# A rollout (section 10) with n sequences per replica and an effective
# concurrency c >= n (max_num_seqs n; at gpu_memory_utilization 0.5 the 40 GB
# KV pool holds far more than n sequences) has no saturated phase: prefill, then
# decode steps x = 1..T with ceil(n * P(T > x - 1/2)) sequences active at context
# S + x; one round costs pp * max(GEMM, memory) (+ communication, + decode_step_overhead
# = 0).


def test_memory_bound_decode_run_time(small_instance_data, make_instance):
    """A memory-bound generate run is prefill + sum over steps of bytes/(bw*eff)."""
    cost = CostModel(make_instance(small_instance_data))
    # one sequence, S=4, T=4 (no gen_quantiles: P(T > x - 1/2) = 1 for x = 1..4),
    # dp=pp=tp=1, max_num_seqs 1 = n: no saturated phase, one sequence active throughout.
    # Prefill, M = 4 tokens:
    #   per layer 2*P_l*4 + 2*S^2*d = 294912 + 2*16*64 = 294912 + 2048 = 296960
    #   2 layers 593920 + head 2*16384*4 = 131072 -> 724992 FLOP
    #   eff = 4/(4+5) = 4/9 -> 724992*9/4 / 1e12 = 1.631232e-6 s
    # Decode step at context l = S+1..S+T = 5..8, one active sequence:
    #   GEMM: L*(2*P_l + 4*l*d) + 2*head = 180224 + 512*l FLOP, eff = 1/6
    #         -> 6*(180224+512*l)/1e12 ~ 1.1e-6 s
    #   bytes: weights 2*(2*36864 + 16384) = 180224, KV 2*L*kv*h*2*l = 256*l
    #         -> (180224 + 256*l) / (1e9*0.5) ~ 3.6e-4 s  (memory-bound)
    #   l=5: 181504, l=6: 181760, l=7: 182016, l=8: 182272 -> sum 727552 B
    #   727552 / 5e8 = 1.455104e-3 s
    # total = 1.631232e-6 + 1.455104e-3 = 1.456735232e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    )
    assert time == pytest.approx(1.456735232e-3, rel=1e-12)


def test_compute_bound_decode_run_time(small_instance_data, make_instance):
    """With a huge memory bandwidth every decode step is GEMM-bound."""
    small_instance_data["hardware"]["memory_bandwidth"] = 1e15
    cost = CostModel(make_instance(small_instance_data))
    # prefill as in the memory-bound case: 1.631232e-6 s
    # memory per step (180224+256*l)/5e14 ~ 3.6e-10 s < GEMM ~ 1.1e-6 s, so
    # decode = 6 * sum_{l=5..8}(180224 + 512*l) / 1e12
    #        = 6 * (4*180224 + 512*26) / 1e12 = 6 * 734208 / 1e12 = 4.405248e-6 s
    # total = 1.631232e-6 + 4.405248e-6 = 6.03648e-6 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    )
    assert time == pytest.approx(6.03648e-6, rel=1e-12)


def test_decode_with_gen_quantiles(small_instance_data, make_instance):
    """Finished sequences leave the decode batch: ceil(n * P(T > x - 1/2)) stay active."""
    small_instance_data["workload"]["batch_size"] = 4
    small_instance_data["workload"]["gen_quantiles"] = [[0.5, 2], [1.0, 4]]
    cost = CostModel(make_instance(small_instance_data))
    # n = 4 sequences, max_num_seqs 4: all in flight. Prefill, M = 16 tokens:
    #   per layer 2*36864*16 + 2*16*64*4 = 1179648 + 8192 = 1187840; x2 = 2375680
    #   head 2*16384*16 = 524288 -> 2899968 FLOP; eff 16/21
    #   -> 2899968*21/16 / 1e12 = 3.806208e-6 s
    # Lengths uniform on (0, 2] w.p. 0.5 and on (2, 4] w.p. 0.5: F is linear through
    # (0, 0), (2, 0.5), (4, 1). Active at step x = ceil(4 * (1 - F(x - 0.5))):
    #   x=1: F(0.5)=0.125 -> ceil(3.5)=4;  x=2: F(1.5)=0.375 -> ceil(2.5)=3
    #   x=3: F(2.5)=0.625 -> ceil(1.5)=2;  x=4: F(3.5)=0.875 -> ceil(0.5)=1
    #   bytes(l, a) = 180224 + 256*l*a at context l = S + x (memory-bound, GEMM ~ 1.6e-6 s)
    #   l=5,a=4: 185344; l=6,a=3: 184832; l=7,a=2: 183808; l=8,a=1: 182272
    #   sum 736256 B / 5e8 = 1.472512e-3 s
    # total = 3.806208e-6 + 1.472512e-3 = 1.476318208e-3 s
    time = cost.run_time(
        GENERATE, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=4)
    )
    assert time == pytest.approx(1.476318208e-3, rel=1e-12)


def test_train_time_with_data_parallel_gradient_sync(small_instance_data, make_instance):
    """A dp=2 train run is 3x forward GEMM plus one gradient all-reduce."""
    small_instance_data["hardware"]["gpus_per_node"] = 2
    small_instance_data["hardware"]["alpha_coll_g"] = 1e-6
    small_instance_data["workload"]["batch_size"] = 2
    cost = CostModel(make_instance(small_instance_data))
    # B*K = 2, dp=2 -> b = 1 sequence of l = S+T = 8 tokens, mb=1, pp=1:
    #   per layer 2*36864*8 + 2*8^2*64 = 589824 + 8192 = 598016; x2 = 1196032
    #   head 2*16384*8 = 262144 -> 1458176 FLOP; eff 8/13
    #   forward GEMM 1458176*13/8 / 1e12 = 2.369536e-6 s; train 3x = 7.108608e-6 s
    # gradient shard 2P/(pp*tp), P = 2*36864 + 2*16384 = 106496 -> 212992 B
    #   all-reduce over 2 ranks: 2*1*1e-6 + 2*1/2*212992*1e-9 = 2e-6 + 2.12992e-4
    #   = 2.14992e-4 s
    # total = 7.108608e-6 + 2.14992e-4 = 2.22100608e-4 s
    time = cost.run_time(ACTOR_TRAIN, (1, 1, 2), Strategy(2, 1, 1, 1))
    assert time == pytest.approx(2.22100608e-4, rel=1e-12)


def test_pipelined_tensor_parallel_infer_time(small_instance_data, make_instance):
    """Infer with pp=2, tp=2, mb=2: (mb + pp - 1) stages incl. TP all-reduces and a PP p2p."""
    data = small_instance_data
    data["hardware"]["gpus_per_node"] = 4
    data["hardware"]["alpha_coll_g"] = 1e-6
    data["hardware"]["alpha_p2p_g"] = 2e-6
    data["workload"]["batch_size"] = 4
    cost = CostModel(make_instance(data))
    reference = Vertex("reference", Kind.INFER)
    # 4 sequences, dp 1, mb 2 -> b = 2 sequences of l = 8 tokens, M = 16 tokens;
    # stage = ceil(2/2) = 1 layer + head, K = d/tp = 32 (k_half 0 -> no K factor)
    #   layer (2*36864*16 + 2*8^2*64*2)/2 = (1_179_648 + 16_384)/2 = 598_016
    #   head 2*16384*16/2 = 262_144 -> 860_160 FLOP; eff 16/21
    #   GEMM 860_160*21/16 / 1e12 = 1.12896e-6 s
    # TP: 2 all-reduces per layer of M*d*2 = 16*64*2 = 2048 B over 2 ranks (level g):
    #   2 * (2*1*1e-6 + 2*1/2*2048*1e-9) = 2 * (2e-6 + 2.048e-6) = 8.096e-6 s
    # PP: one p2p of 2048 B: 2e-6 + 2.048e-6 = 4.048e-6 s
    # t_stage = 1.12896e-6 + 8.096e-6 + 4.048e-6 = 1.327296e-5 s
    # pass = (mb + pp - 1) * t_stage = 3 * 1.327296e-5 = 3.981888e-5 s
    time = cost.run_time(reference, (1, 1, 4), Strategy(1, 2, 2, 2))
    assert time == pytest.approx(3.981888e-5, rel=1e-12)


# -- memory --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "pool", "tokens", "concurrency"),
    [
        # 2*ceil(32/2)*8*128*2 / min(4, 8) = 65_536/4 = 16_384 B per token; weights
        # 2P/(tp*pp) = 16_059_990_016/8 = 2_007_498_752; pool 0.5*80e9 - 2_007_498_752
        # = 37_992_501_248 B = 2_318_878.25 tokens; / 1349.156 = 1718.8 live sequences;
        # c = min(256, ceil(2048/2) = 1024, 1718) = 256
        (
            Strategy(2, 2, 4, 1, gpu_memory_utilization=0.5, max_num_seqs=256),
            37_992_501_248,
            2_318_878.25,
            256,
        ),
        # 2*32*8*128*2 / min(8, 8) = 16_384 B per token, the same pool; c = min(1024, 1024,
        # 1718) = 1024
        (
            Strategy(2, 1, 8, 1, gpu_memory_utilization=0.5, max_num_seqs=1024),
            37_992_501_248,
            2_318_878.25,
            1024,
        ),
        # 2*ceil(32/3)=11*8*128*2 / 1 = 45_056 B per token; weights 2P/3 =
        # 5_353_330_005.33; pool 34_646_669_994.67 B = 768_969.06 tokens (570 live
        # sequences); c = min(256, ceil(2048/16) = 128, 570) = 128
        (
            Strategy(16, 3, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=256),
            34_646_669_994.666_667,
            768_969.060_606,
            128,
        ),
        # 2*32*8*128*2 = 131_072 B per token; weights 2P = 16_059_990_016; pool
        # 0.4*80e9 - 16_059_990_016 = 15_940_009_984 B = 121_612.62 tokens; / 1349.156
        # = 90.14: the pool, not max_num_seqs 256 nor the 128 sequences, caps c at 90
        (
            Strategy(16, 1, 1, 1, gpu_memory_utilization=0.4, max_num_seqs=256),
            15_940_009_984,
            121_612.625,
            90,
        ),
    ],
)
def test_rollout_pool_llama(frozen_problem, strategy, pool, tokens, concurrency):
    """KV pool = u*M - weight shard - workspace, in tokens of 2*ceil(L/pp)*kv*h*2/min(tp, kv)
    bytes; the effective concurrency is min(max_num_seqs, n, floor(tokens / live context))."""
    # Llama-3-8B: L=32, kv=8, h=128, P = 8_029_995_008; M = 80e9; S = 1024;
    # gen_quantiles [[0.5, 400], [0.9, 900], [1.0, 1024]] (piecewise uniform):
    #   E[T] = 0.5*200 + 0.4*650 + 0.1*962 = 456.2
    #   E[T^2] = 0.5*400^2/3 + 0.4*(400^2 + 400*900 + 900^2)/3
    #            + 0.1*(900^2 + 900*1024 + 1024^2)/3
    #          = 26_666.67 + 177_333.33 + 92_672.53 = 296_672.53
    #   live context S + E[T^2]/(2 E[T]) = 1024 + 296_672.53/912.4 = 1349.156 tokens
    # rollout_workspace is 0 in the frozen instance.
    cost = frozen_problem("frozen_ppo_8b_1x2x8_h100.yaml").directory.cost
    assert cost.live_context == pytest.approx(1024 + 296_672.533_333 / 912.4, rel=1e-9)
    assert cost.rollout_pool_bytes("actor", strategy) == pytest.approx(pool, rel=1e-12)
    assert cost.rollout_pool_tokens("actor", strategy) == pytest.approx(tokens, rel=1e-9)
    assert cost.effective_concurrency("actor", strategy) == concurrency
    # the engine's whole share is transient; nothing stays resident between runs
    footprint = cost.footprint(GENERATE, strategy)
    assert footprint.resident == 0.0
    assert footprint.transient == pytest.approx(strategy.gpu_memory_utilization * 80e9)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        # 2*5*2*64*2 / min(1, 2) = 2_560 B per token
        (Strategy(8, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=2), 2_560),
        # / min(2, 2) = 1_280 per token
        (Strategy(4, 1, 2, 1, gpu_memory_utilization=0.5, max_num_seqs=2), 1_280),
        # tp 4 > kv 2: still / min(4, 2) = 2 -> 1_280 per token
        (Strategy(2, 1, 4, 1, gpu_memory_utilization=0.5, max_num_seqs=2), 1_280),
        # tp 8 > kv 2: / 2 -> 1_280 per token
        (Strategy(1, 1, 8, 1, gpu_memory_utilization=0.5, max_num_seqs=2), 1_280),
        # pp 2: ceil(5/2) = 3 layers: 2*3*2*64*2 = 1_536 per token
        (Strategy(4, 2, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=2), 1_536),
    ],
)
def test_kv_per_token_stops_shrinking_beyond_kv_heads(
    small_instance_data, make_instance, strategy, expected
):
    """Beyond tp = kv_heads the KV heads are replicated: a GPU's KV per token stops shrinking."""
    data = small_instance_data
    data["hardware"]["gpus_per_node"] = 8
    # heads = 512/64 = 8, kv = 2, L = 5
    data["models"]["actor"] = {
        "layers": 5,
        "hidden_dim": 512,
        "ffn_dim": 1024,
        "vocab_size": 256,
        "head_dim": 64,
        "kv_heads": 2,
    }
    data["workload"] = {
        "batch_size": 5,
        "samples_per_prompt": 2,
        "context_length": 100,
        "generation_length": 28,
    }
    cost = CostModel(make_instance(data))
    assert cost.rollout_kv_per_token("actor", strategy) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        # tp*pp = 8: 2P/8 = 2_007_498_752 twice = 4_014_997_504;
        # 12P/(8*2) = 6_022_496_256 -> 10_037_493_760
        (Strategy(2, 2, 4, 1), 10_037_493_760),
        # tp*pp = 8, dp 1: 2P/8 + 2P/8 + 12P/8 = 16P/8 = 2P = 16_059_990_016
        (Strategy(1, 1, 8, 1), 16_059_990_016),
        # tp*pp = 1, dp 16: 2P + 2P + 12P/16 = 4.75P = 38_142_476_288
        (Strategy(16, 1, 1, 1), 38_142_476_288),
    ],
)
def test_train_resident_footprint(frozen_problem, strategy, expected):
    """Train resident = 2P/(tp*pp) weights + 2P/(tp*pp) grads + 12P/(tp*pp*dp) Adam."""
    # P(actor) = 8_029_995_008 (see test_llama_8b_actor_parameter_count)
    cost = frozen_problem("frozen_ppo_8b_1x2x8_h100.yaml").directory.cost
    assert cost.footprint(ACTOR_TRAIN, strategy).resident == pytest.approx(expected, rel=1e-12)
    # an infer vertex only holds the weights, 2P/(tp*pp); a rollout nothing (its engine
    # keeps its own copy inside gpu_memory_utilization and frees it when it sleeps)
    weights = 2 * 8_029_995_008 / (strategy.tp * strategy.pp)
    reference = Vertex("reference", Kind.INFER)
    assert cost.footprint(reference, strategy).resident == pytest.approx(weights, rel=1e-12)
    assert cost.footprint(GENERATE, strategy).resident == 0.0


def test_pipelined_infer_and_train_footprints(small_instance_data, make_instance):
    """Infer: one layer + fp32 logits; train: min(pp, mb) microbatches of stage activations
    plus the fp32 logits of one microbatch (section 10)."""
    data = small_instance_data
    data["workload"]["batch_size"] = 4
    cost = CostModel(make_instance(data))
    strategy = Strategy(1, 2, 2, 2)
    # P = 2*36864 + 2*16384 = 106_496; b = 2, l = 8, d = 64, a = 64/16 = 4 heads
    # one layer: l*b*d*(34 + 5*a*l/d)/tp = 8*2*64*(34 + 5*4*8/64)/2 = 1024*36.5/2 = 18_688
    # infer: 18_688 + 4*b*l*V/tp = 18_688 + 4*2*8*256/2 = 18_688 + 8_192 = 26_880;
    #   resident 2P/(tp*pp) = 212_992/4 = 53_248
    infer = cost.footprint(Vertex("reference", Kind.INFER), strategy)
    assert (infer.resident, infer.transient) == (pytest.approx(53_248), pytest.approx(26_880))
    # train: min(pp=2, mb=2) = 2 in flight x ceil(2/2) = 1 layer x 18_688 = 37_376,
    #   + logits 8_192 = 45_568;
    #   resident 53_248 + 53_248 + 12*106_496/(2*2*1) = 106_496 + 319_488 = 425_984
    train = cost.footprint(ACTOR_TRAIN, strategy)
    assert (train.resident, train.transient) == (pytest.approx(425_984), pytest.approx(45_568))


# -- GPU peaks with co-located models ----------------------------------------------------
#
# tests/data/frozen_tiny_ppo_2gpu.yaml: 1x1x2, 24e9 B per GPU, 5 % reserve, Qwen2.5-0.5B shapes:
# d=896, f=4864, h=64, kv=2, L=24, V=151936, heads a=14; S+T=512, B*K=32, mb=4 -> b=8.
#   P_l = 896*(896+256) + 896^2 + 3*896*4864 = 1_032_192 + 802_816 + 13_074_432 = 14_909_440
#   P(actor) = 24*P_l + 2*V*d = 357_826_560 + 272_269_312 = 630_095_872
#   P(critic) = P(reward) = 357_826_560 + 136_134_656 + 896 = 493_962_112
# Single GPU, dp=pp=tp=1:
#   actor train resident 16P = 10_081_533_952; critic train resident 16P = 7_903_393_792
#   reference resident 2P = 1_260_191_744; reward/critic infer 987_924_224;
#   actor.generate resident 0 (its engine's weights live inside its share)
#   train activations: 24 layers * l*b*d*(34 + 5*a*l/d) = 24 * 512*8*896*(34 + 40)
#     = 24 * 271_581_184 = 6_517_948_416
#   fp32 logits of one microbatch: actor 4*b*l*V = 4*8*512*151936 = 2_489_319_424,
#     critic and reward 4*b*l*1 = 16_384
#   actor train transient: 6_517_948_416 + 2_489_319_424 = 9_007_267_840
#   critic train transient: 6_517_948_416 + 16_384 = 6_517_964_800
#   reference infer transient: 271_581_184 + 2_489_319_424 = 2_760_900_608
#   generate transient: the engine's share, gpu_memory_utilization 0.5 * 24e9 = 12_000_000_000
#   reward/critic infer transient: 271_581_184 + 4*8*512*1 = 271_597_568
# usable memory = 24e9 * 0.95 = 22.8e9

ACTOR_TRAIN_RESIDENT = 10_081_533_952
CRITIC_TRAIN_RESIDENT = 7_903_393_792
ACTOR_WEIGHTS = 1_260_191_744
SCALAR_WEIGHTS = 987_924_224
ACTOR_TRAIN_TRANSIENT = 9_007_267_840
CRITIC_TRAIN_TRANSIENT = 6_517_964_800
ROLLOUT_TRANSIENT = 12_000_000_000


def test_single_gpu_candidates_match_hand_footprints(frozen_problem):
    """The tiny PPO single-GPU candidates have the hand-computed footprints."""
    directory = frozen_problem("frozen_tiny_ppo_2gpu.yaml").directory
    by_name = {
        v.name: directory.options[i][(1, 1, 1)][0]
        for i, v in enumerate(directory.template.vertices)
    }
    # numbers from the block comment above
    assert by_name["actor.train"].resident == ACTOR_TRAIN_RESIDENT
    assert by_name["actor.train"].transient == pytest.approx(ACTOR_TRAIN_TRANSIENT, rel=1e-12)
    assert by_name["critic.train"].resident == CRITIC_TRAIN_RESIDENT
    assert by_name["critic.train"].transient == pytest.approx(CRITIC_TRAIN_TRANSIENT, rel=1e-12)
    assert by_name["reference.infer"].resident == ACTOR_WEIGHTS
    assert by_name["reference.infer"].transient == pytest.approx(2_760_900_608, rel=1e-12)
    assert by_name["actor.generate"].resident == 0.0
    assert by_name["actor.generate"].transient == pytest.approx(ROLLOUT_TRANSIENT, rel=1e-12)
    assert by_name["reward.infer"].transient == pytest.approx(271_597_568, rel=1e-12)


def test_peak_with_reference_and_actor_train_colocated(frozen_problem, single_gpu_plan):
    """Reference + actor.train on one GPU: both residents plus the largest transient."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    plan = single_gpu_plan(
        problem.directory,
        {
            "actor.generate": 0,
            "reference.infer": 1,
            "reward.infer": 0,
            "critic.infer": 0,
            "actor.train": 1,
            "critic.train": 0,
        },
    )
    peaks = problem.simulator.peak_memory(plan)
    # GPU 1: 10_081_533_952 + 1_260_191_744 + max(9_007_267_840, 2_760_900_608)
    #      = 20_348_993_536
    assert peaks[1] == pytest.approx(20_348_993_536, rel=1e-12)
    # GPU 0: actor (generate) 0 + reward 987_924_224 + critic (train) 7_903_393_792
    #        + max transient (the rollout engine) 12_000_000_000 = 20_891_318_016
    assert peaks[0] == pytest.approx(20_891_318_016, rel=1e-12)
    # both below 22.8e9
    assert problem.simulator.memory_violation(plan) == 0.0


def test_actor_resident_counts_once_when_generate_and_train_share(frozen_problem, single_gpu_plan):
    """actor.generate and actor.train on one GPU: the actor's resident is actor.train's
    alone (the rollout keeps none), the rollout's engine share the transient."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    plan = single_gpu_plan(
        problem.directory,
        {
            "actor.generate": 1,
            "reference.infer": 0,
            "reward.infer": 0,
            "critic.infer": 0,
            "actor.train": 1,
            "critic.train": 0,
        },
    )
    peaks = problem.simulator.peak_memory(plan)
    # GPU 1: max(16P, 0) = 10_081_533_952 + max(9_007_267_840, 12_000_000_000)
    #        = 22_081_533_952
    assert peaks[1] == pytest.approx(22_081_533_952, rel=1e-12)


def test_memory_violation_when_everything_shares_one_gpu(frozen_problem, single_gpu_plan):
    """All six vertices on GPU 0 overflow it by the hand-computed number of bytes."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    names = problem.directory.template.names
    plan = single_gpu_plan(problem.directory, dict.fromkeys(names, 0))
    peaks = problem.simulator.peak_memory(plan)
    # actor 10_081_533_952 + reference 1_260_191_744 + reward 987_924_224
    #   + critic 7_903_393_792 + transient (the rollout engine) 12_000_000_000
    #   = 32_233_043_712
    assert peaks == [pytest.approx(32_233_043_712, rel=1e-12), 0.0]
    # overflow 32_233_043_712 - 22.8e9 = 9_433_043_712
    assert problem.simulator.memory_violation(plan) == pytest.approx(9_433_043_712, rel=1e-9)
    assert not problem.simulator.evaluate(plan).feasible


# -- compute lower bound ingredient ---------------------------------------------------------


def test_every_candidate_respects_the_flop_bound(load_problem):
    """For every candidate of the 16-GPU PPO instance, time*gpus*peak >= the vertex's FLOPs."""
    directory = load_problem("ppo_8b_1x2x8_h100.yaml").directory
    peak = directory.instance.hardware.flops_per_gpu
    checked = 0
    for index, vertex in enumerate(directory.template.vertices):
        flops = directory.cost.vertex_flops(vertex)
        for shape in directory.cluster.shapes:
            # kept options and every other strategy of the plan space
            strategies = {c.strategy for c in directory.options[index].get(shape, ())}
            strategies.update(enumerate_strategies(directory.instance, vertex, shape))
            for strategy in strategies:
                candidate = directory.candidate(index, shape, strategy)
                gpus = shape[0] * shape[1] * shape[2]
                assert candidate.time * gpus * peak >= flops, (vertex.name, shape, strategy)
                checked += 1
    assert checked > 500


def test_vertex_flops_of_small_generate(small_instance_data, make_instance):
    """Generate FLOPs = prefill forward + E[T] decode tokens at the mean context S + E[T]/2."""
    cost = CostModel(make_instance(small_instance_data))
    # prefill: 1 seq * (4 * 2*(2*36864 + 16384) + 2 * 2*4^2*64) = 4*180224 + 4096 = 724992
    # decode: n*E[T] = 4 tokens, each 2*(2*36864 + 16384) + L*4*d*(S + E[T]/2)
    #   = 180224 + 2*4*64*6 = 180224 + 3072 = 183296 -> 4*183296 = 733184
    #   (below the model's steps at contexts 5..8, mean 6.5: a lower bound)
    # total 724992 + 733184 = 1_458_176
    assert cost.vertex_flops(GENERATE) == pytest.approx(1_458_176, rel=1e-12)
