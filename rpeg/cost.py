"""Cost and memory model (reference v1).

All quantities are SI: seconds, bytes, FLOP. Weights and activations are
bf16 (2 bytes). The formulas follow the specification's section 6; where it
leaves a choice open this module fixes it and says so:

* sequences per replica are ``ceil(B*K / dp)`` (the slowest replica decides)
  and sequences per microbatch ``ceil(replica / mb)``;
* the slowest pipeline stage holds ``ceil(L/pp)`` layers and the output head;
* training counts non-GEMM time for two passes (forward and backward);
* a decode step at context length l reads the stage's weight shard and the
  KV cache of the active sequences up to l, and adds ``4*l*d`` attention
  FLOPs per layer and token (the derivative of the causal ``2*l^2*d``);
* the max of GEMM and memory time of a decode step is taken per pipeline
  stage (all its layers and the head together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rpeg.blocks import Cluster
from rpeg.instance import Hardware, Instance, ModelSpec, Workload
from rpeg.templates import Kind, Vertex

BF16 = 2
FP32 = 4
#: Activation bytes per token and hidden unit of one layer in training
#: (the ``34 + 5*a*l/d`` rule), used for the train and infer transients.
ACTIVATION_CONSTANT = 34.0
ACTIVATION_ATTENTION = 5.0
#: Bytes of a data transfer per token of a sequence (token ids, log-probs,
#: values, rewards, advantages, masks).
DATA_BYTES_PER_TOKEN = 8


@dataclass(frozen=True, slots=True)
class Strategy:
    """Parallel strategy of a vertex on its block: ``dp*pp*tp`` GPUs, ``microbatches``."""

    dp: int
    pp: int
    tp: int
    microbatches: int

    @property
    def gpus(self) -> int:
        """GPUs the strategy needs."""
        return self.dp * self.pp * self.tp

    def label(self) -> str:
        """Short form, e.g. ``dp4 pp1 tp4 mb2``."""
        return f"dp{self.dp} pp{self.pp} tp{self.tp} mb{self.microbatches}"


def layer_parameters(spec: ModelSpec) -> int:
    """Parameters of one layer: ``d*(d + 2*kv*h) + d*d + c*d*f``.

    q/k/v projections (``d x (d + 2*kv*h)``), the output projection
    (``d x d``) and the feed-forward block (``c = 3`` gated, else 2).
    """
    d, f, h, kv = spec.hidden_dim, spec.ffn_dim, spec.head_dim, spec.kv_heads
    gates = 3 if spec.gated_ffn else 2
    return d * (d + 2 * kv * h) + d * d + gates * d * f


def head_parameters(spec: ModelSpec, model: str) -> int:
    """Output head: ``V*d`` for the language models, ``d`` for scalar heads (critic, reward)."""
    if model in ("critic", "reward"):
        return spec.hidden_dim
    return spec.vocab_size * spec.hidden_dim


def parameter_count(spec: ModelSpec, model: str) -> int:
    """Total parameters ``P = L*P_l + V*d + head``."""
    return (
        spec.layers * layer_parameters(spec)
        + spec.vocab_size * spec.hidden_dim
        + head_parameters(spec, model)
    )


def allreduce_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """Ring all-reduce: ``2(p-1)*alpha + 2(p-1)/p * n * beta`` (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes * beta


def p2p_time(nbytes: float, alpha: float, beta: float) -> float:
    """Point-to-point transfer: ``alpha + n * beta``."""
    return alpha + nbytes * beta


def activation_bytes_per_layer(spec: ModelSpec, length: int, sequences: int, tp: int) -> float:
    """Activations of one layer: ``l*b*d*(34 + 5*a*l/d)/tp`` bytes."""
    d = spec.hidden_dim
    return (
        length
        * sequences
        * d
        * (ACTIVATION_CONSTANT + ACTIVATION_ATTENTION * spec.heads * length / d)
        / tp
    )


def kv_bytes_per_sequence(spec: ModelSpec, layers: int, length: int, tp: int) -> float:
    """KV cache of one sequence: ``2*layers*kv*h*2*length / min(tp, kv)`` bytes."""
    return 2 * layers * spec.kv_heads * spec.head_dim * BF16 * length / min(tp, spec.kv_heads)


@dataclass(frozen=True, slots=True)
class Footprint:
    """Per-GPU memory of a vertex on its block.

    ``resident`` is what the model keeps while placed there (weights, and for
    a train vertex gradients and Adam states); ``transient`` exists only
    while the vertex runs (activations, logits, KV cache).
    """

    resident: float
    transient: float

    @property
    def total(self) -> float:
        """Resident plus transient bytes."""
        return self.resident + self.transient


class CostModel:
    """Time and memory of vertices, transfer lags, and lower-bound ingredients.

    Parameters
    ----------
    instance
        The validated instance.
    cluster
        Its cluster geometry (for communication levels).
    """

    def __init__(self, instance: Instance, cluster: Cluster | None = None) -> None:
        self.instance = instance
        self.hardware: Hardware = instance.hardware
        self.workload: Workload = instance.workload
        self.cluster = cluster or Cluster(instance.hardware, instance.placement.min_block_gpus)
        self.parameters = {
            model: parameter_count(spec, model) for model, spec in instance.models.items()
        }

    # -- building blocks -------------------------------------------------------

    def gemm_time(self, flops: float, tokens: float, inner: float) -> float:
        """``flops / (F * eff)`` with ``eff = M/(M+m_half) * K/(K+k_half)``."""
        return flops / (self.hardware.flops_per_gpu * self._efficiency(tokens, inner))

    def non_gemm_time(self, tokens: float) -> float:
        """Non-GEMM time of one layer and microbatch pass."""
        hw = self.hardware
        return hw.non_gemm_constant + hw.non_gemm_scaling * tokens / hw.non_gemm_batch_cal

    def allreduce(self, nbytes: float, ranks: int, level: str) -> float:
        """All-reduce at a level."""
        hw = self.hardware
        return allreduce_time(nbytes, ranks, hw.alpha_coll[level], hw.beta_coll[level])

    def p2p(self, nbytes: float, level: str) -> float:
        """Point-to-point transfer at a level."""
        hw = self.hardware
        return p2p_time(nbytes, hw.alpha_p2p[level], hw.beta_p2p[level])

    def replica_sequences(self, strategy: Strategy) -> int:
        """Sequences of the slowest data-parallel replica ``ceil(B*K/dp)``."""
        return math.ceil(self.workload.sequences / strategy.dp)

    def microbatch_sequences(self, strategy: Strategy) -> int:
        """Sequences per microbatch ``ceil(replica / mb)``."""
        return math.ceil(self.replica_sequences(strategy) / strategy.microbatches)

    # -- forward pass of one stage ----------------------------------------------

    def _stage_forward(
        self,
        model: str,
        strategy: Strategy,
        sequences: int,
        length: int,
        levels: tuple[str, str, str],
    ) -> tuple[float, float, float, float]:
        """One microbatch through the slowest stage: (gemm, non-gemm, tp comm, pp comm) seconds."""
        spec = self.instance.models[model]
        d, tp, pp = spec.hidden_dim, strategy.tp, strategy.pp
        stage_layers = math.ceil(spec.layers / pp)
        tokens = sequences * length
        layer_flops = (
            2 * layer_parameters(spec) * tokens + 2 * length * length * d * sequences
        ) / tp
        head_flops = 2 * head_parameters(spec, model) * tokens / tp
        gemm = self.gemm_time(stage_layers * layer_flops + head_flops, tokens, d / tp)
        non_gemm = stage_layers * self.non_gemm_time(tokens)
        tp_comm = (
            stage_layers * 2 * self.allreduce(tokens * d * BF16, tp, levels[0]) if tp > 1 else 0.0
        )
        pp_comm = self.p2p(tokens * d * BF16, levels[1]) if pp > 1 else 0.0
        return gemm, non_gemm, tp_comm, pp_comm

    # -- run time -----------------------------------------------------------------

    def run_time(self, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy) -> float:
        """Seconds of one run of ``vertex`` with ``strategy`` on a block of ``shape``."""
        levels = self.cluster.group_levels(shape, strategy.dp, strategy.pp, strategy.tp)
        if vertex.kind is Kind.INFER:
            return self._infer_time(vertex.model, strategy, levels)
        if vertex.kind is Kind.TRAIN:
            return self._train_time(vertex.model, strategy, levels)
        return self._generate_time(vertex.model, strategy, levels)

    def _infer_time(self, model: str, strategy: Strategy, levels: tuple[str, str, str]) -> float:
        b = self.microbatch_sequences(strategy)
        gemm, non_gemm, tp_comm, pp_comm = self._stage_forward(
            model, strategy, b, self.workload.total_length, levels
        )
        return (strategy.microbatches + strategy.pp - 1) * (gemm + non_gemm + tp_comm + pp_comm)

    def _train_time(self, model: str, strategy: Strategy, levels: tuple[str, str, str]) -> float:
        b = self.microbatch_sequences(strategy)
        gemm, non_gemm, tp_comm, pp_comm = self._stage_forward(
            model, strategy, b, self.workload.total_length, levels
        )
        stage = 3 * gemm + 2 * non_gemm + 2 * tp_comm + 2 * pp_comm
        gradient_bytes = BF16 * self.parameters[model] / (strategy.pp * strategy.tp)
        sync = self.allreduce(gradient_bytes, strategy.dp, levels[2])
        return (strategy.microbatches + strategy.pp - 1) * stage + sync

    def _generate_time(self, model: str, strategy: Strategy, levels: tuple[str, str, str]) -> float:
        workload, hw = self.workload, self.hardware
        spec = self.instance.models[model]
        d, tp, pp, mb = spec.hidden_dim, strategy.tp, strategy.pp, strategy.microbatches
        b = self.microbatch_sequences(strategy)
        # Prefill: one forward pass over the prompts.
        gemm, non_gemm, tp_comm, pp_comm = self._stage_forward(
            model, strategy, b, workload.context_length, levels
        )
        prefill = (mb + pp - 1) * (gemm + non_gemm + tp_comm + pp_comm)
        # Decode: one step per generated token, vectorised over the steps.
        stage_layers = math.ceil(spec.layers / pp)
        layer_params = layer_parameters(spec)
        head_params = head_parameters(spec, model)
        weight_bytes = BF16 * (stage_layers * layer_params + head_params) / tp
        kv_per_token = (
            2 * stage_layers * spec.kv_heads * spec.head_dim * BF16 / min(tp, spec.kv_heads)
        )
        total = 0.0
        for first, last, fraction in workload.decode_segments():
            active = math.ceil(b * fraction - 1e-9)
            if active <= 0:
                continue
            lengths = workload.context_length + np.arange(first, last + 1, dtype=np.float64)
            flops = (
                stage_layers * (2 * layer_params * active + 4 * lengths * d * active)
                + 2 * head_params * active
            ) / tp
            gemm_steps = flops / (hw.flops_per_gpu * self._efficiency(active, d / tp))
            memory_steps = (weight_bytes + kv_per_token * lengths * active) / (
                hw.memory_bandwidth * hw.decode_bw_eff
            )
            fixed = stage_layers * self.non_gemm_time(active)
            if tp > 1:
                fixed += stage_layers * 2 * self.allreduce(active * d * BF16, tp, levels[0])
            if pp > 1:
                fixed += self.p2p(active * d * BF16, levels[1])
            steps = np.maximum(gemm_steps, memory_steps) + fixed
            total += float(steps.sum())
        return prefill + max(mb, pp) * total

    def _efficiency(self, tokens: float, inner: float) -> float:
        """GEMM efficiency ``M/(M+m_half) * K/(K+k_half)`` (the K factor is 1 when k_half = 0)."""
        hw = self.hardware
        eff = tokens / (tokens + hw.gemm_m_half)
        if hw.gemm_k_half > 0:
            eff *= inner / (inner + hw.gemm_k_half)
        return eff

    # -- memory ---------------------------------------------------------------------

    def footprint(self, vertex: Vertex, strategy: Strategy) -> Footprint:
        """Per-GPU resident and transient bytes of ``vertex`` under ``strategy``."""
        spec = self.instance.models[vertex.model]
        params = self.parameters[vertex.model]
        dp, pp, tp = strategy.dp, strategy.pp, strategy.tp
        resident = BF16 * params / (tp * pp)
        length = self.workload.total_length
        stage_layers = math.ceil(spec.layers / pp)
        b = self.microbatch_sequences(strategy)
        if vertex.kind is Kind.TRAIN:
            resident += BF16 * params / (tp * pp) + 12 * params / (tp * pp * dp)
            in_flight = min(pp, strategy.microbatches)
            transient = in_flight * stage_layers * activation_bytes_per_layer(spec, length, b, tp)
        elif vertex.kind is Kind.INFER:
            vocab = 1 if vertex.model in ("critic", "reward") else spec.vocab_size
            transient = (
                activation_bytes_per_layer(spec, length, b, tp) + FP32 * b * length * vocab / tp
            )
        else:
            sequences = self.replica_sequences(strategy)
            transient = sequences * kv_bytes_per_sequence(spec, stage_layers, length, tp)
        return Footprint(resident, transient)

    # -- FLOPs (for the compute lower bound) -------------------------------------------

    def vertex_flops(self, vertex: Vertex) -> float:
        """FLOPs of one run of ``vertex`` with exact (unrounded) sequence counts."""
        spec = self.instance.models[vertex.model]
        workload = self.workload
        d, layers = spec.hidden_dim, spec.layers
        per_token = 2 * (layers * layer_parameters(spec) + head_parameters(spec, vertex.model))
        sequences = workload.sequences

        def forward(length: int) -> float:
            return sequences * (length * per_token + layers * 2 * length * length * d)

        if vertex.kind is Kind.INFER:
            return forward(workload.total_length)
        if vertex.kind is Kind.TRAIN:
            return 3 * forward(workload.total_length)
        decode = 0.0
        for first, last, fraction in workload.decode_segments():
            count = last - first + 1
            length_sum = count * workload.context_length + (first + last) * count / 2
            decode += fraction * sequences * (count * per_token + layers * 4 * d * length_sum)
        return forward(workload.context_length) + decode

    # -- transfers --------------------------------------------------------------------

    @property
    def data_bytes(self) -> float:
        """Bytes moved along a data edge: ``B*K*(S+T)*8``."""
        return self.workload.sequences * self.workload.total_length * DATA_BYTES_PER_TOKEN

    def data_lag(self, same_block: bool, level: str) -> float:
        """Lag of a data edge: 0 on the same block, else a p2p at the spanning level."""
        return 0.0 if same_block else self.p2p(self.data_bytes, level)

    def pub_lag(
        self, model: str, same_block: bool, same_layout: bool, level: str, destination: Strategy
    ) -> float:
        """Lag of a pub edge carrying ``model``'s weights to a user with ``destination`` strategy.

        0 on the same block with the same (tp, pp); a reshard (collective) on
        the same block otherwise; a p2p at the spanning level to another block.
        """
        shard = BF16 * self.parameters[model] / (destination.tp * destination.pp)
        if same_block:
            if same_layout:
                return 0.0
            hw = self.hardware
            return hw.alpha_coll[level] + shard * hw.beta_coll[level]
        return self.p2p(shard, level)
