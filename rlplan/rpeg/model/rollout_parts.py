"""Where a rollout's time goes (docs/cost-model.md#mixture-of-experts-rollouts).

:meth:`RolloutParts.rollout_time_parts` splits
:meth:`~rlplan.rpeg.model.rollout_time.RolloutTime._generate_time` into
prefill, the decode steps where GEMM time wins and those where memory time
wins (each with its fixed communication and non-GEMM time), the experts'
all-to-all and the per-round overhead. It recomputes what the hot path
sums, for reports. The two arithmetic helpers are shared with the tail's
closed form.

:class:`RolloutParts` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`
(through :class:`~rlplan.rpeg.model.rollout_time.RolloutTime`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy

#: The keys of :meth:`RolloutParts.rollout_time_parts`, in order.
ROLLOUT_PARTS = (
    "prefill",
    "decode_compute_bound",
    "decode_memory_bound",
    "all_to_all",
    "decode_overhead",
)


def gemm_lengths(
    low: np.ndarray, high: np.ndarray, width: np.ndarray, d_low: np.ndarray, d_high: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """First and last integer length of each run [low, high] where GEMM time wins.

    ``d`` = GEMM - memory is affine on the run, ``d_low`` and ``d_high`` at its
    ends, ``width = max(high - low, 1)``; GEMM wins where d >= 0: x >= root when d
    rises, x <= root when it falls, all or none of the run when d is flat. An
    empty range has last = first - 1.
    """
    slope = (d_high - d_low) / width
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(slope != 0, low - d_low / slope, np.inf)
    rising = slope > 0
    split = np.where(rising, np.ceil(root - 1e-9), np.floor(root + 1e-9))
    gemm_first = np.where(rising, np.clip(split, low, high + 1), low)
    gemm_last = np.where(rising, high, np.clip(split, low - 1, high))
    flat_gemm = (slope == 0) & (d_low >= 0)
    gemm_first = np.where(slope == 0, np.where(flat_gemm, low, high + 1), gemm_first)
    gemm_last = np.where(slope == 0, high, gemm_last)
    return gemm_first, gemm_last


def affine_series(
    v_low: np.ndarray,
    v_high: np.ndarray,
    low: np.ndarray,
    width: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
) -> np.ndarray:
    """Σ over integer x in [first, last] of the affine function through (low, v_low)
    and (low + width, v_high): ``(last - first + 1) * value at (first + last)/2``."""
    k = np.maximum(last - first + 1, 0.0)
    per = (v_high - v_low) / width
    mid = (first + last) / 2
    return k * (v_low + per * (mid - low))


class RolloutParts:
    """The breakdown of a rollout's time, a part of the cost model."""

    def rollout_time_parts(
        self, model: str, strategy: Strategy, levels: tuple[str, ...]
    ) -> dict[str, float]:
        """Seconds of one rollout run by part, summing to ``_generate_time`` (to rounding).

        Keys :data:`ROLLOUT_PARTS`: ``prefill`` (its all-to-all aside),
        ``decode_compute_bound`` and ``decode_memory_bound`` (the decode steps
        where GEMM, resp. memory, time wins, each with its fixed non-GEMM,
        tp and pp time), ``all_to_all`` (prefill's and every decode step's)
        and ``decode_overhead`` (``decode_step_overhead`` and eager launches).
        """
        workload = self.workload
        n = self.replica_sequences(strategy)
        c = max(self.effective_concurrency(model, strategy), 1)
        parts = dict.fromkeys(ROLLOUT_PARTS, 0.0)
        parts["prefill"], parts["all_to_all"] = self._prefill_time(model, strategy, c, levels)
        mean_t = workload.mean_generated
        if n > c:
            steps = (n - c) * mean_t / c
            saturated = self._decode_runs_parts(
                model,
                strategy,
                levels,
                np.array([float(c)]),
                np.array([mean_t / 2]),
                np.array([mean_t / 2]),
                steps,
            )
            _add(parts, saturated)
        count, low, high = self._tail_runs(c)
        if len(count):
            _add(parts, self._decode_runs_parts(model, strategy, levels, count, low, high))
        return parts

    def _decode_runs_parts(
        self,
        model: str,
        strategy: Strategy,
        levels: tuple[str, ...],
        active: np.ndarray,
        low: np.ndarray,
        high: np.ndarray,
        steps: float | None = None,
    ) -> dict[str, float]:
        """:meth:`_decode_runs_sum` by part (the lengths low..high taken as ``s + x``).

        With ``steps`` the single run (low = high) is ``steps`` rounds at context
        ``s + low`` (the saturated phase) instead of one round per length.
        """
        pp = strategy.pp
        s = self.workload.context_length
        g_low, m_low, fixed, overhead = self._decode_round_terms(
            model, strategy, active, s + low, levels
        )
        g_high, m_high, _, _ = self._decode_round_terms(model, strategy, active, s + high, levels)
        width = np.maximum(high - low, 1.0)
        n = high - low + 1 if steps is None else np.full_like(low, steps)
        first, last = gemm_lengths(low, high, width, g_low - m_low, g_high - m_high)
        gemm_sum = affine_series(g_low, g_high, low, width, first, last)
        memory_rest = affine_series(m_low, m_high, low, width, low, high) - affine_series(
            m_low, m_high, low, width, first, last
        )
        gemm_count = np.maximum(last - first + 1, 0.0)
        if steps is not None:
            # One context: every round is GEMM-bound or every round memory-bound.
            gemm_sum, memory_rest, gemm_count = gemm_sum * n, memory_rest * n, gemm_count * n
        exchange = self._decode_all_to_all(model, strategy, active, levels) * np.ones_like(low)
        own = fixed - exchange
        return {
            "decode_compute_bound": float(np.sum(pp * (gemm_sum + gemm_count * own))),
            "decode_memory_bound": float(np.sum(pp * (memory_rest + (n - gemm_count) * own))),
            "all_to_all": float(np.sum(pp * n * exchange)),
            "decode_overhead": float(np.sum(n * overhead)),
        }


def _add(parts: dict[str, float], more: dict[str, float]) -> None:
    """Add ``more`` into ``parts`` key by key."""
    for key, value in more.items():
        parts[key] += value
