"""Time of a rollout: prefill, the saturated decode phase and the shrinking tail
(docs/cost-model.md#rollout).

:class:`RolloutTime` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from rlplan.rpeg.model.parameters import head_parameters, layer_parameters
from rlplan.rpeg.model.rollout_memory import kv_bytes_per_token
from rlplan.rpeg.model.units import BF16

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy


class RolloutTime:
    """Prefill and decode time of a rollout replica, a part of the cost model."""

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
