"""One microbatch through the slowest pipeline stage
(docs/cost-model.md#one-microbatch-through-the-slowest-stage).

:class:`StageTerms` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`.
A stage holds ``L_s = ceil(L/pp)`` layers and the output head. A dense
layer's GEMMs (attention and feed-forward) and an MoE layer's attention,
router and shared experts are one GEMM call split ``tp`` ways; the routed
experts are priced apart at their per-expert token count
(:mod:`rlplan.rpeg.model.experts`). With context parallelism a GPU holds
``1/cp`` of every sequence's tokens and of its causal attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from rlplan.rpeg.model.experts import is_rollout, moe_dense_parameters
from rlplan.rpeg.model.parameters import (
    attention_parameters,
    head_parameters,
    layer_parameters,
)
from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.strategy import Recompute

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy
    from rlplan.rpeg.schema.models import ModelSpec


class StageParts(NamedTuple):
    """Seconds of one microbatch pass through the slowest stage, by part.

    Attributes
    ----------
    dense_gemm
        The one GEMM call of attention, dense feed-forward blocks (an MoE
        layer's router and shared experts) and the head.
    experts
        The routed experts' GEMMs (load imbalance included).
    non_gemm
        ``L_s * non_gemm_time(M)``.
    tp_comm, all_to_all, cp_comm, pp_comm
        The tp all-reduces, the MoE dispatch and combine, the cp ring
        exchange of K and V, and the pipeline p2p.
    dispatch
        The MoE layers' fixed time per pass, ``moe_layers *``
        :meth:`StageTerms.dispatch_time` (0 for a rollout).
    moe_layers
        MoE layers of this stage (0 for a dense model).
    """

    dense_gemm: float
    experts: float
    non_gemm: float
    tp_comm: float
    all_to_all: float
    cp_comm: float
    pp_comm: float
    moe_layers: int
    dispatch: float = 0.0

    @property
    def gemm(self) -> float:
        """All GEMM seconds (the kernel ratio applies to them)."""
        return self.dense_gemm + self.experts

    @property
    def comm(self) -> float:
        """Paid once per pass and layer: tp, all-to-all, cp and the MoE layers' fixed time."""
        return self.tp_comm + self.all_to_all + self.cp_comm + self.dispatch


class StageTerms:
    """The slowest stage of a strategy, a part of the cost model."""

    def _stage_parts(
        self,
        model: str,
        strategy: Strategy,
        sequences: float,
        tokens_per_sequence: float,
        square_per_sequence: float,
        levels: tuple[str, ...],
        moe_layers: int = 0,
    ) -> StageParts:
        """One microbatch of ``sequences`` through a stage with ``moe_layers`` MoE layers.

        ``tokens_per_sequence`` is the mean length and ``square_per_sequence``
        the mean squared length (attention FLOPs ``2*l^2*q`` per layer, ``q``
        the query width, ``d`` for most models), both divided by ``cp``.
        """
        spec = self.instance.models[model]
        layer_params, moe_params, head_params = self.stage_parameters[model]
        d, tp, pp, cp = spec.hidden_dim, strategy.tp, strategy.pp, strategy.cp
        stage_layers = math.ceil(spec.layers / pp)
        tokens = sequences * tokens_per_sequence / cp
        attention = 2 * square_per_sequence * spec.q_width * sequences / cp
        layer_flops = (2 * layer_params * tokens + attention) / tp
        head_flops = 2 * head_params * tokens / tp
        experts = all_to_all = cp_comm = dispatch = 0.0
        if moe_layers:
            if not is_rollout(strategy):
                dispatch = moe_layers * self.dispatch_time(spec, strategy)
            moe_flops = (2 * moe_params * tokens + attention) / tp
            flops = (stage_layers - moe_layers) * layer_flops + moe_layers * moe_flops + head_flops
            experts = moe_layers * self.expert_gemm(spec, strategy, tokens)
            all_to_all = moe_layers * self.all_to_all(spec, strategy, tokens, levels)
        else:
            flops = stage_layers * layer_flops + head_flops
        gemm = self.gemm_time(flops, tokens, d / tp)
        non_gemm = stage_layers * self.non_gemm_time(tokens)
        tp_comm = (
            stage_layers * 2 * self.allreduce(tokens * d * BF16, tp, levels[0]) if tp > 1 else 0.0
        )
        if cp > 1:
            cp_comm = stage_layers * self.context_ring(spec, strategy, tokens, levels)
        pp_comm = self.p2p(tokens * d * BF16, levels[1]) if pp > 1 else 0.0
        return StageParts(
            gemm, experts, non_gemm, tp_comm, all_to_all, cp_comm, pp_comm, moe_layers, dispatch
        )

    def dispatch_time(self, spec: ModelSpec, strategy: Strategy) -> float:
        """Fixed seconds of one MoE layer's pass on a train or infer GPU.

        ``hardware.moe_expert_overhead`` per expert the GPU holds, ``E / ep``
        (docs/cost-model.md#the-moe-layers-fixed-time).
        """
        return spec.experts / strategy.ep * self.hardware.moe_expert_overhead

    def _slowest_stage(
        self,
        model: str,
        strategy: Strategy,
        sequences: float,
        tokens_per_sequence: float,
        square_per_sequence: float,
        levels: tuple[str, ...],
        weigh: Callable[[StageParts], float],
    ) -> StageParts:
        """The stage of ``L_s`` layers whose pass ``weigh`` makes slowest.

        A stage holds between ``max(0, L_s - dense_layers)`` and
        ``min(L_s, moe_layers)`` MoE layers; its time is linear in that count,
        so the slowest is one of the two ends (one stage when they agree: a
        dense model, pp = 1, no dense layers).
        """
        spec = self.instance.models[model]
        args = (model, strategy, sequences, tokens_per_sequence, square_per_sequence, levels)
        if not spec.is_moe:
            return self._stage_parts(*args)
        stage_layers = math.ceil(spec.layers / strategy.pp)
        most = min(stage_layers, spec.moe_layers)
        slowest = self._stage_parts(*args, most)
        fewest = max(0, stage_layers - spec.dense_layers)
        if fewest < most:
            other = self._stage_parts(*args, fewest)
            if weigh(other) > weigh(slowest):
                slowest = other
        return slowest

    def _forward_weight(self, parts: StageParts) -> float:
        """Seconds of one forward pass of a stage (infer, prefill)."""
        return self.kernel_time(parts.gemm) + parts.non_gemm + parts.comm + parts.pp_comm

    def _train_or_infer_stage(
        self,
        model: str,
        strategy: Strategy,
        levels: tuple[str, ...],
        weigh: Callable[[StageParts], float],
    ) -> StageParts:
        """The slowest stage of a train or infer microbatch (``b`` sequences of E[S+T])."""
        b = self.microbatch_sequences(strategy)
        return self._slowest_stage(
            model, strategy, b, self.sequence_tokens, self.sequence_square, levels, weigh
        )

    @staticmethod
    def train_passes(strategy: Strategy) -> tuple[int, int]:
        """(forward-equivalents of GEMM, passes of everything else) of a train microbatch.

        (3, 2): forward and backward; (4, 3) with full recompute.
        """
        if strategy.recompute == Recompute.FULL:
            return 4, 3
        return 3, 2

    def _train_weight(self, parts: StageParts, strategy: Strategy) -> float:
        """Seconds of one train microbatch through a stage."""
        forwards, passes = self.train_passes(strategy)
        return (
            forwards * self.kernel_time(parts.gemm)
            + passes * (parts.non_gemm + parts.comm)
            + 2 * parts.pp_comm
        )

    def _stage_forward(
        self,
        model: str,
        strategy: Strategy,
        sequences: float,
        tokens_per_sequence: float,
        square_per_sequence: float,
        levels: tuple[str, ...],
    ) -> tuple[float, float, float, float]:
        """One forward microbatch through the slowest stage: (gemm, non-gemm, comm, pp comm).

        ``comm`` holds the tp all-reduces, the MoE all-to-all and the cp ring
        (each paid once per layer and pass); see :meth:`_stage_parts`.
        """
        parts = self._slowest_stage(
            model,
            strategy,
            sequences,
            tokens_per_sequence,
            square_per_sequence,
            levels,
            self._forward_weight,
        )
        return parts.gemm, parts.non_gemm, parts.comm, parts.pp_comm

    def gemm_shares(
        self, model: str, strategy: Strategy, parts: StageParts, square_over_tokens: float
    ) -> tuple[float, float, float]:
        """Fractions of ``parts.dense_gemm`` spent in (attention, dense FFN, head), by FLOPs.

        ``square_over_tokens`` is ``E[l^2] / E[l]`` of the pass (the causal
        attention FLOPs per token are ``2 * that * q``). An MoE layer's router
        and shared experts count as dense FFN.
        """
        spec = self.instance.models[model]
        stage_layers = math.ceil(spec.layers / strategy.pp)
        moe = parts.moe_layers
        attention = stage_layers * (
            2 * attention_parameters(spec) + 2 * square_over_tokens * spec.q_width
        )
        ffn_dense = layer_parameters(spec) - attention_parameters(spec)
        ffn_moe = moe_dense_parameters(spec) - attention_parameters(spec) if moe else 0
        ffn = 2 * ((stage_layers - moe) * ffn_dense + moe * ffn_moe)
        head = 2 * head_parameters(spec, model)
        total = attention + ffn + head
        return attention / total, ffn / total, head / total
