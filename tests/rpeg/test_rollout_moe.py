"""Mixture-of-experts rollouts (docs/cost-model.md#mixture-of-experts-rollouts), by hand.

The model is the small one of conftest.py (2 layers, d = 64, h = 16, kv = 2,
V = 256; F = 1e12 FLOP/s, gemm_m_half 5, no efficiency ceiling, HBM 1e9 B/s at
50 %) turned into a mixture of experts: E = 8 experts of f_e = 32, k = 2, one
shared expert of 32. Per layer: attention d*(q + 2*kv*h) + q*d = 12_288, router
d*E = 512, one expert 3*64*32 = 6_144, the shared expert 6_144; the head V*d =
16_384. A stage's dense part (attention, router, shared, head) is 2*(12_288 +
512 + 6_144) + 16_384 = 54_272 parameters; P = 2*(18_944 + 8*6_144) + 2*16_384
= 168_960 of which the routed experts are 2*8*6_144 = 98_304.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.parameters import parameter_count, routed_parameters
from rlplan.rpeg.model.rollout_experts import experts_touched
from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.templates import Kind, Vertex
from tests.rpeg.conftest import SMALL_INSTANCE
from tests.rpeg.moe_instance import in_node_levels

GENERATE = Vertex("actor", Kind.GENERATE)
MOE = {"experts": 8, "experts_per_token": 2, "expert_ffn_dim": 32, "shared_experts": 1}
#: Latent attention: 4 heads, latent 32, rotary 8, nope 16, values 16.
MLA = {
    "attention": "mla",
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
}


class Imbalanced:
    """The instance's hardware with ``moe_imbalance`` set (whether or not it has the field)."""

    def __init__(self, hardware: Any, imbalance: float) -> None:
        self._hardware, self.moe_imbalance = hardware, imbalance

    def __getattr__(self, name: str) -> Any:
        return getattr(self._hardware, name)


def moe_cost(model: dict | None = None, imbalance: float | None = None, **sections) -> CostModel:
    """The cost model of the small instance with the MoE actor (``model`` adds keys)."""
    data = copy.deepcopy(SMALL_INSTANCE)
    data["hardware"]["gpus_per_node"] = 2
    data["models"]["actor"].update(MOE, **(model or {}))
    for section, values in sections.items():
        data[section].update(values)
    cost = CostModel(parse_instance(data, "moe"))
    if imbalance is not None:
        cost.hardware = Imbalanced(cost.hardware, imbalance)
    return cost


def rollout(dp: int = 1, tp: int = 1, ep: int = 1, pp: int = 1, seqs: int = 1024, u=0.5):
    return Strategy(dp, pp, tp, 1, gpu_memory_utilization=u, max_num_seqs=seqs, ep=ep)


def decision_10_shard(cost: CostModel):
    """Stand-in for MemoryTerms.weight_shard on rollouts (2*(P_dense/(tp*pp) +
    P_routed/(e*pp)), e = ep if ep > 1 else tp) until it implements it there; the
    expected numbers below are the same with the real one."""

    def shard(model: str, strategy: Strategy) -> float:
        spec = cost.instance.models[model]
        routed = routed_parameters(spec)
        dense = parameter_count(spec, model) - routed
        holders = strategy.ep if strategy.ep > 1 else strategy.tp
        return BF16 * (dense / (strategy.tp * strategy.pp) + routed / (holders * strategy.pp))

    return shard


def test_experts_touched_by_hand():
    """E*(1 - (1 - k/E)^B) with E = 8, k = 2 (a token misses an expert with 3/4)."""
    # B = 1: 8*(1 - 0.75) = 2 (one token's k experts); B = 2: 8*(1 - 0.5625) = 3.5;
    # B = 8: 8*(1 - 0.75^8) = 8*(1 - 0.1001129150390625) = 7.1990966796875
    got = experts_touched(8, 2, np.array([1.0, 2.0, 8.0]))
    assert got == pytest.approx([2.0, 3.5, 7.1990966796875], rel=1e-15)
    assert experts_touched(8, 8, 1.0) == 8.0  # every token uses every expert


@pytest.mark.parametrize(
    ("tp", "ep", "pp", "dense_layers", "expected"),
    [
        # dense part 2*54_272 = 108_544 B; B = 2 tokens touch 3.5 experts per layer:
        # 2 layers*3.5*6_144*2 B = 86_016 B -> 194_560 B
        (1, 1, 1, 0, 194_560),
        # tp 2, experts tp-sliced: (108_544 + 86_016) / 2 = 97_280 B
        (2, 1, 1, 0, 97_280),
        # ep 2 (two attention replicas of tp 1): B = 2*2/1 = 4 tokens touch
        # 8*(1 - 0.75^4) = 5.46875 experts, each GPU holds half: 2*5.46875*6_144*2/2 = 67_200
        # -> 108_544 + 67_200 = 175_744 B
        (1, 2, 1, 0, 175_744),
        # pp 2: a stage holds ceil(2/2) = 1 layer, an MoE layer, and the head; 4 active in
        # virtual batches of 2: 2*(18_944 + 16_384) + 3.5*6_144*2 = 70_656 + 43_008 = 113_664
        (1, 1, 2, 0, 113_664),
        # 3 layers, the first dense: 2*(36_864 + 2*18_944 + 16_384) = 182_272 B dense part
        # + 2 MoE layers' 86_016 B = 268_288 B
        (1, 1, 1, 1, 268_288),
    ],
)
def test_decode_round_reads_the_dense_part_and_the_touched_experts(
    tp, ep, pp, dense_layers, expected
):
    layers = {"layers": 3, "dense_layers": 1} if dense_layers else {}
    cost = moe_cost(layers)
    strategy = rollout(dp=2, tp=tp, ep=ep, pp=pp)
    # at context 0 the memory time is the weights alone, over 1e9 B/s * 0.5
    _, memory, _, _ = cost._decode_round_terms(
        "actor", strategy, np.array([2.0 * pp]), np.zeros(1), in_node_levels(ep)
    )
    assert memory[0] * 0.5e9 == pytest.approx(expected, rel=1e-12)


def test_expert_gemms_run_at_their_rows_and_inner_width():
    """gemm_k_half 32, 8 tokens at 4 rows per expert GEMM (eff 4/9 before the K factor)."""
    cost = moe_cost(imbalance=1.25, hardware={"gemm_k_half": 32.0})
    spec = cost.instance.models["actor"]
    # FLOP per GPU at tp 2: 2 layers*2*k*6_144*8/2 = 196_608
    # ep 2: whole experts, K = d = 64: eff 4/9*64/96 = 8/27, x 1.25 imbalance
    #   -> 1.25*196_608*27/8e-12 = 829_440e-12 s
    whole = cost._expert_gemm(spec, rollout(dp=2, tp=2, ep=2), 8.0, 4.0)
    assert whole == pytest.approx(829_440e-12, rel=1e-12)
    # ep 1: tp-sliced, K = d/tp = 32: eff 4/9*1/2 = 2/9, no imbalance -> 884_736e-12 s
    sliced = cost._expert_gemm(spec, rollout(dp=2, tp=2), 8.0, 4.0)
    assert sliced == pytest.approx(884_736e-12, rel=1e-12)


def test_decode_round_compute_and_all_to_all_with_expert_parallelism():
    """ep 2, tp 1, b = 2, context 0, moe_imbalance 1.25, alpha_coll_g 1e-6 s, beta 1e-9 s/B."""
    cost = moe_cost(imbalance=1.25, hardware={"alpha_coll_g": 1e-6})
    strategy = rollout(dp=2, ep=2)
    gemm, _, fixed, _ = cost._decode_round_terms(
        "actor", strategy, np.array([2.0]), np.zeros(1), in_node_levels(2)
    )
    # dense: 2*54_272*2 = 217_088 FLOP at eff 2/7 -> 759_808e-12 s
    # routed: 2 layers*2*k*6_144*2 = 98_304 FLOP; rows k*B/touched = 2*4/5.46875, eff
    #   rows/(rows + 5), 1/eff = 1 + 5*5.46875/8 = 4.41796875 -> 434_304e-12 s, x 1.25
    #   = 542_880e-12 s; total 1_302_688e-12 s
    assert gemm[0] == pytest.approx(1_302_688e-12, rel=1e-12)
    # all-to-all: 2 layers x (dispatch + combine) x (1e-6 + 1.25*k*b*d*2 * 1/2 * 1e-9)
    #   = 4 * (1e-6 + 1.25*512/2*1e-9) = 4 * 1.32e-6 = 5.28e-6 s (nothing else is fixed)
    assert fixed[0] == pytest.approx(5.28e-6, rel=1e-12)
    assert (
        cost._decode_all_to_all("actor", rollout(dp=2), np.array([2.0]), in_node_levels(1)) == 0.0
    )


def test_prefill_of_an_expert_parallel_replica():
    """ep 2, tp 1: c = 2 prompts of S = 4 (T = 8 tokens) a chunk, n = 2: one chunk."""
    cost = moe_cost(imbalance=1.25, hardware={"alpha_coll_g": 1e-6}, workload={"batch_size": 4})
    strategy = rollout(dp=2, ep=2, seqs=2)
    # dense: 2*54_272*8 + 2 layers*2*4^2*64*2 = 868_352 + 8_192 = 876_544 FLOP, eff 8/13
    #   -> 1_424_384e-12 s; routed 2*2*2*6_144*8 = 393_216 FLOP at M_e = k*T*ep/(tp*E) = 4
    #   rows (eff 4/9) -> 884_736e-12 s, x 1.25 = 1_105_920e-12 s; stage 2_530_304e-12 s
    # all-to-all: 4 * (1e-6 + 1.25*2*8*64*2/2*1e-9) = 4 * 2.28e-6 = 9.12e-6 s
    prefill, all_to_all = cost._prefill_time("actor", strategy, 2, in_node_levels(2))
    assert prefill == pytest.approx(2_530_304e-12, rel=1e-12)
    assert all_to_all == pytest.approx(9.12e-6, rel=1e-12)


def test_latent_attention_caches_the_latent_on_every_tp_rank():
    """MLA: (kv_lora_rank + qk_rope_head_dim)*2 = 80 B per token and layer, whatever tp."""
    cost = moe_cost(MLA)
    # 2 layers * 80 = 160 B at tp 1 and tp 2 (GQA would halve: 256 -> 128)
    assert cost.rollout_kv_per_token("actor", rollout(tp=1)) == 160
    assert cost.rollout_kv_per_token("actor", rollout(tp=2)) == 160
    assert moe_cost().rollout_kv_per_token("actor", rollout(tp=2)) == 128


def test_latent_pool_tokens_at_tp_1_and_2():
    """1 MB GPU, u 0.5, no workspace: the pool is what the weight shard leaves."""
    cost = moe_cost(
        MLA,
        hardware={"memory_per_gpu": 1e6, "memory_reserve": 0.0, "memory_reserve_bytes": 0},
    )
    # MLA attention: queries 64*4*24 = 6_144, latent 64*40 + 32*4*32 = 6_656, out 4*16*64
    #   = 4_096 -> 16_896; an MoE layer 16_896 + 512 + 8*6_144 + 6_144 = 72_704;
    #   P = 2*72_704 + 2*16_384 = 178_176, 2P = 356_352 B
    # tp 1: (500_000 - 356_352) / 160 = 897.8 tokens; tp 2: (500_000 - 178_176) / 160
    #   = 2_011.4 tokens (the same 160 B per token on each GPU, half the weights)
    assert cost.rollout_pool_tokens("actor", rollout(tp=1)) == pytest.approx(897.8, rel=1e-12)
    assert cost.rollout_pool_tokens("actor", rollout(tp=2)) == pytest.approx(2011.4, rel=1e-12)


def test_expert_parallel_replica_concurrency():
    """400 prompts over dp 2 attention replicas (n = 200), live context 4 + 16/8 = 6."""
    cost = moe_cost(
        hardware={"memory_per_gpu": 1e6, "memory_reserve": 0.0, "memory_reserve_bytes": 0},
        workload={"batch_size": 400},
    )
    cost.weight_shard = decision_10_shard(cost)
    # ep 2: shard 2*(70_656 + 98_304/2) = 239_616 B; pool 260_384 B / 256 = 1_017.125
    #   tokens -> floor(1_017.125 / 6) = 169 sequences
    assert cost.effective_concurrency("actor", rollout(dp=2, ep=2)) == 169
    # ep 1: shard 2P = 337_920 B; pool 162_080 / 256 = 633.125 -> 105
    assert cost.effective_concurrency("actor", rollout(dp=2)) == 105


def test_refusals_name_the_latent_cache_and_the_expert_split():
    cost = moe_cost(
        MLA,
        hardware={"memory_per_gpu": 1e6, "memory_reserve": 0.0, "memory_reserve_bytes": 0},
        workload={"generation_length": 4000},
    )
    # tp 2: 321_824 B of pool hold 2_011 tokens, fewer than S + T = 4_004
    refusal = cost.rollout_refusal("actor", rollout(tp=2))
    assert "holds 2,011 tokens per GPU" in refusal
    assert "tp 2 does not split the latent KV cache" in refusal
    cost = moe_cost(
        hardware={"memory_per_gpu": 1e6, "memory_reserve": 0.0, "memory_reserve_bytes": 0}
    )
    cost.weight_shard = decision_10_shard(cost)
    refusal = cost.rollout_refusal("actor", rollout(dp=2, ep=2, u=0.2))
    # 200_000 B < the 239_616 B shard: no pool
    assert "weights (239,616 bytes: dense parts over tp 1, experts over ep 2)" in refusal


def test_latent_decode_attention_reads_the_latent_in_the_absorbed_form():
    """d/d(context) per step: 4*w*batch FLOPs a layer, w = heads*(2*32 + 8)/2 = 144."""
    cost = moe_cost(MLA)
    contexts = np.array([10.0, 110.0])
    gemm, memory, _, _ = cost._decode_round_terms(
        "actor", rollout(), np.array([2.0, 2.0]), contexts, in_node_levels(1)
    )
    # 100 more context tokens: 2 layers*4*144*2*100 = 230_400 FLOP at eff 2/7
    #   -> 806_400e-12 s; the latent read 160 B*2*100 / 5e8 B/s = 6.4e-5 s
    assert gemm[1] - gemm[0] == pytest.approx(806_400e-12, rel=1e-9)
    assert memory[1] - memory[0] == pytest.approx(6.4e-5, rel=1e-9)


def test_cross_node_tp_all_reduces_at_the_node_level():
    """tp 16 over two 8-GPU nodes: levels[0] is n, the decode all-reduce pays it."""
    cost = moe_cost(
        hardware={
            "gpus_per_node": 8,
            "nodes_per_rack": 2,
            "alpha_coll_n": 5e-6,
            "beta_coll_n": 1e10,
        }
    )
    strategy = rollout(tp=16)
    levels = cost.cluster.group_levels((1, 2, 8), 1, 1, 16, 1, 1, 1)
    assert levels[0] == "n"
    _, _, fixed, _ = cost._decode_round_terms(
        "actor", strategy, np.array([4.0]), np.zeros(1), levels
    )
    # 2 layers x 2 all-reduces of 4*64*2 = 512 B over 16 ranks at alpha 5e-6, beta 1e-10:
    #   2*15*5e-6 + 2*15/16*512*1e-10 = 1.5e-4 + 9.6e-8 = 1.50096e-4 -> x4 = 6.00384e-4 s
    assert fixed[0] == pytest.approx(6.00384e-4, rel=1e-12)
    assert cost.run_time(GENERATE, (1, 2, 8), strategy) == cost._generate_time(
        "actor", strategy, levels
    )
    assert cost._generate_time("actor", strategy, levels) > cost._generate_time(
        "actor", strategy, in_node_levels(strategy.ep)
    )


def _per_token(cost, strategy, levels, in_flight) -> float:
    # The definition, as tests/rpeg/test_decode_tail.py: one round per generated length.
    workload = cost.workload
    x = np.arange(1, workload.generation_length + 1, dtype=np.float64)
    active = np.ceil(in_flight * workload.survival(x - 0.5) - 1e-9)
    keep = active > 0
    rounds = cost.decode_round(
        "actor", strategy, active[keep], workload.context_length + x[keep], levels
    )
    return float(rounds.sum())


#: A longer rollout whose tail crosses from GEMM- to memory-bound decode steps.
LONG = {
    "batch_size": 64,
    "context_length": 64,
    "generation_length": 256,
    "gen_quantiles": [[0.3, 40], [0.8, 160], [1.0, 256]],
}


@pytest.mark.parametrize("bandwidth", [3e9, 3e11])
@pytest.mark.parametrize("model", [{}, MLA])
def test_closed_form_tail_equals_the_per_token_sum_on_experts(model, bandwidth):
    cost = moe_cost(
        model,
        imbalance=1.25,
        workload=LONG,
        hardware={"memory_bandwidth": bandwidth, "alpha_coll_g": 1e-6, "gemm_m_half": 64.0},
    )
    checked = 0
    for tp, ep, pp in ((1, 1, 1), (2, 1, 1), (1, 2, 1), (2, 4, 1), (1, 2, 2)):
        for in_flight in (1, 7, 64):
            strategy = rollout(dp=4, tp=tp, ep=ep, pp=pp, seqs=in_flight)
            expected = _per_token(cost, strategy, in_node_levels(strategy.ep), in_flight)
            # no cache clearing: strategies differing in ep only must not share a tail
            got = cost._decode_tail("actor", strategy, in_node_levels(strategy.ep), in_flight)
            assert got == pytest.approx(expected, rel=1e-10), (tp, ep, pp, in_flight)
            checked += 1
    assert checked == 15


def _parts_by_round(cost, strategy, levels, c) -> dict[str, float]:
    # Every decode round on its own (the saturated phase's steps rounds at S + E[T]/2,
    # then one per generated length): GEMM-bound where G >= memory, with its fixed
    # time less the all-to-all, which goes apart.
    workload = cost.workload
    s, n, pp = workload.context_length, cost.replica_sequences(strategy), strategy.pp
    x = np.arange(1, workload.generation_length + 1, dtype=np.float64)
    active = np.ceil(c * workload.survival(x - 0.5) - 1e-9)
    weight, keep = np.ones_like(x[active > 0]), active > 0
    active, context = active[keep], s + x[keep]
    if n > c:
        steps = (n - c) * workload.mean_generated / c
        active = np.append(active, float(c))
        context = np.append(context, s + workload.mean_generated / 2)
        weight = np.append(weight, steps)
    gemm, memory, fixed, overhead = cost._decode_round_terms(
        "actor", strategy, active, context, levels
    )
    exchange = cost._decode_all_to_all("actor", strategy, active, levels)
    own = weight * pp * (np.maximum(gemm, memory) + fixed - exchange)
    return {
        "decode_compute_bound": float(np.sum(own[gemm >= memory])),
        "decode_memory_bound": float(np.sum(own[gemm < memory])),
        "all_to_all": float(np.sum(weight * pp * exchange * np.ones_like(gemm))),
        "decode_overhead": float(np.sum(weight * overhead)),
    }


@pytest.mark.parametrize("bandwidth", [3e9, 3e10, 3e11])
@pytest.mark.parametrize(
    ("tp", "ep", "pp", "seqs"),
    [(1, 1, 1, 8), (1, 2, 1, 16), (2, 4, 1, 64), (2, 1, 1, 3), (1, 2, 2, 5)],
)
def test_rollout_time_parts_sum_to_the_generate_time(tp, ep, pp, seqs, bandwidth):
    cost = moe_cost(
        MLA,
        imbalance=1.25,
        workload=LONG,
        hardware={
            "memory_bandwidth": bandwidth,
            "alpha_coll_g": 1e-6,
            "gemm_m_half": 64.0,
            "decode_step_overhead": 1e-4,
        },
    )
    strategy = rollout(dp=4, tp=tp, ep=ep, pp=pp, seqs=seqs)
    parts = cost.rollout_time_parts("actor", strategy, in_node_levels(strategy.ep))
    assert list(parts) == [
        "prefill",
        "decode_compute_bound",
        "decode_memory_bound",
        "all_to_all",
        "decode_overhead",
    ]
    total = cost._generate_time("actor", strategy, in_node_levels(strategy.ep))
    assert sum(parts.values()) == pytest.approx(total, rel=1e-9)
    c = min(seqs, 16)  # n = 64/4 = 16 sequences per replica
    prefill, prefill_exchange = cost._prefill_time(
        "actor", strategy, c, in_node_levels(strategy.ep)
    )
    assert parts["prefill"] == prefill
    assert (prefill_exchange > 0) == (ep > 1)
    expected = _parts_by_round(cost, strategy, in_node_levels(strategy.ep), c)
    expected["all_to_all"] += prefill_exchange
    for key, value in expected.items():
        assert parts[key] == pytest.approx(value, rel=1e-9, abs=1e-15), key
    # (16 - c)*E[T]/c saturated rounds, E[T] = 0.3*20 + 0.5*100 + 0.2*208 = 97.6, and
    # one tail round per generated length (all 256 have a sequence active), 1e-4 s each
    assert parts["decode_overhead"] == pytest.approx(((16 - c) * 97.6 / c + 256) * 1e-4)
