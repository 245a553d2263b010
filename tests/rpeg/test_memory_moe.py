"""Mixture-of-experts memory and weight transfers (docs/cost-model.md#mixtures-of-experts).

Hand computations on the tiny MoE instance of tests/rpeg/moe_instance.py:
P = 107008, routed P_r = 49152, dense part P_d = 57856.
"""

from __future__ import annotations

import pytest

from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.memory_terms import layer_activation_width, mla_attention_activations
from rlplan.rpeg.schema.models import ModelSpec
from tests.rpeg.moe_instance import TRAIN, moe_cost


def rollout(dp: int, tp: int, ep: int = 1) -> Strategy:
    """A rollout strategy (it has a cap on running sequences)."""
    return Strategy(dp, 1, tp, 1, gpu_memory_utilization=0.5, max_num_seqs=1, ep=ep)


@pytest.mark.parametrize(
    ("strategy", "shard"),
    [
        # 2*(57856/(tp*pp) + 49152/(ep*etp*pp))
        (Strategy(4, 1, 1, 1, ep=4), 2 * (57_856 + 12_288)),  # 140_288
        (Strategy(2, 1, 2, 1, ep=2, etp=2), 2 * (28_928 + 12_288)),  # 82_432
        (Strategy(2, 1, 2, 1), 2 * (28_928 + 49_152)),  # ep 1, etp 1: experts whole
        (Strategy(2, 2, 1, 1, ep=2), 2 * (28_928 + 12_288)),  # pp 2 halves both
        # a rollout: ep_gen = ep if ep > 1 else tp
        (rollout(2, 2, ep=4), 2 * (28_928 + 12_288)),  # 82_432
        (rollout(2, 2), 2 * (28_928 + 24_576)),  # experts tp-sharded: 107_008
        (rollout(4, 1), 2 * 107_008),
    ],
)
def test_weight_shard_of_an_moe_model(strategy, shard):
    assert moe_cost().weight_shard("actor", strategy) == shard


def test_train_states_zero1_and_zero3():
    cost = moe_cost()
    # dp4 tp1 ep4: edp = 4*1*1/(4*1) = 1.
    # zero1: weights and grads 2 * 140288, Adam 12*(57856/4 + 49152/(4*1)) = 12*26752.
    strategy = Strategy(4, 1, 1, 1, ep=4)
    assert cost.train_states("actor", strategy) == 2 * 140_288 + 321_024
    # zero3: 16*(57856/(1*1*4*1) + 49152/(4*1*1*1)) = 16*26752 = 428_032.
    zero3 = Strategy(4, 1, 1, 1, sharding="zero3", ep=4)
    assert cost.train_states("actor", zero3) == 428_032
    # dp2 tp2 ep2 etp2: edp = 2*1*2/4 = 1; weights 2*(28928 + 12288) = 82432;
    # Adam 12*(57856/(2*2) + 49152/(2*2*1)) = 12*(14464 + 12288) = 321_024.
    folded = Strategy(2, 1, 2, 1, ep=2, etp=2)
    assert cost.train_states("actor", folded) == 2 * 82_432 + 321_024
    # cp 2 shards the dense part's states over dp*cp = 2 and the experts over
    # edp = 1*2*2/(1*1) = 4: 2*2*(28928 + 49152) + 12*(57856/(2*2) + 49152/4).
    context = Strategy(1, 1, 2, 1, cp=2)
    assert cost.train_states("actor", context) == 4 * 78_080 + 12 * (14_464 + 12_288)


def test_train_states_of_a_dense_model_with_context_parallelism():
    # The dense instance (conftest): P = 106496; dp1 tp1 cp2 shards Adam over dp*cp = 2.
    cost = moe_cost(actor__experts=None, actor__experts_per_token=None, actor__expert_ffn_dim=None)
    strategy = Strategy(1, 1, 1, 1, cp=2)
    assert cost.train_states("actor", strategy) == 4 * 106_496 + 12 * 106_496 / 2
    # zero3: 16P/(tp*pp*dp*cp) = 16*106496/2.
    zero3 = Strategy(1, 1, 1, 1, sharding="zero3", cp=2)
    assert cost.train_states("actor", zero3) == 16 * 106_496 / 2


def test_refit_and_pub_lag_move_the_destination_shard():
    cost = moe_cost()
    engine = rollout(2, 2, ep=4)
    # shard 2*(57856/2 + 49152/4) = 82432 B at half the 1e9 B/s memory bandwidth.
    assert cost.colocation.refit_ipc("actor", engine) == pytest.approx(82_432 / 5e8, rel=1e-12)
    # another block: alpha_p2p + 82432 * 1e-9.
    assert cost.pub_lag("actor", False, False, "g", engine) == pytest.approx(
        2e-6 + 82_432e-9, rel=1e-12
    )
    # an offloaded train vertex moves its states: zero1 dp4 ep4, 601_600 B at 25e9 B/s.
    offloaded = Strategy(4, 1, 1, 1, offload=True, ep=4)
    assert cost.colocation.onload(TRAIN.kind, "actor", offloaded) == pytest.approx(
        601_600 / 25e9, rel=1e-12
    )


def test_activations_of_an_moe_layer():
    cost = moe_cost()
    # A = dp2 tp2 ep2: b = 2 sequences of 8, 16 tokens. Dense layer (no flash attention):
    # (34*64*16 + 5*4*2*64)/(tp*cp) = (34816 + 2560)/2 = 18688.
    # Experts: 1.5 * k*16 slots * (2*64*etp + 3*32) * 2 B / tp = 48*224*2/2 = 10752.
    a = Strategy(2, 1, 2, 1, ep=2)
    assert cost.layer_activations("actor", a, 2) == (18_688.0, 18_688.0 + 10_752.0)
    # dp1 tp2 cp2 (ep 1, no imbalance): 32 tokens, (34*64*32 + 5*4*4*64)/4 = 18688;
    # experts 2 * 16 slots per GPU-row-set * 224 * 2 / 2 = 7168.
    context = Strategy(1, 1, 2, 1, cp=2)
    assert cost.layer_activations("actor", context, 4) == (18_688.0, 25_856.0)
    # logits over tp*cp: 4 * 32 tokens * 256 / 4 = 8192.
    assert cost.logits_bytes("actor", context, 4) == 8_192.0


def test_train_footprint_of_an_moe_model():
    cost = moe_cost()
    # A: one microbatch in flight, both layers MoE: 2 * 29440 + logits 4*16*256/2 = 67_072.
    a = Strategy(2, 1, 2, 1, ep=2)
    assert cost.footprint(TRAIN, a).transient == 67_072.0
    # zero3 adds two gathered MoE layers: 2 * 2*((12288 + 256)/tp + 4*6144/(ep*etp))
    # = 2 * 2*(6272 + 12288) = 74_240.
    zero3 = Strategy(2, 1, 2, 1, sharding="zero3", ep=2)
    assert cost.footprint(TRAIN, zero3).transient == 67_072.0 + 74_240.0


def test_stage_activations_count_the_moe_layers_of_the_stage():
    # 3 layers, the first dense, pp 1: 2 MoE layers (29440) + 1 dense (18688) under A.
    cost = moe_cost(actor__layers=3, actor__dense_layers=1)
    a = Strategy(2, 1, 2, 1, ep=2)
    assert cost.stage_activation_bytes("actor", a, 2, 1) == 2 * 29_440.0 + 18_688.0


def test_mla_activations():
    # d 64, 4 heads of rope 4 + nope 8, values 8, query rank 16, latent 8:
    # 3*64 + 2*(8+4) + 4*4*(4+8) + 4*4*8 + 2*16 = 192 + 24 + 192 + 128 + 32 = 568;
    # the layer: (34 - 11)*64 + 568 = 1472 + 568 = 2040 bytes per token.
    mla = ModelSpec(
        2, 64, 128, 256, head_dim=16, attention="mla", q_lora_rank=16, kv_lora_rank=8,
        qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8,
    )  # fmt: skip
    assert mla_attention_activations(mla) == 568.0
    assert layer_activation_width(mla) == 2040.0
    # grouped-query attention keeps Korthikanti's 34*d.
    assert layer_activation_width(ModelSpec(2, 64, 128, 256, head_dim=16)) == 34.0 * 64
