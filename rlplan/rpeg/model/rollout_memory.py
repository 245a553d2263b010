"""The rollout engine's memory: its share of each GPU, KV pool and concurrency
(docs/cost-model.md#rollout-engine-memory).

:class:`RolloutMemory` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING

from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.models import ModelSpec

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy


def _bytes_words(nbytes: float) -> str:
    """``2.04 GB``, or ``1,040 bytes`` below 10 MB (where GB would round to 0.00)."""
    if abs(nbytes) >= 1e7:
        return f"{nbytes / 1e9:.2f} GB"
    return f"{nbytes:,.0f} bytes"


def kv_bytes_per_token(spec: ModelSpec, layers: int, tp: int) -> float:
    """KV cache of one token over ``layers`` layers on one GPU of a tp group.

    Grouped-query attention: ``2*layers*kv*h*2 / min(tp, kv)`` bytes (keys and
    values; kv heads are replicated beyond tp = kv). Multi-head latent
    attention caches one latent per token and layer, ``kv_lora_rank +
    qk_rope_head_dim`` wide and shared by every head, so every tp rank holds
    all of it: ``layers*(kv_lora_rank + qk_rope_head_dim)*2`` bytes, whatever
    tp (vllm-project/vllm vllm/v1/attention/backends/mla/common.py at
    00a817ada81626793c9e2432903ee4c5b33ab33a: ``get_kv_cache_shape`` is
    (blocks, block size, head size) with "num_kv_heads ... assumed to be 1
    for MLA", and the supported head size 576 = 512 + 64 of DeepSeek-V3).
    """
    if spec.attention == MLA:
        return layers * (spec.kv_lora_rank + spec.qk_rope_head_dim) * BF16
    return 2 * layers * spec.kv_heads * spec.head_dim * BF16 / min(tp, spec.kv_heads)


def kv_bytes_per_sequence(spec: ModelSpec, layers: int, length: float, tp: int) -> float:
    """KV cache of one sequence of ``length`` tokens: :func:`kv_bytes_per_token` times it."""
    return kv_bytes_per_token(spec, layers, tp) * length


class RolloutMemory:
    """The rollout engine's memory and the sequences it keeps in flight."""

    def engine_bytes(self, strategy: Strategy) -> float:
        """What the rollout engine takes of each GPU: ``gpu_memory_utilization * M``."""
        return strategy.gpu_memory_utilization * self.hardware.memory_per_gpu

    def rollout_kv_per_token(self, model: str, strategy: Strategy) -> float:
        """KV bytes per token on one GPU of a replica: its stage's ``ceil(L/pp)`` layers.

        A replica is one attention replica: with expert parallelism (ep > 1)
        the ep/tp replicas that share the experts each keep their own
        sequences' cache, so this is the same as without.
        """
        spec = self.instance.models[model]
        return kv_bytes_per_token(spec, math.ceil(spec.layers / strategy.pp), strategy.tp)

    def rollout_pool_bytes(self, model: str, strategy: Strategy) -> float:
        """KV pool per GPU: ``u*M - weight shard - engine.rollout_workspace`` (may be <= 0).

        The weight shard is :meth:`weight_shard`; for a mixture of experts it
        is ``2*(P_dense/(tp*pp) + P_routed/(e*pp))`` with e = ep when ep > 1
        (each GPU holds E/ep whole experts) and e = tp otherwise (experts
        tp-sharded like a dense feed-forward block).
        """
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
        """Why the rollout engine of ``strategy`` would not start (None: it starts).

        With expert parallelism the weights are named as split (attention and
        dense parts over tp, experts over ep); under multi-head latent attention
        with tp > 1 the message says that tp does not split the latent cache.
        """
        shortfall = self.rollout_shortfall(model, strategy)
        if shortfall <= 0:
            return None
        u = strategy.gpu_memory_utilization
        short = f"{_bytes_words(shortfall)} short"
        if self.rollout_pool_bytes(model, strategy) <= 0:
            weights = _bytes_words(self.weight_shard(model, strategy))
            if strategy.ep > 1:
                weights += f": dense parts over tp {strategy.tp}, experts over ep {strategy.ep}"
            return (
                f"the rollout engine would not start: at gpu_memory_utilization {u:g} the "
                f"weights ({weights}) and workspace "
                f"({_bytes_words(self.engine.rollout_workspace)}) leave no KV pool in its "
                f"{_bytes_words(self.engine_bytes(strategy))} per GPU ({short})"
            )
        tokens = math.floor(self.rollout_pool_tokens(model, strategy))
        return (
            f"the rollout engine would not start: at gpu_memory_utilization {u:g} its KV pool "
            f"holds {tokens:,} tokens per GPU, less than one S + T = "
            f"{self.workload.total_length:,}-token sequence ({short}"
            f"{_latent_words(self.instance.models[model], strategy)})"
        )


def _latent_words(spec: ModelSpec, strategy: Strategy) -> str:
    """``; tp 2 does not split ...`` for a latent-attention model on tp > 1, else empty."""
    if spec.attention != MLA or strategy.tp == 1:
        return ""
    return (
        f"; tp {strategy.tp} does not split the latent KV cache of multi-head latent "
        "attention: every GPU holds all of it"
    )
