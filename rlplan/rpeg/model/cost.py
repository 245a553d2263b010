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
* a weight *layout* is (tp, pp, ZeRO-3 shards, ep, etp): a pub edge between
  equal layouts on one block is free; ZeRO-3 weights are gathered for any
  other user, so they always pay the reshard;
* a mixture of experts computes at its active parameters, its routed experts
  at the per-expert token count and ``hardware.moe_imbalance``, and pays an
  all-to-all per MoE layer and pass; context parallelism splits tokens and
  attention ``cp`` ways and pays a ring exchange of K and V per layer and pass
  (:mod:`rlplan.rpeg.model.experts`, :mod:`rlplan.rpeg.model.stage`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from operator import attrgetter

from rlplan.rpeg.model.blocks import LEVEL_ORDER, Cluster
from rlplan.rpeg.model.collectives import (
    allgather_time,
    allreduce_time,
    hierarchical_alltoall_time,
    p2p_time,
)
from rlplan.rpeg.model.colocation import ColocationCosts
from rlplan.rpeg.model.experts import ExpertTerms, moe_dense_parameters
from rlplan.rpeg.model.memory_terms import MemoryTerms
from rlplan.rpeg.model.parameters import (
    active_layer_parameters,
    head_parameters,
    layer_parameters,
    parameter_count,
    routed_parameters,
)
from rlplan.rpeg.model.rollout_memory import (
    RolloutMemory,
)
from rlplan.rpeg.model.rollout_time import RolloutTime
from rlplan.rpeg.model.stage import StageParts, StageTerms
from rlplan.rpeg.model.time_parts import TimeParts
from rlplan.rpeg.model.units import DATA_BYTES_PER_TOKEN
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.instance import Instance
from rlplan.rpeg.schema.pools import INTER_POOL
from rlplan.rpeg.schema.workload import Workload
from rlplan.rpeg.strategy import DIMENSIONS, Sharding, add_dimension_fields
from rlplan.rpeg.templates import Kind, Vertex


@dataclass(frozen=True, slots=True)
@add_dimension_fields(lambda declared: (declared.values.__name__, declared.default), "_hash")
class Strategy:
    """How a vertex runs on its block.

    Attributes
    ----------
    dp, pp, tp
        Data, pipeline and tensor parallel degrees (``dp*cp*pp*tp`` GPUs).
    microbatches
        Microbatches per replica (train and infer; 1 for generate).
    recompute, sharding, offload, gpu_memory_utilization, max_num_seqs, ep, etp, cp
        One field per dimension of :data:`rlplan.rpeg.strategy.DIMENSIONS`, in
        its order, defaulting to the dimension's default: activation
        checkpointing (:class:`~rlplan.rpeg.strategy.Recompute`, train), state
        sharding (:class:`~rlplan.rpeg.strategy.Sharding`, train), whether
        model states live in host memory outside the vertex's runs (train and
        infer), the rollout engine's fraction of each GPU and its cap on
        running sequences (generate; 0 otherwise), the expert parallel degree
        (every kind; 1 for dense models), and the expert tensor parallel and
        context parallel degrees (train and infer).
    """

    dp: int
    pp: int
    tp: int
    microbatches: int = 1
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    _layout: tuple[int, ...] = field(init=False, repr=False, compare=False, default=(0, 0, 0))

    def __post_init__(self) -> None:
        # Strategies key the candidate cache on the simulator's hot path: hash
        # the fields once; pub lags compare layouts there too.
        object.__setattr__(self, "_hash", hash(_strategy_values(self)))
        sharded = any(getattr(self, d.name) in d.shards_over_dp for d in _LAYOUT_DIMENSIONS)
        layout = (self.tp, self.pp, self.dp if sharded else 1, self.ep, self.etp)
        object.__setattr__(self, "_layout", layout)

    def __hash__(self) -> int:
        return self._hash

    @property
    def gpus(self) -> int:
        """GPUs the strategy needs: ``dp*cp*pp*tp``."""
        return self.dp * self.cp * self.pp * self.tp

    @property
    def layout(self) -> tuple[int, ...]:
        """Weight layout (tp, pp, ZeRO-3 shards, ep, etp): equal layouts on one block
        need no reshard (context parallel ranks hold the same weights)."""
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


class CostModel(MemoryTerms, ExpertTerms, StageTerms, TimeParts, RolloutMemory, RolloutTime):
    """Time and memory of vertices, transfer lags, and lower-bound ingredients.

    Parameters
    ----------
    instance
        The validated instance.
    cluster
        Its cluster geometry (for communication levels): with GPU pools, the
        pool's.
    hardware
        The GPUs whose times and memory this model gives: a pool's hardware
        (docs/cost-model.md#pools); None for the instance's.
    """

    def __init__(
        self, instance: Instance, cluster: Cluster | None = None, hardware: Hardware | None = None
    ) -> None:
        self.instance = instance
        self.hardware: Hardware = hardware or instance.hardware
        self.workload: Workload = instance.workload
        self.engine = instance.engine
        self.cluster = cluster or Cluster(
            self.hardware,
            instance.placement.min_block_gpus,
            instance.placement.node_blocks,
            instance.placement.sliced_blocks,
        )
        #: The link between pools (level ``x``), None on a one-pool cluster.
        self.inter_pool = instance.inter_pool
        self.parameters = {
            model: parameter_count(spec, model) for model, spec in instance.models.items()
        }
        #: Parameters of every routed expert (the part ep*etp shards; 0 when dense).
        self.routed = {model: routed_parameters(spec) for model, spec in instance.models.items()}
        #: Per model: a dense layer's, an MoE layer's dense part's and the head's parameters.
        self.stage_parameters = {
            model: (
                layer_parameters(spec),
                moe_dense_parameters(spec),
                head_parameters(spec, model),
            )
            for model, spec in instance.models.items()
        }
        self._tails: dict[tuple, float] = {}
        hw = self.hardware
        #: Latencies and seconds per byte of the node, rack and cluster links, in that order.
        self._alltoall_links = (
            tuple(hw.alpha_coll[level] for level in LEVEL_ORDER),
            tuple(hw.beta_coll[level] for level in LEVEL_ORDER),
        )
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

    def alltoall(self, nbytes: float, ranks: int, peers: tuple[int, int, int]) -> float:
        """All-to-all of ``nbytes`` per rank whose peers sit at the levels ``peers`` counts.

        ``peers``: :attr:`~rlplan.rpeg.model.blocks.GroupLevels.ep_peers`
        (:func:`~rlplan.rpeg.model.collectives.hierarchical_alltoall_time`).
        """
        alphas, betas = self._alltoall_links
        return hierarchical_alltoall_time(nbytes, ranks, peers, alphas, betas)

    def p2p(self, nbytes: float, level: str) -> float:
        """Point-to-point transfer at a level (``x``: the inter-pool link)."""
        if level == INTER_POOL:
            link = self.inter_pool
            if link is None:
                raise ValueError("a transfer between pools needs hardware.inter_pool")
            return p2p_time(nbytes, link.alpha_p2p, link.beta_p2p)
        hw = self.hardware
        return p2p_time(nbytes, hw.alpha_p2p[level], hw.beta_p2p[level])

    def replica_sequences(self, strategy: Strategy) -> int:
        """Sequences of the slowest data-parallel replica ``ceil(B*K/dp)``."""
        return math.ceil(self.workload.sequences / strategy.dp)

    def microbatch_sequences(self, strategy: Strategy) -> int:
        """Sequences per microbatch ``ceil(replica / mb)``."""
        return math.ceil(self.replica_sequences(strategy) / strategy.microbatches)

    # -- run time -----------------------------------------------------------------

    def run_time(self, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy) -> float:
        """Seconds of one run of ``vertex`` with ``strategy`` on a block of ``shape``."""
        levels = self.cluster.group_levels(
            shape, strategy.dp, strategy.pp, strategy.tp, strategy.cp, strategy.ep, strategy.etp
        )
        if vertex.kind is Kind.INFER:
            return self._infer_time(vertex.model, strategy, levels)
        if vertex.kind is Kind.TRAIN:
            return self._train_time(vertex.model, strategy, levels)
        return self._generate_time(vertex.model, strategy, levels)

    def _infer_time(self, model: str, strategy: Strategy, levels: tuple[str, ...]) -> float:
        stage = self._train_or_infer_stage(model, strategy, levels, self._forward_weight)
        passes = (strategy.microbatches + strategy.pp - 1) * self._forward_weight(stage)
        return passes + self.colocation.onload(Kind.INFER, model, strategy)

    def _train_time(self, model: str, strategy: Strategy, levels: tuple[str, ...]) -> float:
        """One train run: ``n = optimizer_steps`` mini-batches of ``m/n`` microbatches each.

        The pipeline fills and drains once per mini-batch, so the run takes
        ``m + n*(pp-1)`` stage slots; ZeRO-1/2 add one gradient all-reduce per
        optimizer step (``n * sync``), ZeRO-3 overlaps its per-microbatch
        gathers with every slot (``max(stage, comm)``).
        """

        def weigh(parts: StageParts) -> float:
            return self._train_weight(parts, strategy)

        stage = weigh(self._train_or_infer_stage(model, strategy, levels, weigh))
        steps = self.workload.optimizer_steps
        slots = strategy.microbatches + steps * (strategy.pp - 1)
        if strategy.sharding == Sharding.ZERO3:
            # Per microbatch: all-gather the stage's weights forward and again
            # backward, reduce-scatter its gradients; overlapped with compute.
            comm = self.gradient_sync(model, strategy, levels, zero3=True)
            total = slots * max(stage, comm)
        else:
            sync = self.gradient_sync(model, strategy, levels, zero3=False)
            total = slots * stage + steps * sync
        colocation = self.colocation
        onload = colocation.onload(Kind.TRAIN, model, strategy)
        return total + onload + colocation.offload(Kind.TRAIN, model, strategy)

    # -- FLOPs (for the compute lower bound) -------------------------------------------

    def vertex_flops(self, vertex: Vertex) -> float:
        """A lower bound on the FLOPs of one run of ``vertex`` under any strategy.

        Exact sequence counts at the active parameters (an MoE layer's
        attention, router, shared and ``k`` routed experts); train at 3
        forward passes (no recompute); decode attention at the context
        ``S + E[T]/2``, which no strategy's model undercuts (the tail's mean
        context is larger).
        """
        spec = self.instance.models[vertex.model]
        workload = self.workload
        # Attention FLOPs scale with the query width (d for most models).
        d, layers = spec.q_width, spec.layers
        if spec.is_moe:
            # Active parameters: the MoE layers' k routed experts of E.
            body = spec.dense_layers * layer_parameters(spec)
            body += spec.moe_layers * active_layer_parameters(spec)
        else:
            body = layers * layer_parameters(spec)
        per_token = 2 * (body + head_parameters(spec, vertex.model))
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
