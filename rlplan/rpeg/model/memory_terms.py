"""Per-GPU memory of train and infer vertices: states, activations and logits.

docs/cost-model.md#memory. :class:`MemoryTerms` is a part of
:class:`~rlplan.rpeg.model.cost.CostModel`; it reads the instance, hardware
and workload the cost model holds. A mixture of experts splits its weights
into a dense part (``tp`` ways) and its routed experts (``ep*etp`` ways), and
its states over ``dp*cp`` and the expert copies edp
(:mod:`rlplan.rpeg.model.experts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlplan.rpeg.model.parameters import has_scalar_head, has_value_head
from rlplan.rpeg.model.units import (
    ACTIVATION_ATTENTION,
    ACTIVATION_CONSTANT,
    ACTIVATION_DENSE_ATTENTION,
    ADAM_BYTES,
    BF16,
    CHECKPOINT_BYTES,
    FP32,
    STATE_BYTES,
)
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.strategy import Recompute, Sharding
from rlplan.rpeg.templates import Kind, Vertex

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy


@dataclass(frozen=True, slots=True)
class Footprint:
    """Per-GPU memory of a vertex on its block.

    ``resident`` is what the model keeps while placed there (weights, and for
    a train vertex gradients and Adam states); ``transient`` exists only
    while the vertex runs (activations, logits, KV pool, offloaded states).
    """

    resident: float
    transient: float

    @property
    def total(self) -> float:
        """Resident plus transient bytes."""
        return self.resident + self.transient


def mla_attention_activations(spec: ModelSpec) -> float:
    """Bytes per token a multi-head latent attention keeps for its backward.

    Korthikanti et al.'s accounting of attention (its ``11*d``: the bf16
    inputs of the projections, of the score and value products and of the
    output projection, and the output's 1-byte dropout mask) at MLA's widths:
    the input ``2d``, the query latent ``2*c_q`` (when queries are
    compressed), the key-value latent and rotary key ``2*(c_kv + r)``, the
    queries and keys ``2*2*n*(r+o)``, the values and the attention output
    ``2*2*n*v``, the mask ``d``. An estimate: no framework publishes one.
    """
    d, n = spec.hidden_dim, spec.heads
    rope, nope, v = spec.qk_rope_head_dim, spec.qk_nope_head_dim, spec.v_head_dim
    total = 3 * d + 2 * (spec.kv_lora_rank + rope) + 4 * n * (rope + nope) + 4 * n * v
    if spec.q_lora_rank:
        total += 2 * spec.q_lora_rank
    return float(total)


def layer_activation_width(spec: ModelSpec) -> float:
    """Activation bytes per token of a dense layer before any split: ``34*d``.

    Multi-head latent attention replaces the attention's ``11*d`` of those
    by :func:`mla_attention_activations`.
    """
    if spec.attention == MLA:
        rest = (ACTIVATION_CONSTANT - ACTIVATION_DENSE_ATTENTION) * spec.hidden_dim
        return rest + mla_attention_activations(spec)
    return ACTIVATION_CONSTANT * spec.hidden_dim


class MemoryTerms:
    """Memory of model states and working sets, a part of the cost model."""

    def weight_shard(self, model: str, strategy: Strategy) -> float:
        """bf16 weight bytes per GPU: ``2P/(tp*pp)``; an MoE model's
        ``2*(P_dense/(tp*pp) + P_routed/(ep*etp*pp))``.

        A rollout's experts are split ``ep`` ways with expert parallelism, else
        ``tp`` ways (:func:`~rlplan.rpeg.model.experts.expert_split`).
        """
        if not self.routed[model]:
            return BF16 * self.parameters[model] / (strategy.tp * strategy.pp)
        dense, routed = self.shard_parts(model, strategy)
        return dense + routed

    def train_states(self, model: str, strategy: Strategy) -> float:
        """Weights, gradients and Adam states per GPU.

        zero1: ``2P/(tp*pp) + 2P/(tp*pp) + 12P/(tp*pp*dp*cp)``; zero3:
        ``16P/(tp*pp*dp*cp)``. An MoE model's routed part is split
        ``ep*etp*pp`` ways instead of ``tp*pp``, and its states over the edp
        expert copies instead of ``dp*cp``.
        """
        params, routed = self.parameters[model], self.routed[model]
        dp, pp, tp, cp = strategy.dp, strategy.pp, strategy.tp, strategy.cp
        if not routed:
            if strategy.sharding == Sharding.ZERO3:
                return STATE_BYTES * params / (tp * pp * dp * cp)
            return 2 * BF16 * params / (tp * pp) + ADAM_BYTES * params / (tp * pp * dp * cp)
        dense, experts = self.shard_parts(model, strategy)
        ranks, copies = self.state_copies(strategy)
        # Weight bytes of each part per GPU once sharded over its copies.
        sharded = dense / ranks + experts / copies
        if strategy.sharding == Sharding.ZERO3:
            return STATE_BYTES / BF16 * sharded
        return 2 * (dense + experts) + ADAM_BYTES / BF16 * sharded

    def layer_activations(
        self, model: str, strategy: Strategy, sequences: float
    ) -> tuple[float, float]:
        """Activations of (a dense layer, an MoE layer) for one microbatch of ``sequences``.

        ``(34*d*tokens + 5*a*sum(l^2)) / (tp*cp)``, the attention term only
        without flash attention; an MoE layer adds its routed experts'
        (:meth:`~rlplan.rpeg.model.experts.ExpertTerms.expert_activations`).
        A dense model returns its layer twice.
        """
        spec = self.instance.models[model]
        tokens = sequences * self.sequence_tokens
        total = layer_activation_width(spec) * tokens
        if not self.engine.flash_attention:
            total += ACTIVATION_ATTENTION * spec.heads * sequences * self.sequence_square
        split = strategy.tp * strategy.cp
        dense = total / split
        if not spec.is_moe:
            return dense, dense
        experts = self.expert_activations(spec, strategy, tokens / strategy.cp)
        return dense, dense + experts / strategy.tp

    def activation_bytes(self, model: str, strategy: Strategy, sequences: float) -> float:
        """Activations of the largest layer (an MoE layer's, if any) for ``sequences``."""
        return self.layer_activations(model, strategy, sequences)[1]

    def stage_activation_bytes(
        self, model: str, strategy: Strategy, sequences: float, in_flight: int
    ) -> float:
        """Activations of every layer of the slowest stage for ``in_flight`` microbatches.

        ``L_s`` layers, of which ``min(L_s, moe_layers)`` MoE layers (the
        largest ones).
        """
        spec = self.instance.models[model]
        stage_layers = math.ceil(spec.layers / strategy.pp)
        dense, moe = self.layer_activations(model, strategy, sequences)
        if not spec.is_moe:
            return in_flight * stage_layers * dense
        most = min(stage_layers, spec.moe_layers)
        return in_flight * (most * moe + (stage_layers - most) * dense)

    def logits_bytes(self, model: str, strategy: Strategy, sequences: float) -> float:
        """fp32 logits of one microbatch on the last stage: ``4*tokens*V/(tp*cp)`` (1 for scalars).

        The fused ``ac`` holds the vocabulary logits and one value per token (V + 1).
        """
        spec = self.instance.models[model]
        width = 1 if has_scalar_head(model) else spec.vocab_size + has_value_head(model)
        return FP32 * sequences * self.sequence_tokens * width / (strategy.tp * strategy.cp)

    def footprint(self, vertex: Vertex, strategy: Strategy) -> Footprint:
        """Per-GPU resident and transient bytes of ``vertex`` under ``strategy``."""
        model = vertex.model
        spec = self.instance.models[model]
        stage_layers = math.ceil(spec.layers / strategy.pp)
        if vertex.kind is Kind.GENERATE:
            # The engine takes u*M when it starts (its own weights, workspace and KV
            # pool) and frees it all when it sleeps: nothing stays between runs.
            return Footprint(0.0, self.engine_bytes(strategy))
        b = self.microbatch_sequences(strategy)
        layer = self.activation_bytes(model, strategy, b)
        logits = self.logits_bytes(model, strategy, b)
        if vertex.kind is Kind.TRAIN:
            states = self.train_states(model, strategy)
            # 1F1B keeps at most pp microbatches in flight, and no more than one
            # mini-batch holds (the pipeline drains at every optimizer step).
            mini_batch = max(strategy.microbatches // self.workload.optimizer_steps, 1)
            in_flight = min(strategy.pp, mini_batch)
            if strategy.recompute == Recompute.FULL:
                split = strategy.tp * strategy.cp
                kept = CHECKPOINT_BYTES * spec.hidden_dim * b * self.sequence_tokens / split
                activations = in_flight * stage_layers * kept + layer
            else:
                activations = self.stage_activation_bytes(model, strategy, b, in_flight)
            working = activations + logits
            if strategy.sharding == Sharding.ZERO3:
                # Two gathered layers (the one computing and the one prefetched).
                working += 2 * self.gathered_layer(spec, strategy)
        else:
            states = self.weight_shard(model, strategy)
            working = layer + logits
        if strategy.offload:
            return Footprint(0.0, states + working)
        return Footprint(states, working)
