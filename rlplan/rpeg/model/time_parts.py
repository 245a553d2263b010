"""Where the time of a run goes (docs/cost-model.md#where-the-time-goes).

:class:`TimeParts` is a part of :class:`~rlplan.rpeg.model.cost.CostModel`:
:meth:`TimeParts.time_parts` splits one run of a vertex into seconds by part,
which sum to :meth:`~rlplan.rpeg.model.cost.CostModel.run_time`. It
recomputes the run (reports use it, not the simulator's hot path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlplan.rpeg.strategy import Sharding
from rlplan.rpeg.templates import Kind, Vertex

if TYPE_CHECKING:
    from rlplan.rpeg.model.cost import Strategy
    from rlplan.rpeg.model.stage import StageParts

#: The parts of a train or infer run, in report order.
PART_KEYS = (
    "attention",
    "dense_ffn",
    "experts",
    "all_to_all",
    "head",
    "non_gemm",
    "tp_comm",
    "pp_comm",
    "dp_comm",
    "cp_comm",
    "colocation",
)


class TimeParts:
    """The breakdown of a run's time by part, a part of the cost model."""

    def time_parts(
        self, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
    ) -> dict[str, float]:
        """Seconds of one run of ``vertex`` by part (ordered); they sum to its run time.

        Train and infer: the keys of :data:`PART_KEYS`. GEMM time is split
        among attention, dense feed-forward blocks (an MoE layer's router and
        shared experts with them) and the head by FLOPs; ``experts`` is the
        routed experts' GEMMs; ``non_gemm`` the kernel ratio's share of every
        GEMM plus the per-layer non-GEMM time; ``colocation`` onload and
        offload. Under ZeRO-3 the excess of the overlapped gathers over the
        stage is ``dp_comm``. A rollout's parts come from
        ``rollout_time_parts`` where the rollout model provides it, else one
        part ``rollout``.
        """
        levels = self.cluster.group_levels(
            shape, strategy.dp, strategy.pp, strategy.tp, strategy.cp, strategy.ep, strategy.etp
        )
        model = vertex.model
        if vertex.kind is Kind.GENERATE:
            if hasattr(self, "rollout_time_parts"):
                return self.rollout_time_parts(model, strategy, levels)
            return {"rollout": self.run_time(vertex, shape, strategy)}
        if vertex.kind is Kind.INFER:
            parts = self._train_or_infer_stage(model, strategy, levels, self._forward_weight)
            slots = strategy.microbatches + strategy.pp - 1
            times = self._scaled_parts(model, strategy, parts, slots, (1, 1, 1))
            times["colocation"] = self.colocation.onload(Kind.INFER, model, strategy)
            return times
        return self._train_parts(model, strategy, levels)

    def _train_parts(
        self, model: str, strategy: Strategy, levels: tuple[str, ...]
    ) -> dict[str, float]:
        """:meth:`time_parts` of a train run (the same terms as ``_train_time``)."""

        def weigh(parts: StageParts) -> float:
            return self._train_weight(parts, strategy)

        parts = self._train_or_infer_stage(model, strategy, levels, weigh)
        steps = self.workload.optimizer_steps
        slots = strategy.microbatches + steps * (strategy.pp - 1)
        forwards, passes = self.train_passes(strategy)
        times = self._scaled_parts(model, strategy, parts, slots, (forwards, passes, 2))
        if strategy.sharding == Sharding.ZERO3:
            comm = self.gradient_sync(model, strategy, levels, zero3=True)
            times["dp_comm"] = slots * max(comm - weigh(parts), 0.0)
        else:
            times["dp_comm"] = steps * self.gradient_sync(model, strategy, levels, zero3=False)
        colocation = self.colocation
        times["colocation"] = colocation.onload(Kind.TRAIN, model, strategy) + colocation.offload(
            Kind.TRAIN, model, strategy
        )
        return times

    def _scaled_parts(
        self,
        model: str,
        strategy: Strategy,
        parts: StageParts,
        slots: int,
        factors: tuple[int, int, int],
    ) -> dict[str, float]:
        """Every part of ``slots`` stage passes, GEMMs times ``factors[0]`` (forward
        equivalents), per-layer non-GEMM and communication times ``factors[1]``
        (passes), the pipeline p2p times ``factors[2]``; dp_comm and colocation 0."""
        forwards, passes, p2p = factors
        attention, ffn, head = self.gemm_shares(
            model, strategy, parts, self.sequence_square / self.sequence_tokens
        )
        gemm = slots * forwards * parts.dense_gemm
        ratio = self.hardware.non_gemm_ratio
        times = dict.fromkeys(PART_KEYS, 0.0)
        times["attention"] = gemm * attention
        times["dense_ffn"] = gemm * ffn
        times["experts"] = slots * forwards * parts.experts
        times["all_to_all"] = slots * passes * (parts.all_to_all + parts.dispatch)
        times["head"] = gemm * head
        times["non_gemm"] = slots * (forwards * ratio * parts.gemm + passes * parts.non_gemm)
        times["tp_comm"] = slots * passes * parts.tp_comm
        times["pp_comm"] = slots * p2p * parts.pp_comm
        times["cp_comm"] = slots * passes * parts.cp_comm
        return times
