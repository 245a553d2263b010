"""Time of a rollout: prefill, the saturated decode phase and the shrinking tail
(docs/cost-model.md#rollout).

:class:`RolloutTime` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rlplan.rpeg.model.parameters import head_parameters, layer_parameters
from rlplan.rpeg.model.rollout_experts import RolloutExperts
from rlplan.rpeg.model.rollout_memory import kv_bytes_per_token
from rlplan.rpeg.model.rollout_parts import RolloutParts, affine_series, gemm_lengths
from rlplan.rpeg.model.units import BF16
from rlplan.rpeg.schema.mixture import MLA

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy


class RolloutTime(RolloutExperts, RolloutParts):
    """Prefill and decode time of a rollout replica, a part of the cost model."""

    def decode_round(
        self,
        model: str,
        strategy: Strategy,
        active: np.ndarray,
        context: np.ndarray,
        levels: tuple[str, ...],
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
        levels: tuple[str, ...],
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """The parts of :meth:`decode_round`: per stage step the GEMM and memory times
        (affine in ``context`` for a fixed ``active``), the fixed time (with the
        experts' all-to-all, :meth:`_decode_all_to_all`), and the per-round
        overhead. Mixtures of experts and latent attention take their GEMM time
        and weight bytes from :meth:`_moe_decode_compute`."""
        spec = self.instance.models[model]
        hw = self.hardware
        d, tp, pp = spec.hidden_dim, strategy.tp, strategy.pp
        stage_layers = math.ceil(spec.layers / pp)
        batch = np.ceil(active / pp - 1e-9)
        if spec.is_moe or spec.attention == MLA:
            gemm, weight_bytes = self._moe_decode_compute(model, strategy, batch, context)
        else:
            gemm, weight_bytes = self._dense_decode_compute(model, strategy, batch, context)
        kv_per_token = kv_bytes_per_token(spec, stage_layers, tp)
        memory = (weight_bytes + kv_per_token * context * batch) / (
            hw.memory_bandwidth * hw.decode_bw_eff
        )
        fixed = stage_layers * (
            hw.non_gemm_constant + hw.non_gemm_scaling * batch / hw.non_gemm_batch_cal
        )
        if tp > 1:
            # levels[0] is "n" when a rollout's tp group spans nodes.
            alpha, beta = hw.alpha_coll[levels[0]], hw.beta_coll[levels[0]]
            allreduce = 2 * (tp - 1) * alpha + 2 * (tp - 1) / tp * batch * d * BF16 * beta
            fixed = fixed + stage_layers * 2 * allreduce
        if pp > 1:
            fixed = fixed + hw.alpha_p2p[levels[1]] + batch * d * BF16 * hw.beta_p2p[levels[1]]
        if spec.is_moe and strategy.ep > 1:
            fixed = fixed + self._decode_all_to_all(model, strategy, active, levels)
        overhead = hw.decode_step_overhead
        if not self.engine.cuda_graphs:
            overhead += hw.eager_layer_overhead * stage_layers * pp
        return gemm, memory, fixed, overhead

    def _dense_decode_compute(
        self, model: str, strategy: Strategy, batch: np.ndarray, context: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """GEMM seconds and weight bytes of a dense grouped-query model's decode stage step.

        Weights ``2*(L_s*P_l + head)/tp``; FLOPs ``(L_s*(2*P_l*batch +
        4*context*q*batch) + 2*head*batch)/tp`` at efficiency (batch, d/tp).
        """
        spec = self.instance.models[model]
        hw = self.hardware
        d, tp = spec.hidden_dim, strategy.tp
        stage_layers = math.ceil(spec.layers / strategy.pp)
        layer_params = layer_parameters(spec)
        head_params = head_parameters(spec, model)
        weight_bytes = BF16 * (stage_layers * layer_params + head_params) / tp
        flops = (
            stage_layers * (2 * layer_params * batch + 4 * context * spec.q_width * batch)
            + 2 * head_params * batch
        ) / tp
        eff = hw.gemm_efficiency * batch / (batch + hw.gemm_m_half)
        if hw.gemm_k_half > 0:
            eff = eff * (d / tp) / (d / tp + hw.gemm_k_half)
        return flops / (hw.flops_per_gpu * eff), weight_bytes

    def _generate_time(self, model: str, strategy: Strategy, levels: tuple[str, ...]) -> float:
        """Seconds of one rollout run: prefill, saturated decode phase and tail.

        :meth:`rollout_time_parts` splits the same sum.
        """
        workload = self.workload
        s = workload.context_length
        n = self.replica_sequences(strategy)
        # An engine that cannot start (rollout_refusal) never reaches a plan; it is
        # timed with one sequence in flight to stay finite.
        c = max(self.effective_concurrency(model, strategy), 1)
        prefill, prefill_all_to_all = self._prefill_time(model, strategy, c, levels)
        mean_t = workload.mean_generated
        decode = 0.0
        if n > c:
            # Saturated phase: c sequences in flight at mean context S + E[T]/2.
            steps = (n - c) * mean_t / c
            rounds = self.decode_round(
                model, strategy, np.array([float(c)]), np.array([s + mean_t / 2]), levels
            )
            decode += steps * float(rounds[0])
        return prefill + prefill_all_to_all + decode + self._decode_tail(model, strategy, levels, c)

    def _prefill_time(
        self, model: str, strategy: Strategy, in_flight: int, levels: tuple[str, ...]
    ) -> tuple[float, float]:
        """Prefill seconds and its all-to-all seconds (0 without expert parallelism).

        Compute-bound forward passes over the prompts, ``in_flight`` sequences a
        chunk: ``(chunks + pp - 1)`` slots of the slowest stage's forward pass
        (:meth:`~rlplan.rpeg.model.stage.StageTerms._slowest_stage`, which
        prices a rollout's experts by its expert split).
        """
        s = self.workload.context_length
        slots = math.ceil(self.replica_sequences(strategy) / in_flight) + strategy.pp - 1
        parts = self._slowest_stage(
            model, strategy, in_flight, s, s * s, levels, self._forward_weight
        )
        all_to_all = parts.all_to_all
        return slots * (self._forward_weight(parts) - all_to_all), slots * all_to_all

    def _decode_tail(
        self, model: str, strategy: Strategy, levels: tuple[str, ...], in_flight: int
    ) -> float:
        """Decode seconds of the last ``in_flight`` sequences, shrinking as they finish.

        The sum over every generated length x = 1 .. ``generation_length`` of
        :meth:`decode_round` with ceil(in_flight · P(T > x - 1/2)) sequences
        active. That count is a step function of x, and within one step the
        GEMM and memory times are affine in the context, so each step's sum of
        ``max(GEMM, memory)`` is two arithmetic series split where the two
        lines cross: the cost is per step, not per token. Remembered per
        (model, tp, pp, ep, levels, in_flight), all it depends on.
        """
        key = (model, strategy.tp, strategy.pp, strategy.ep, levels, in_flight)
        known = self._tails.get(key)
        if known is not None:
            return known
        count, low, high = self._tail_runs(in_flight)
        tail = 0.0
        if len(count):
            tail = self._decode_runs_sum(model, strategy, levels, count, low, high)
        self._tails[key] = tail
        return tail

    def _tail_runs(self, in_flight: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Runs of equal active counts of the tail: (count, first length, last length),
        lengths inclusive, runs with no sequence active left out."""
        workload = self.workload
        x = np.arange(1, workload.generation_length + 1, dtype=np.float64)
        active = np.ceil(in_flight * workload.survival(x - 0.5) - 1e-9)
        breaks = np.flatnonzero(np.diff(active)) + 1
        first = np.concatenate(([0], breaks))
        last = np.concatenate((breaks - 1, [len(x) - 1]))
        count = active[first]
        keep = count > 0
        return count[keep], x[first[keep]], x[last[keep]]

    def _decode_runs_sum(
        self,
        model: str,
        strategy: Strategy,
        levels: tuple[str, ...],
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
        gemm_first, gemm_last = gemm_lengths(low, high, width, g_low - m_low, g_high - m_high)
        gemm_sum = affine_series(g_low, g_high, low, width, gemm_first, gemm_last)
        # Memory wins on the rest of [low, high].
        memory_total = affine_series(m_low, m_high, low, width, low, high)
        memory_on_gemm = affine_series(m_low, m_high, low, width, gemm_first, gemm_last)
        best = gemm_sum + memory_total - memory_on_gemm
        total = strategy.pp * (best + n * fixed) + n * overhead
        return float(total.sum())
