"""Per-GPU memory of train and infer vertices: states, activations and logits.

docs/cost-model.md#memory. :class:`MemoryTerms` is a part of
:class:`~rlplan.rpeg.model.cost.CostModel`; it reads the instance, hardware
and workload the cost model holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlplan.rpeg.model.parameters import has_scalar_head, has_value_head, layer_parameters
from rlplan.rpeg.model.units import (
    ACTIVATION_ATTENTION,
    ACTIVATION_CONSTANT,
    ADAM_BYTES,
    BF16,
    CHECKPOINT_BYTES,
    FP32,
    STATE_BYTES,
)
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


class MemoryTerms:
    """Memory of model states and working sets, a part of the cost model."""

    def weight_shard(self, model: str, strategy: Strategy) -> float:
        """bf16 weight bytes per GPU in a (tp, pp) layout: ``2P/(tp*pp)``."""
        return BF16 * self.parameters[model] / (strategy.tp * strategy.pp)

    def train_states(self, model: str, strategy: Strategy) -> float:
        """Weights, gradients and Adam states per GPU.

        zero1: ``2P/(tp*pp) + 2P/(tp*pp) + 12P/(tp*pp*dp)``; zero3: ``16P/(tp*pp*dp)``.
        """
        params, dp, pp, tp = self.parameters[model], strategy.dp, strategy.pp, strategy.tp
        if strategy.sharding == Sharding.ZERO3:
            return STATE_BYTES * params / (tp * pp * dp)
        return 2 * BF16 * params / (tp * pp) + ADAM_BYTES * params / (tp * pp * dp)

    def activation_bytes(self, model: str, strategy: Strategy, sequences: float) -> float:
        """Activations of one layer for one microbatch of ``sequences``.

        ``(34*d*tokens + 5*a*sum(l^2)) / tp``, the attention term only without
        flash attention.
        """
        spec = self.instance.models[model]
        tokens = sequences * self.sequence_tokens
        total = ACTIVATION_CONSTANT * spec.hidden_dim * tokens
        if not self.engine.flash_attention:
            total += ACTIVATION_ATTENTION * spec.heads * sequences * self.sequence_square
        return total / strategy.tp

    def logits_bytes(self, model: str, strategy: Strategy, sequences: float) -> float:
        """fp32 logits of one microbatch on the last stage: ``4*tokens*V/tp`` (1 for scalars).

        The fused ``ac`` holds the vocabulary logits and one value per token (V + 1).
        """
        spec = self.instance.models[model]
        width = 1 if has_scalar_head(model) else spec.vocab_size + has_value_head(model)
        return FP32 * sequences * self.sequence_tokens * width / strategy.tp

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
                kept = CHECKPOINT_BYTES * spec.hidden_dim * b * self.sequence_tokens / strategy.tp
                activations = in_flight * stage_layers * kept + layer
            else:
                activations = in_flight * stage_layers * layer
            working = activations + logits
            if strategy.sharding == Sharding.ZERO3:
                # Two gathered layers (the one computing and the one prefetched).
                working += 2 * BF16 * layer_parameters(spec) / strategy.tp
        else:
            states = self.weight_shard(model, strategy)
            working = layer + logits
        if strategy.offload:
            return Footprint(0.0, states + working)
        return Footprint(states, working)
