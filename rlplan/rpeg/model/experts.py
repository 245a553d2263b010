"""Mixture-of-experts and context-parallel terms of the cost model
(docs/cost-model.md#mixtures-of-experts).

:class:`ExpertTerms` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`:
the per-expert token count and its GEMM time, the all-to-all of the routed
tokens, the ring exchange of context parallelism, the split of the weights
into a dense part (sharded ``tp`` ways) and the routed experts (sharded
``ep*etp`` ways), their gradient synchronisation and the experts'
activations. Every term is 0 for a dense model, and a dense model's numbers
are computed by the same operations as before these terms existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlplan.rpeg.model.blocks import LEVEL_ORDER
from rlplan.rpeg.model.parameters import (
    attention_parameters,
    expert_parameters,
    gates,
    layer_parameters,
    router_parameters,
    shared_expert_parameters,
)
from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.parallel_layout import expert_data_parallel

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy


def is_rollout(strategy: Strategy) -> bool:
    """Whether ``strategy`` is a rollout engine's (it has a cap on running sequences)."""
    return strategy.max_num_seqs > 0


def expert_split(strategy: Strategy) -> tuple[int, int]:
    """(GPUs sharing one copy of the experts, ways each expert is split) of ``strategy``.

    Train and infer: ``(ep, etp)``. A rollout: ``(ep, 1)`` with expert
    parallelism (each GPU holds ``E/ep`` whole experts), else ``(1, tp)``
    (the experts are tp-sharded like a dense feed-forward block).
    """
    if strategy.max_num_seqs > 0:
        return (strategy.ep, 1) if strategy.ep > 1 else (1, strategy.tp)
    return strategy.ep, strategy.etp


def moe_dense_parameters(spec: ModelSpec) -> int:
    """Parameters of an MoE layer that every token uses: attention, router and shared experts."""
    return attention_parameters(spec) + router_parameters(spec) + shared_expert_parameters(spec)


def context_kv_bytes(spec: ModelSpec, tp: int) -> float:
    """Bytes of one token's keys and values of one layer on one GPU (the ring exchange).

    Grouped-query: ``2*kv*h*2 / min(tp, kv)``. Multi-head latent attention
    exchanges the up-projected keys and values of its ``heads / tp`` heads,
    ``2*n*(r + o + v) / tp``: Megatron-Core passes them, not the latent, to the
    context-parallel attention (NVIDIA/Megatron-LM
    megatron/core/transformer/multi_latent_attention.py at 003b4ce2,
    ``core_attention`` built with ``k_channels = qk_head_dim +
    qk_pos_emb_head_dim`` and ``v_channels = v_head_dim``).
    """
    if spec.attention == MLA:
        width = spec.heads * (spec.qk_rope_head_dim + spec.qk_nope_head_dim + spec.v_head_dim)
        return width * BF16 / tp
    return 2 * spec.kv_heads * spec.head_dim * BF16 / min(tp, spec.kv_heads)


def worse_level(first: str, second: str) -> str:
    """The slower of two communication levels (g < n < r)."""
    return first if LEVEL_ORDER[first] >= LEVEL_ORDER[second] else second


class ExpertTerms:
    """Expert, all-to-all and context-parallel terms, a part of the cost model."""

    def imbalance(self, strategy: Strategy) -> float:
        """Routed tokens of the busiest GPU per mean: ``moe_imbalance`` when ``ep > 1``, else 1.

        Without expert parallelism every GPU holds every expert (whole or
        split), so it computes the routed tokens of its own tokens only.
        """
        return self.hardware.moe_imbalance if expert_split(strategy)[0] > 1 else 1.0

    def expert_rows(self, spec: ModelSpec, strategy: Strategy, tokens: float) -> float:
        """Tokens of one expert GEMM, ``M_e = k*M*ep*etp / (tp*E)``, for ``M`` tokens per GPU.

        A GPU's ``M/tp`` tokens (sequence parallel) route ``k`` slots each; its
        ``E/ep`` experts are split ``etp`` ways.
        """
        ep, etp = expert_split(strategy)
        return spec.experts_per_token * tokens * ep * etp / (strategy.tp * spec.experts)

    def expert_gemm(self, spec: ModelSpec, strategy: Strategy, tokens: float) -> float:
        """Seconds of one MoE layer's routed-expert GEMMs for ``tokens`` per GPU (one pass).

        ``imbalance * 2*k*c*d*f_e*M/tp / (F * eff(M_e, f_e/etp))``: under balance
        a GPU computes ``1/tp`` of its replica's routed FLOPs; the inner
        dimension is the split one, ``f_e/etp`` (as ``d/tp`` for dense GEMMs).
        """
        etp = expert_split(strategy)[1]
        flops = 2 * spec.experts_per_token * expert_parameters(spec) * tokens / strategy.tp
        rows = self.expert_rows(spec, strategy, tokens)
        eff = self.efficiency(rows, spec.expert_ffn_dim / etp)
        return self.imbalance(strategy) * flops / (self.hardware.flops_per_gpu * eff)

    def all_to_all(
        self, spec: ModelSpec, strategy: Strategy, tokens: float, levels: tuple[str, ...]
    ) -> float:
        """Seconds of one MoE layer's dispatch and combine (one pass) over the ep group.

        Each moves ``imbalance * k*(M/tp)*d*2`` bytes per GPU, ``1/ep`` of it to
        each peer, every level's share over its own link:
        ``alpha_far + max over levels of (peers_l/ep * bytes * beta_l)``
        (:meth:`~rlplan.rpeg.model.cost.CostModel.alltoall`, peers from
        ``levels.ep_peers``); 0 for ep = 1.
        """
        ep = expert_split(strategy)[0]
        if ep <= 1:
            return 0.0
        slots = spec.experts_per_token * tokens / strategy.tp
        nbytes = self.imbalance(strategy) * slots * spec.hidden_dim * BF16
        return 2 * self.alltoall(nbytes, ep, levels.ep_peers)

    def context_ring(
        self, spec: ModelSpec, strategy: Strategy, tokens: float, levels: tuple[str, ...]
    ) -> float:
        """Seconds of one layer's ring exchange of K and V (one pass): ``(cp-1)`` p2p steps.

        Each step moves this GPU's chunk, ``tokens`` (already ``T/cp``) times
        :func:`context_kv_bytes`, at the cp level; not overlapped with compute.
        """
        cp = strategy.cp
        if cp <= 1:
            return 0.0
        return (cp - 1) * self.p2p(tokens * context_kv_bytes(spec, strategy.tp), levels[3])

    # -- the weights' two parts -----------------------------------------------------

    def shard_parts(self, model: str, strategy: Strategy) -> tuple[float, float]:
        """bf16 bytes per GPU of (the dense part, the routed experts).

        ``2*P_dense/(tp*pp)`` and ``2*P_routed/(ep*etp*pp)`` with the
        effective split of :func:`expert_split`; (``2P/(tp*pp)``, 0) for a dense model.
        """
        params, routed = self.parameters[model], self.routed[model]
        tp, pp = strategy.tp, strategy.pp
        if not routed:
            return BF16 * params / (tp * pp), 0.0
        ep, etp = expert_split(strategy)
        return BF16 * (params - routed) / (tp * pp), BF16 * routed / (ep * etp * pp)

    def state_copies(self, strategy: Strategy) -> tuple[int, int]:
        """Ranks sharing (the dense part, the routed experts) of a stage: ``dp*cp`` and edp."""
        dp, cp = strategy.dp, strategy.cp
        ep, etp = expert_split(strategy)
        return dp * cp, expert_data_parallel(dp, strategy.tp, cp, ep, etp)

    def gradient_sync(
        self, model: str, strategy: Strategy, levels: tuple[str, ...], zero3: bool
    ) -> float:
        """Seconds of one gradient synchronisation of a stage's shard.

        ZeRO-1/2 (once per optimizer step): an all-reduce of the dense part over
        ``dp*cp`` ranks and one of the routed part over edp. ZeRO-3 (per
        microbatch): all-gather forward and backward and a reduce-scatter, of
        each part over the same ranks. Both run at the worse of the dp and cp
        levels (the expert copies lie in the same ranks).
        """
        dense, routed = self.shard_parts(model, strategy)
        ranks, copies = self.state_copies(strategy)
        level = levels[2] if strategy.cp == 1 else worse_level(levels[2], levels[3])
        if zero3:
            comm = 3 * self.allgather(dense, ranks, level)
            if routed:
                comm += 3 * self.allgather(routed, copies, level)
            return comm
        sync = self.allreduce(dense, ranks, level)
        if routed:
            sync += self.allreduce(routed, copies, level)
        return sync

    # -- activations ------------------------------------------------------------------

    def expert_activations(self, spec: ModelSpec, strategy: Strategy, tokens: float) -> float:
        """Bytes of one MoE layer's routed-expert activations, times ``tp*cp``, for ``tokens``.

        Per token-slot an expert keeps its input and the combine's copy of its
        output (``2*d``) and its ``c*f_e/etp`` intermediates (gate and up
        outputs, the activation's output; 2 for an ungated block), in bf16; a
        GPU holds ``imbalance * k*M*etp/tp`` slots. An estimate in the
        accounting of Korthikanti et al. 2022 (inputs of each GEMM and of the
        activation); Megatron-LM's theoretical_memory_usage.py counts no MoE
        activations. The caller divides by ``tp*cp``.
        """
        etp = expert_split(strategy)[1]
        width = 2 * spec.hidden_dim * etp + gates(spec) * spec.expert_ffn_dim
        slots = self.imbalance(strategy) * spec.experts_per_token * tokens
        return slots * width * BF16

    def gathered_layer(self, spec: ModelSpec, strategy: Strategy) -> float:
        """bf16 bytes per GPU of the largest layer ZeRO-3 gathers.

        A dense layer ``2*P_l/tp``; an MoE layer ``2*(P_attn + router +
        shared)/tp + 2*E*c*d*f_e/(ep*etp)``, the larger one when both exist.
        """
        if not spec.is_moe:
            return BF16 * layer_parameters(spec) / strategy.tp
        ep, etp = expert_split(strategy)
        moe = BF16 * (
            moe_dense_parameters(spec) / strategy.tp
            + spec.experts * expert_parameters(spec) / (ep * etp)
        )
        if spec.dense_layers:
            return max(moe, BF16 * layer_parameters(spec) / strategy.tp)
        return moe
