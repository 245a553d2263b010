"""Cost and memory model v2 (docs/cost-model.md).

All quantities are SI: seconds, bytes, FLOP. Weights and activations are
bf16 (2 bytes). Section 6 gives the reference model; section 10 replaces the
parts real RL frameworks do differently (flash attention, sequence packing,
activation recompute, ZeRO-3 sharding, offload, a rollout engine with a
bounded KV pool and continuous batching, a GEMM-efficiency ceiling). Where
the specification leaves a choice open this module fixes it and says so:

* sequences per replica are ``ceil(B*K / dp)`` (the slowest replica decides)
  and sequences per microbatch ``ceil(replica / mb)``;
* the slowest pipeline stage holds ``ceil(L/pp)`` layers and the output head;
* training counts non-GEMM time and TP all-reduces for two passes (forward
  and backward), three with full recompute (the recomputed forward);
* a train run is ``workload.optimizer_steps`` mini-batches of equal
  microbatch counts: the pipeline fills once per mini-batch and ZeRO-1/2
  all-reduce the gradients once per mini-batch (one optimizer step each);
* a decode step at context length l reads the stage's weight shard and the
  KV cache of the active sequences, and adds ``4*l*d`` attention FLOPs per
  layer and token (the derivative of the causal ``2*l^2*d``); here and in
  every attention term ``d`` is the query width, which only models with
  ``attention_heads`` (Qwen3) set apart from the hidden size;
* the max of GEMM and memory time of a decode step is taken per pipeline
  stage (all its layers and the head together);
* a rollout engine takes ``gpu_memory_utilization * memory_per_gpu`` of each
  GPU for its weights, workspace and KV pool; the sequences it keeps in flight
  are those the pool holds at their mean live context ``S + E[T^2]/(2 E[T])``,
  at most ``max_num_seqs`` and the replica's sequences;
* in the rollout's tail the active sequences decline as the generated-length
  distribution says: at decode step x, ``ceil(n * P(T > x - 1/2))`` sequences
  are active (the midpoint rule, exact for piecewise-uniform lengths, so the
  tail generates ``n * E[T]`` tokens);
* with full recompute a train vertex keeps each layer's input and one layer's
  full activations (the layer being recomputed);
* train and infer vertices hold the fp32 logits of one microbatch on the last
  stage (vocabulary for actor and reference, one value for scalar heads);
* non-GEMM kernels cost ``non_gemm_ratio`` times the GEMM time of every
  train, infer and prefill pass (decode steps have their memory-bound model
  and ``decode_step_overhead`` instead);
* a weight *layout* is (tp, pp, ZeRO-3 shards): a pub edge between equal
  layouts on one block is free; ZeRO-3 weights are gathered for any other
  user, so they always pay the reshard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter

import numpy as np

from rlplan.rpeg.model.blocks import Cluster
from rlplan.rpeg.model.colocation import ColocationCosts
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.instance import Instance
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.workload import Workload
from rlplan.rpeg.strategy import DIMENSIONS, Recompute, Sharding, add_dimension_fields
from rlplan.rpeg.templates import AC_MODEL, Kind, Vertex

BF16 = 2
FP32 = 4
#: Activation bytes per token and hidden unit of one layer (Korthikanti et
#: al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
#: eq. 1: ``s*b*h*(34 + 5*a*s/h)``); the second term is the attention scores,
#: which flash attention never materialises.
ACTIVATION_CONSTANT = 34.0
ACTIVATION_ATTENTION = 5.0
#: Bytes per token and hidden unit kept per layer under full recompute (the
#: layer's bf16 input).
CHECKPOINT_BYTES = 2.0
#: Bytes of a data transfer per token of a sequence (token ids, log-probs,
#: values, rewards, advantages, masks).
DATA_BYTES_PER_TOKEN = 8
#: Bytes per parameter of ZeRO-1 training states beside the bf16 weights and
#: gradients: fp32 master weights and Adam's two moments (Rajbhandari et al.
#: 2020, ZeRO, section 3.1: "12 bytes").
ADAM_BYTES = 12
#: Bytes per parameter of all training states (2 + 2 + 12), ZeRO-3 shards them all.
STATE_BYTES = 16


@dataclass(frozen=True, slots=True)
@add_dimension_fields(lambda declared: (declared.values.__name__, declared.default), "_hash")
class Strategy:
    """How a vertex runs on its block.

    Attributes
    ----------
    dp, pp, tp
        Data, pipeline and tensor parallel degrees (``dp*pp*tp`` GPUs).
    microbatches
        Microbatches per replica (train and infer; 1 for generate).
    recompute, sharding, offload, gpu_memory_utilization, max_num_seqs
        One field per dimension of :data:`rlplan.rpeg.strategy.DIMENSIONS`, in
        its order, defaulting to the dimension's default: activation
        checkpointing (:class:`~rlplan.rpeg.strategy.Recompute`, train), state
        sharding (:class:`~rlplan.rpeg.strategy.Sharding`, train), whether
        model states live in host memory outside the vertex's runs (train and
        infer), and the rollout engine's fraction of each GPU and its cap on
        running sequences (generate; 0 otherwise).
    """

    dp: int
    pp: int
    tp: int
    microbatches: int = 1
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    _layout: tuple[int, int, int] = field(init=False, repr=False, compare=False, default=(0, 0, 0))

    def __post_init__(self) -> None:
        # Strategies key the candidate cache on the simulator's hot path: hash
        # the fields once; pub lags compare layouts there too.
        object.__setattr__(self, "_hash", hash(_strategy_values(self)))
        sharded = any(getattr(self, d.name) in d.shards_over_dp for d in _LAYOUT_DIMENSIONS)
        object.__setattr__(self, "_layout", (self.tp, self.pp, self.dp if sharded else 1))

    def __hash__(self) -> int:
        return self._hash

    @property
    def gpus(self) -> int:
        """GPUs the strategy needs."""
        return self.dp * self.pp * self.tp

    @property
    def layout(self) -> tuple[int, int, int]:
        """Weight layout (tp, pp, ZeRO-3 shards): equal layouts on one block need no reshard."""
        return self._layout

    def label(self) -> str:
        """Short form, e.g. ``dp4 pp1 tp4 mb2``, ``dp4 pp1 tp4 mb2 recompute zero3``
        or ``dp8 pp1 tp1 u0.8 s1024``.

        A rollout's (max_num_seqs > 0) has no microbatches; every dimension not
        at its default adds its tag, in declaration order.
        """
        text = f"dp{self.dp} pp{self.pp} tp{self.tp}"
        if not self.max_num_seqs:
            text += f" mb{self.microbatches}"
        for declared in _LABEL_DIMENSIONS:
            value = getattr(self, declared.name)
            if value != declared.default:
                text += f" {declared.tag(value)}"
        return text


#: Strategy fields that make a strategy (every field but the cached ones).
_strategy_values = attrgetter(*(f.name for f in fields(Strategy) if f.init))
_LAYOUT_DIMENSIONS = tuple(d for d in DIMENSIONS if d.shards_over_dp)
_LABEL_DIMENSIONS = DIMENSIONS


def layer_parameters(spec: ModelSpec) -> int:
    """Parameters of one layer: ``d*(q + 2*kv*h) + q*d + c*d*f``.

    q/k/v projections (``d x (q + 2*kv*h)``), the output projection
    (``q x d``) and the feed-forward block (``c = 3`` gated, else 2), where
    ``q = heads * h`` is the query width (:attr:`ModelSpec.q_width`): ``d``
    unless the model gives ``attention_heads`` (Qwen3), so the formula is
    ``d*(d + 2*kv*h) + d*d + c*d*f`` for most models.
    """
    d, f, h, kv, q = spec.hidden_dim, spec.ffn_dim, spec.head_dim, spec.kv_heads, spec.q_width
    gates = 3 if spec.gated_ffn else 2
    return d * (q + 2 * kv * h) + q * d + gates * d * f


def has_scalar_head(model: str) -> bool:
    """Critic and reward end in one value per token instead of the vocabulary."""
    return model in ("critic", "reward")


def has_value_head(model: str) -> bool:
    """The fused actor-critic ``ac`` (AC-share) ends in the vocabulary *and* a value head."""
    return model == AC_MODEL


def head_parameters(spec: ModelSpec, model: str) -> int:
    """Output head: ``V*d`` for the language models, ``d`` for scalar heads (critic, reward).

    The fused actor-critic ``ac`` has both: ``V*d + d`` (the actor's head
    plus a scalar value head, docs/templates.md).
    """
    if has_scalar_head(model):
        return spec.hidden_dim
    if has_value_head(model):
        return spec.vocab_size * spec.hidden_dim + spec.hidden_dim
    return spec.vocab_size * spec.hidden_dim


def parameter_count(spec: ModelSpec, model: str) -> int:
    """Total parameters ``P = L*P_l + V*d + head``.

    With ``tied_embeddings`` the language models' head is the embedding
    itself (``P = L*P_l + V*d``); it still costs its FLOPs
    (:func:`head_parameters`). Scalar heads (critic, reward, the value head
    of ``ac``) are never tied, so the fused actor-critic has
    ``P_actor + d`` parameters either way.
    """
    head = head_parameters(spec, model)
    if spec.tied_embeddings and not has_scalar_head(model):
        head -= spec.vocab_size * spec.hidden_dim
    return spec.layers * layer_parameters(spec) + spec.vocab_size * spec.hidden_dim + head


def allreduce_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """Ring all-reduce: ``2(p-1)*alpha + 2(p-1)/p * n * beta`` (0 for one rank)."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * nbytes * beta


def allgather_time(nbytes: float, ranks: int, alpha: float, beta: float) -> float:
    """Ring all-gather (or reduce-scatter) of ``n`` bytes: ``(p-1)*alpha + (p-1)/p * n * beta``."""
    if ranks <= 1:
        return 0.0
    return (ranks - 1) * alpha + (ranks - 1) / ranks * nbytes * beta


def p2p_time(nbytes: float, alpha: float, beta: float) -> float:
    """Point-to-point transfer: ``alpha + n * beta``."""
    return alpha + nbytes * beta


def _bytes_words(nbytes: float) -> str:
    """``2.04 GB``, or ``1,040 bytes`` below 10 MB (where GB would round to 0.00)."""
    if abs(nbytes) >= 1e7:
        return f"{nbytes / 1e9:.2f} GB"
    return f"{nbytes:,.0f} bytes"


def kv_bytes_per_token(spec: ModelSpec, layers: int, tp: int) -> float:
    """KV cache of one token over ``layers`` layers: ``2*layers*kv*h*2 / min(tp, kv)`` bytes."""
    return 2 * layers * spec.kv_heads * spec.head_dim * BF16 / min(tp, spec.kv_heads)


def kv_bytes_per_sequence(spec: ModelSpec, layers: int, length: float, tp: int) -> float:
    """KV cache of one sequence: ``2*layers*kv*h*2*length / min(tp, kv)`` bytes."""
    return kv_bytes_per_token(spec, layers, tp) * length


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
        self.engine = instance.engine
        self.cluster = cluster or Cluster(instance.hardware, instance.placement.min_block_gpus)
        self.parameters = {
            model: parameter_count(spec, model) for model, spec in instance.models.items()
        }
        self._tails: dict[tuple, float] = {}
        #: Offload, sleep and wake, refit (docs/cost-model.md#colocation).
        self.colocation = ColocationCosts(self)
        workload = self.workload
        s = workload.context_length
        if self.engine.sequence_packing:
            mean_t, mean_t2 = workload.mean_generated, workload.mean_generated_square
            #: Tokens of an average sequence in train and infer: E[S+T].
            self.sequence_tokens = s + mean_t
            #: E[(S+T)^2], for attention FLOPs and scores.
            self.sequence_square = s * s + 2 * s * mean_t + mean_t2
        else:
            self.sequence_tokens = float(workload.total_length)
            self.sequence_square = float(workload.total_length) ** 2

    # -- building blocks -------------------------------------------------------

    def efficiency(self, tokens: float, inner: float) -> float:
        """GEMM efficiency ``gemm_efficiency * M/(M+m_half) * K/(K+k_half)``.

        The K factor is 1 when ``k_half`` is 0.
        """
        hw = self.hardware
        eff = hw.gemm_efficiency * tokens / (tokens + hw.gemm_m_half)
        if hw.gemm_k_half > 0:
            eff *= inner / (inner + hw.gemm_k_half)
        return eff

    def gemm_time(self, flops: float, tokens: float, inner: float) -> float:
        """``flops / (F * eff)``."""
        return flops / (self.hardware.flops_per_gpu * self.efficiency(tokens, inner))

    def kernel_time(self, gemm: float) -> float:
        """GEMM time plus the non-GEMM kernels it brings: ``gemm * (1 + non_gemm_ratio)``."""
        return gemm * (1.0 + self.hardware.non_gemm_ratio)

    def non_gemm_time(self, tokens: float) -> float:
        """Non-GEMM time of one layer and microbatch pass."""
        hw = self.hardware
        return hw.non_gemm_constant + hw.non_gemm_scaling * tokens / hw.non_gemm_batch_cal

    def allreduce(self, nbytes: float, ranks: int, level: str) -> float:
        """All-reduce at a level."""
        hw = self.hardware
        return allreduce_time(nbytes, ranks, hw.alpha_coll[level], hw.beta_coll[level])

    def allgather(self, nbytes: float, ranks: int, level: str) -> float:
        """All-gather (or reduce-scatter) of ``nbytes`` in total at a level."""
        hw = self.hardware
        return allgather_time(nbytes, ranks, hw.alpha_coll[level], hw.beta_coll[level])

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

    # -- forward pass of one stage ----------------------------------------------

    def _stage_forward(
        self,
        model: str,
        strategy: Strategy,
        sequences: float,
        tokens_per_sequence: float,
        square_per_sequence: float,
        levels: tuple[str, str, str],
    ) -> tuple[float, float, float, float]:
        """One microbatch through the slowest stage: (gemm, non-gemm, tp comm, pp comm) seconds.

        ``tokens_per_sequence`` is the mean length and ``square_per_sequence``
        the mean squared length (attention FLOPs ``2*l^2*q`` per layer, ``q``
        the query width, ``d`` for most models).
        """
        spec = self.instance.models[model]
        d, tp, pp = spec.hidden_dim, strategy.tp, strategy.pp
        stage_layers = math.ceil(spec.layers / pp)
        tokens = sequences * tokens_per_sequence
        layer_flops = (
            2 * layer_parameters(spec) * tokens + 2 * square_per_sequence * spec.q_width * sequences
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
            model, strategy, b, self.sequence_tokens, self.sequence_square, levels
        )
        stage = self.kernel_time(gemm) + non_gemm + tp_comm + pp_comm
        passes = (strategy.microbatches + strategy.pp - 1) * stage
        return passes + self.colocation.onload(Kind.INFER, model, strategy)

    def _train_time(self, model: str, strategy: Strategy, levels: tuple[str, str, str]) -> float:
        """One train run: ``n = optimizer_steps`` mini-batches of ``m/n`` microbatches each.

        The pipeline fills and drains once per mini-batch, so the run takes
        ``m + n*(pp-1)`` stage slots; ZeRO-1/2 add one gradient all-reduce per
        optimizer step (``n * sync``), ZeRO-3 overlaps its per-microbatch
        gathers with every slot (``max(stage, comm)``).
        """
        b = self.microbatch_sequences(strategy)
        gemm, non_gemm, tp_comm, pp_comm = self._stage_forward(
            model, strategy, b, self.sequence_tokens, self.sequence_square, levels
        )
        recompute = strategy.recompute == Recompute.FULL
        forwards = 4 if recompute else 3
        passes = 3 if recompute else 2
        stage = forwards * self.kernel_time(gemm) + passes * (non_gemm + tp_comm) + 2 * pp_comm
        shard = self.weight_shard(model, strategy)
        steps = self.workload.optimizer_steps
        slots = strategy.microbatches + steps * (strategy.pp - 1)
        if strategy.sharding == Sharding.ZERO3:
            # Per microbatch: all-gather the stage's weights forward and again
            # backward, reduce-scatter its gradients; overlapped with compute.
            comm = 3 * self.allgather(shard, strategy.dp, levels[2])
            total = slots * max(stage, comm)
        else:
            sync = self.allreduce(shard, strategy.dp, levels[2])
            total = slots * stage + steps * sync
        colocation = self.colocation
        onload = colocation.onload(Kind.TRAIN, model, strategy)
        return total + onload + colocation.offload(Kind.TRAIN, model, strategy)

    def decode_round(
        self,
        model: str,
        strategy: Strategy,
        active: np.ndarray,
        context: np.ndarray,
        levels: tuple[str, str, str],
    ) -> np.ndarray:
        """Seconds of decode rounds: every active sequence advances one token.

        With pp > 1 the engine splits the active sequences into pp virtual
        batches; a round costs pp stage steps of ``ceil(active/pp)``
        sequences, each ``max(GEMM, memory) + TP/PP communication``, plus
        ``decode_step_overhead`` (and, without CUDA graphs, the eager launch
        cost of every layer).
        """
        gemm, memory, fixed, overhead = self._decode_round_terms(
            model, strategy, active, context, levels
        )
        return strategy.pp * (np.maximum(gemm, memory) + fixed) + overhead

    def _decode_round_terms(
        self,
        model: str,
        strategy: Strategy,
        active: np.ndarray,
        context: np.ndarray,
        levels: tuple[str, str, str],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """The parts of :meth:`decode_round`: per stage step the GEMM and memory times
        (affine in ``context`` for a fixed ``active``), the fixed time, and the
        per-round overhead."""
        spec = self.instance.models[model]
        hw = self.hardware
        d, tp, pp = spec.hidden_dim, strategy.tp, strategy.pp
        stage_layers = math.ceil(spec.layers / pp)
        layer_params = layer_parameters(spec)
        head_params = head_parameters(spec, model)
        weight_bytes = BF16 * (stage_layers * layer_params + head_params) / tp
        kv_per_token = kv_bytes_per_token(spec, stage_layers, tp)
        batch = np.ceil(active / pp - 1e-9)
        flops = (
            stage_layers * (2 * layer_params * batch + 4 * context * spec.q_width * batch)
            + 2 * head_params * batch
        ) / tp
        eff = hw.gemm_efficiency * batch / (batch + hw.gemm_m_half)
        if hw.gemm_k_half > 0:
            eff = eff * (d / tp) / (d / tp + hw.gemm_k_half)
        gemm = flops / (hw.flops_per_gpu * eff)
        memory = (weight_bytes + kv_per_token * context * batch) / (
            hw.memory_bandwidth * hw.decode_bw_eff
        )
        fixed = stage_layers * (
            hw.non_gemm_constant + hw.non_gemm_scaling * batch / hw.non_gemm_batch_cal
        )
        if tp > 1:
            alpha, beta = hw.alpha_coll[levels[0]], hw.beta_coll[levels[0]]
            allreduce = 2 * (tp - 1) * alpha + 2 * (tp - 1) / tp * batch * d * BF16 * beta
            fixed = fixed + stage_layers * 2 * allreduce
        if pp > 1:
            fixed = fixed + hw.alpha_p2p[levels[1]] + batch * d * BF16 * hw.beta_p2p[levels[1]]
        overhead = hw.decode_step_overhead
        if not self.engine.cuda_graphs:
            overhead += hw.eager_layer_overhead * stage_layers * pp
        return gemm, memory, fixed, overhead

    def _generate_time(self, model: str, strategy: Strategy, levels: tuple[str, str, str]) -> float:
        workload = self.workload
        s = workload.context_length
        n = self.replica_sequences(strategy)
        # An engine that cannot start (rollout_refusal) never reaches a plan; it is
        # timed with one sequence in flight to stay finite.
        c = max(self.effective_concurrency(model, strategy), 1)
        # Prefill: compute-bound forward passes over the prompts, c sequences a chunk.
        chunks = math.ceil(n / c)
        gemm, non_gemm, tp_comm, pp_comm = self._stage_forward(model, strategy, c, s, s * s, levels)
        prefill = (chunks + strategy.pp - 1) * (
            self.kernel_time(gemm) + non_gemm + tp_comm + pp_comm
        )
        mean_t = workload.mean_generated
        decode = 0.0
        if n > c:
            # Saturated phase: c sequences in flight at mean context S + E[T]/2.
            steps = (n - c) * mean_t / c
            rounds = self.decode_round(
                model, strategy, np.array([float(c)]), np.array([s + mean_t / 2]), levels
            )
            decode += steps * float(rounds[0])
        return prefill + decode + self._decode_tail(model, strategy, levels, c)

    def _decode_tail(
        self, model: str, strategy: Strategy, levels: tuple[str, str, str], in_flight: int
    ) -> float:
        """Decode seconds of the last ``in_flight`` sequences, shrinking as they finish.

        The sum over every generated length x = 1 .. ``generation_length`` of
        :meth:`decode_round` with ceil(in_flight · P(T > x - 1/2)) sequences
        active. That count is a step function of x, and within one step the
        GEMM and memory times are affine in the context, so each step's sum of
        ``max(GEMM, memory)`` is two arithmetic series split where the two
        lines cross: the cost is per step, not per token. Remembered per
        (model, tp, pp, levels, in_flight), all it depends on.
        """
        key = (model, strategy.tp, strategy.pp, levels, in_flight)
        known = self._tails.get(key)
        if known is not None:
            return known
        workload = self.workload
        x = np.arange(1, workload.generation_length + 1, dtype=np.float64)
        active = np.ceil(in_flight * workload.survival(x - 0.5) - 1e-9)
        # Runs of equal active counts: [first, last] lengths (inclusive) and the count.
        breaks = np.flatnonzero(np.diff(active)) + 1
        first = np.concatenate(([0], breaks))
        last = np.concatenate((breaks - 1, [len(x) - 1]))
        count = active[first]
        keep = count > 0
        tail = 0.0
        if keep.any():
            tail = self._decode_runs_sum(
                model, strategy, levels, count[keep], x[first[keep]], x[last[keep]]
            )
        self._tails[key] = tail
        return tail

    def _decode_runs_sum(
        self,
        model: str,
        strategy: Strategy,
        levels: tuple[str, str, str],
        active: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
    ) -> float:
        """Σ over runs, Σ over integer lengths x in [low, high], of the decode round at
        ``active`` sequences and context ``context_length + x`` (exact up to rounding)."""
        s = self.workload.context_length
        g_low, m_low, fixed, overhead = self._decode_round_terms(
            model, strategy, active, s + low, levels
        )
        g_high, m_high, _, _ = self._decode_round_terms(model, strategy, active, s + high, levels)
        n = high - low + 1
        width = np.maximum(high - low, 1.0)
        # d(x) = GEMM - memory, affine on [low, high]; GEMM is the max where d >= 0.
        d_low, d_high = g_low - m_low, g_high - m_high
        slope = (d_high - d_low) / width
        with np.errstate(divide="ignore", invalid="ignore"):
            root = np.where(slope != 0, low - d_low / slope, np.inf)
        # Lengths where GEMM wins: x >= root when d rises, x <= root when it falls.
        rising = slope > 0
        split = np.where(rising, np.ceil(root - 1e-9), np.floor(root + 1e-9))
        gemm_first = np.where(rising, np.clip(split, low, high + 1), low)
        gemm_last = np.where(rising, high, np.clip(split, low - 1, high))
        flat_gemm = (slope == 0) & (d_low >= 0)
        gemm_first = np.where(slope == 0, np.where(flat_gemm, low, high + 1), gemm_first)
        gemm_last = np.where(slope == 0, high, gemm_last)

        def series(v_low, v_high, a, b):
            # Σ over integer x in [a, b] of the affine function through (low, v_low)
            # and (high, v_high).
            k = np.maximum(b - a + 1, 0.0)
            per = (v_high - v_low) / width
            mid = (a + b) / 2
            return k * (v_low + per * (mid - low))

        gemm_sum = series(g_low, g_high, gemm_first, gemm_last)
        # Memory wins on the rest of [low, high].
        memory_total = series(m_low, m_high, low, high)
        memory_on_gemm = series(m_low, m_high, gemm_first, gemm_last)
        best = gemm_sum + memory_total - memory_on_gemm
        total = strategy.pp * (best + n * fixed) + n * overhead
        return float(total.sum())

    # -- memory ---------------------------------------------------------------------

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

    # -- the rollout engine's memory (docs/cost-model.md#rollout-engine-memory) -----------

    def engine_bytes(self, strategy: Strategy) -> float:
        """What the rollout engine takes of each GPU: ``gpu_memory_utilization * M``."""
        return strategy.gpu_memory_utilization * self.hardware.memory_per_gpu

    def rollout_kv_per_token(self, model: str, strategy: Strategy) -> float:
        """KV bytes per token on one GPU of a replica: its stage's ``ceil(L/pp)`` layers."""
        spec = self.instance.models[model]
        return kv_bytes_per_token(spec, math.ceil(spec.layers / strategy.pp), strategy.tp)

    def rollout_pool_bytes(self, model: str, strategy: Strategy) -> float:
        """KV pool per GPU: ``u*M - weight shard - engine.rollout_workspace`` (may be <= 0)."""
        return (
            self.engine_bytes(strategy)
            - self.weight_shard(model, strategy)
            - self.engine.rollout_workspace
        )

    def rollout_pool_tokens(self, model: str, strategy: Strategy) -> float:
        """Tokens the KV pool of one GPU holds (0 when the pool is empty)."""
        return max(self.rollout_pool_bytes(model, strategy), 0.0) / self.rollout_kv_per_token(
            model, strategy
        )

    @cached_property
    def live_context(self) -> float:
        """Mean KV tokens of an in-flight sequence: ``S + E[T^2] / (2 E[T])``.

        A sequence of final length T holds S + T/2 tokens on average over its
        life and runs for a time proportional to T, so the tokens held by the
        sequences in flight average ``S + E[T^2]/(2 E[T])`` (continuous
        batching with preemption keeps the pool full).
        """
        workload = self.workload
        mean_t = workload.mean_generated
        if mean_t <= 0:
            return float(workload.context_length)
        return workload.context_length + workload.mean_generated_square / (2 * mean_t)

    def effective_concurrency(self, model: str, strategy: Strategy) -> int:
        """Sequences a rollout replica keeps in flight: ``min(max_num_seqs, n, floor(pool/live))``.

        n is :meth:`replica_sequences`, pool :meth:`rollout_pool_tokens` and
        live :attr:`live_context`; 0 when the pool holds no live sequence.
        """
        held = math.floor(self.rollout_pool_tokens(model, strategy) / self.live_context + 1e-9)
        return max(min(strategy.max_num_seqs, self.replica_sequences(strategy), held), 0)

    def rollout_shortfall(self, model: str, strategy: Strategy) -> float:
        """Bytes the KV pool lacks to hold one sequence of ``S + T`` tokens (<= 0: it starts).

        vLLM refuses to start an engine whose pool is empty ("No available
        memory for the cache blocks") or holds less than one sequence of the
        maximum length ("To serve at least one request with the models's max
        seq len ..., ... KV cache is needed, which is larger than the
        available KV cache memory"): vllm-project/vllm
        vllm/v1/core/kv_cache_utils.py, ``_check_enough_kv_cache_memory``.
        """
        needed = self.rollout_kv_per_token(model, strategy) * self.workload.total_length
        return needed - self.rollout_pool_bytes(model, strategy)

    def rollout_refusal(self, model: str, strategy: Strategy) -> str | None:
        """Why the rollout engine of ``strategy`` would not start (None: it starts)."""
        shortfall = self.rollout_shortfall(model, strategy)
        if shortfall <= 0:
            return None
        u = strategy.gpu_memory_utilization
        short = f"{_bytes_words(shortfall)} short"
        if self.rollout_pool_bytes(model, strategy) <= 0:
            return (
                f"the rollout engine would not start: at gpu_memory_utilization {u:g} the "
                f"weights ({_bytes_words(self.weight_shard(model, strategy))}) and workspace "
                f"({_bytes_words(self.engine.rollout_workspace)}) leave no KV pool in its "
                f"{_bytes_words(self.engine_bytes(strategy))} per GPU ({short})"
            )
        tokens = math.floor(self.rollout_pool_tokens(model, strategy))
        return (
            f"the rollout engine would not start: at gpu_memory_utilization {u:g} its KV pool "
            f"holds {tokens:,} tokens per GPU, less than one S + T = "
            f"{self.workload.total_length:,}-token sequence ({short})"
        )

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

    # -- FLOPs (for the compute lower bound) -------------------------------------------

    def vertex_flops(self, vertex: Vertex) -> float:
        """A lower bound on the FLOPs of one run of ``vertex`` under any strategy.

        Exact sequence counts; train at 3 forward passes (no recompute);
        decode attention at the context ``S + E[T]/2``, which no strategy's
        model undercuts (the tail's mean context is larger).
        """
        spec = self.instance.models[vertex.model]
        workload = self.workload
        # Attention FLOPs scale with the query width (d for most models).
        d, layers = spec.q_width, spec.layers
        per_token = 2 * (layers * layer_parameters(spec) + head_parameters(spec, vertex.model))
        sequences = workload.sequences

        def forward(tokens: float, square: float) -> float:
            return sequences * (tokens * per_token + layers * 2 * square * d)

        if vertex.kind is Kind.INFER:
            return forward(self.sequence_tokens, self.sequence_square)
        if vertex.kind is Kind.TRAIN:
            return 3 * forward(self.sequence_tokens, self.sequence_square)
        s = workload.context_length
        mean_t = workload.mean_generated
        decode = sequences * mean_t * (per_token + layers * 4 * d * (s + mean_t / 2))
        return forward(s, s * s) + decode

    @property
    def peak_rate(self) -> float:
        """Fastest FLOP/s a GPU reaches in this model: ``flops_per_gpu * gemm_efficiency``."""
        return self.hardware.flops_per_gpu * self.hardware.gemm_efficiency

    # -- transfers --------------------------------------------------------------------

    @property
    def data_bytes(self) -> float:
        """Bytes moved along a data edge: ``B*K*E[S+T]*8`` (``S+T`` without packing)."""
        return self.workload.sequences * self.sequence_tokens * DATA_BYTES_PER_TOKEN

    def data_lag(self, same_block: bool, level: str) -> float:
        """Lag of a data edge: 0 on the same block, else a p2p at the spanning level."""
        return 0.0 if same_block else self.p2p(self.data_bytes, level)

    def pub_lag(
        self, model: str, same_block: bool, same_layout: bool, level: str, destination: Strategy
    ) -> float:
        """Lag of a pub edge carrying ``model``'s weights to a user with ``destination`` strategy.

        0 on the same block with the same layout; a reshard (collective) on
        the same block otherwise; a p2p at the spanning level to another block.
        """
        shard = self.weight_shard(model, destination)
        if same_block:
            if same_layout:
                return 0.0
            hw = self.hardware
            return hw.alpha_coll[level] + shard * hw.beta_coll[level]
        return self.p2p(shard, level)
