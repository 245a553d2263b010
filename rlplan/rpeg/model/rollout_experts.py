"""Mixture-of-experts and latent-attention terms of a rollout
(docs/cost-model.md#mixture-of-experts-rollouts).

A rollout engine serves a mixture of experts in one of two ways. With
``ep = 1`` (the engines' default) every GPU of a tp group holds a 1/tp slice
of every expert, like a dense feed-forward block. With ``ep > 1`` (vLLM
``enable_expert_parallel`` with data-parallel attention, SGLang ``--ep-size``
with ``--enable-dp-attention``) ``ep/tp`` attention replicas of tp GPUs each
share one copy of the experts: each GPU holds ``E/ep`` whole experts and the
tokens travel to them by an all-to-all.

:class:`RolloutExperts` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`
(through :class:`~rlplan.rpeg.model.rollout_time.RolloutTime`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rlplan.rpeg.model.experts import moe_dense_parameters
from rlplan.rpeg.model.parameters import (
    expert_parameters,
    head_parameters,
    layer_parameters,
)
from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.models import ModelSpec

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy

#: A token count or seconds: one value, or one per decode batch.
Amount = float | np.ndarray


def experts_touched(experts: int, per_token: int, tokens: Amount) -> np.ndarray:
    """Mean distinct experts ``tokens`` tokens use in one MoE layer: ``E*(1-(1-k/E)^B)``.

    Each token picks ``k`` of the ``E`` experts; under uniform routing an
    expert is missed by one token with probability ``1 - k/E``, by all
    ``B`` independently with ``(1 - k/E)^B``.
    """
    return experts * (1.0 - (1.0 - per_token / experts) ** np.asarray(tokens, dtype=np.float64))


def expert_group_tokens(tokens: Amount, tp: int, ep: int) -> Amount:
    """Tokens one copy of the experts sees when each attention replica brings ``tokens``.

    ``tokens`` with ep = 1 (the tp group is the expert group), ``tokens*ep/tp``
    with ep > 1 (ep/tp attention replicas share the experts).
    """
    return tokens if ep == 1 else tokens * ep / tp


def stage_layer_split(spec: ModelSpec, pp: int) -> tuple[int, int, int]:
    """(layers, MoE layers, dense layers) of the slowest stage: ``ceil(L/pp)`` layers of
    which ``min(ceil(L/pp), moe_layers)`` are MoE layers (the worst stage)."""
    layers = math.ceil(spec.layers / pp)
    moe = min(layers, spec.moe_layers)
    return layers, moe, layers - moe


def decode_attention_width(spec: ModelSpec) -> float:
    """Width ``w`` of a decode step's attention: ``4*l*w`` FLOPs per token and layer.

    Grouped-query attention: the query width ``q`` (score and value products
    of ``q`` each). Multi-head latent attention decodes in the absorbed,
    data-movement friendly form: every head scores its query against the
    cached latent and rotary key (``kv_lora_rank + qk_rope_head_dim`` wide)
    and sums the latent (``kv_lora_rank``), so ``w = heads*(2*kv_lora_rank +
    qk_rope_head_dim)/2`` (vllm-project/vllm
    vllm/v1/attention/backends/mla/common.py at
    00a817ada81626793c9e2432903ee4c5b33ab33a, "Data-Movement Friendly
    Approach (i.e. "_forward_decode")": "MQA with QK headdim = Lkv + R, V
    headdim = Lkv"). Prefill uses the compute-friendly form at ``q``.
    """
    if spec.attention == MLA:
        return spec.heads * (2 * spec.kv_lora_rank + spec.qk_rope_head_dim) / 2
    return spec.q_width


def stage_dense_parameters(spec: ModelSpec, model: str, pp: int) -> int:
    """Parameters of the slowest stage split tp ways: its dense layers, the non-routed
    part of its MoE layers and the head."""
    _, moe, dense = stage_layer_split(spec, pp)
    body = dense * layer_parameters(spec) + moe * moe_dense_parameters(spec)
    return body + head_parameters(spec, model)


class RolloutExperts:
    """Expert GEMMs, expert weight reads and the all-to-all of a rollout replica."""

    def _expert_gemm(
        self, spec: ModelSpec, strategy: Strategy, tokens: Amount, rows: Amount
    ) -> Amount:
        """Seconds of one GPU's routed-expert GEMMs on the slowest stage.

        ``tokens`` of its attention replica each use ``k`` experts, ``c*d*f_e``
        parameters each: ``2*k*c*d*f_e*tokens/tp`` FLOPs per MoE layer on one GPU
        (with ep > 1 the ep GPUs share the ``ep/tp`` replicas' tokens), at the
        efficiency of ``rows`` tokens per expert GEMM and inner width ``d/tp``
        (ep = 1: experts tp-sliced) or ``d`` (ep > 1: whole experts); the
        busiest GPU of an expert-parallel group pays ``hardware.moe_imbalance``.
        """
        ep, tp = strategy.ep, strategy.tp
        _, moe, _ = stage_layer_split(spec, strategy.pp)
        flops = moe * 2 * spec.experts_per_token * expert_parameters(spec) * tokens / tp
        inner = spec.hidden_dim if ep > 1 else spec.hidden_dim / tp
        seconds = flops / (self.hardware.flops_per_gpu * self.efficiency(rows, inner))
        return self.imbalance(strategy) * seconds

    def _expert_all_to_all(
        self, spec: ModelSpec, strategy: Strategy, tokens: Amount, peers: tuple[int, int, int]
    ) -> Amount:
        """Seconds of the slowest stage's all-to-alls when one GPU dispatches ``tokens``.

        Per MoE layer a dispatch and a combine, each an all-to-all of
        ``imbalance*k*tokens*d*2`` bytes over the expert group, whose
        ``peers`` are counted by level
        (:func:`~rlplan.rpeg.model.collectives.hierarchical_alltoall_time`)
        (0 without expert parallelism: the experts' tp reduction is the
        layer's tp all-reduce).
        """
        ep = strategy.ep
        if not spec.is_moe or ep == 1:
            return 0.0
        _, moe, _ = stage_layer_split(spec, strategy.pp)
        nbytes = self.imbalance(strategy) * spec.experts_per_token * tokens * spec.hidden_dim * BF16
        return moe * 2 * self.alltoall(nbytes, ep, peers)

    def _moe_decode_compute(
        self, model: str, strategy: Strategy, batch: np.ndarray, context: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """GEMM seconds and weight bytes of one decode stage step of an MoE or MLA model.

        ``batch`` sequences of the attention replica at ``context`` tokens.
        Weights read: the stage's dense part over tp plus, per MoE layer, the
        touched experts' share ``touched*c*d*f_e/e`` (e = ep if ep > 1, else tp),
        touched = :func:`experts_touched` of the expert group's tokens. FLOPs:
        the dense part's ``2*P*batch``, attention ``4*context*w*batch`` per layer
        (:func:`decode_attention_width`), over tp; the routed experts at
        ``k*B/touched`` rows per expert GEMM (:meth:`_expert_gemm`). Both stay
        affine in ``context`` for a fixed batch.
        """
        spec = self.instance.models[model]
        d, tp, pp = spec.hidden_dim, strategy.tp, strategy.pp
        layers, moe, _ = stage_layer_split(spec, pp)
        dense_params = stage_dense_parameters(spec, model, pp)
        flops = (
            2 * dense_params * batch + layers * 4 * context * decode_attention_width(spec) * batch
        ) / tp
        gemm = flops / (self.hardware.flops_per_gpu * self.efficiency(batch, d / tp))
        weight_bytes = BF16 * dense_params / tp * np.ones_like(batch)
        if moe:
            group = expert_group_tokens(batch, tp, strategy.ep)
            touched = experts_touched(spec.experts, spec.experts_per_token, group)
            holders = strategy.ep if strategy.ep > 1 else tp
            weight_bytes = weight_bytes + BF16 * moe * touched * expert_parameters(spec) / holders
            rows = spec.experts_per_token * group / touched
            gemm = gemm + self._expert_gemm(spec, strategy, batch, rows)
        return gemm, weight_bytes

    def _decode_all_to_all(
        self, model: str, strategy: Strategy, active: np.ndarray, levels: tuple[str, ...]
    ) -> Amount:
        """All-to-all seconds of one decode stage step: each GPU of an attention replica
        dispatches the ``ceil(active/pp)`` tokens of its virtual batch (0 with ep = 1)."""
        spec = self.instance.models[model]
        if not spec.is_moe or strategy.ep == 1:
            return 0.0
        batch = np.ceil(active / strategy.pp - 1e-9)
        return self._expert_all_to_all(spec, strategy, batch, levels.ep_peers)
