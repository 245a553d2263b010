"""What the simulator returns: the search's :class:`Evaluation` and the full :class:`Trace`.

docs/simulator.md, "Outputs"; the trace file is :meth:`Trace.to_json`
(docs/plan-space.md#trace-file-json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.evaluation.host_memory import HostOverflow

#: Event kinds of a run on its GPUs, in the order they follow one another.
RUN_KINDS = ("wake", "onload", "compute", "offload", "sleep")
#: Event kinds between runs (no GPUs): data and weight transfers, refits of a rollout.
EDGE_KINDS = ("transfer", "refit")


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What the search needs from a plan: makespan and memory feasibility.

    Attributes
    ----------
    makespan
        End of the last run of the ``k_eval`` steps, seconds; under the
        steady-state objective ``k_eval`` periods (docs/simulator.md, "The
        steady-state period"), so that ``makespan / k_eval`` is the step time.
    violation
        Worst per-GPU memory overflow plus worst per-node host-memory
        overflow, in bytes (0 when feasible).
    factor
        Objective factor of the plan: ``1 + lambda_ac`` for a fused
        (AC-share) plan, times ``1 + lambda_stale`` for an off-policy one
        (:meth:`Instance.score_factor`), else 1.
    """

    makespan: float
    violation: float
    order: tuple[int, ...] = ()
    factor: float = 1.0

    @property
    def score(self) -> float:
        """The objective: makespan x ``factor`` (the makespan of an on-policy separate plan)."""
        return self.makespan * self.factor

    @property
    def feasible(self) -> bool:
        """Whether every GPU's peak fits its usable memory and every node's host memory fits."""
        return self.violation <= 0.0


@dataclass(frozen=True)
class Event:
    """One part of a run on its GPUs (:data:`RUN_KINDS`), one transfer (:data:`EDGE_KINDS`),
    or a CPU stage (kind ``cpu``: a rule reward, no GPUs, fed by ``source``)."""

    vertex: str
    step: int
    kind: str
    start: float
    end: float
    gpus: tuple[int, ...]
    source: tuple[str, int] | None = None


@dataclass(frozen=True)
class Trace:
    """Full simulation output (see the specification's section 7)."""

    makespan: float
    k_eval: int
    step_time: float
    samples_per_s: float
    generated_tokens_per_s: float
    events: tuple[Event, ...]
    peak_memory_bytes: tuple[float, ...]
    capacity_bytes: float
    violation_bytes: float
    start_order: tuple[tuple[int, int], ...] = field(default=())
    template: str | None = None
    factor: float = 1.0
    #: Host bytes per node, its capacity, the worst overflow and every overflowing node.
    host_memory_bytes: tuple[float, ...] = ()
    host_capacity_bytes: float = 0.0
    host_violation_bytes: float = 0.0
    host_overflows: tuple[HostOverflow, ...] = ()
    #: With GPU pools: the usable memory of every GPU and the host memory of every
    #: node (each its pool's); empty on a one-pool cluster, where ``capacity_bytes``
    #: and ``host_capacity_bytes`` hold for all (with pools, they are the smallest).
    gpu_capacity_bytes: tuple[float, ...] = ()
    node_capacity_bytes: tuple[float, ...] = ()
    #: With ``optimizer.objective: steady_state``: the plan's period (s), which is then the
    #: step time, ``makespan`` being ``k_eval`` periods; None under the makespan objective.
    period: float | None = None
    #: Makespan of the ``k_eval`` unrolled steps the events show (s), pipeline fill
    #: included; ``makespan`` itself under the makespan objective.
    unrolled_makespan: float | None = None

    @property
    def unrolled_step(self) -> float:
        """Makespan of the ``k_eval`` unrolled steps / ``k_eval`` (s): the step with the fill."""
        unrolled = self.makespan if self.unrolled_makespan is None else self.unrolled_makespan
        return unrolled / self.k_eval

    @property
    def feasible(self) -> bool:
        """Whether every GPU's peak fits its usable memory and every node's host memory fits."""
        return self.violation_bytes <= 0.0 and self.host_violation_bytes <= 0.0

    def overflow_words(self, digits: int = 2) -> str:
        """What the plan overflows, e.g. ``overflows GPU memory by 1.20 GB``.

        A host-memory overflow names its worst node (``overflows the host
        memory of node 1 by 40.00 GB``).
        """
        parts = []
        if self.violation_bytes > 0:
            parts.append(f"overflows GPU memory by {self.violation_bytes / 1e9:.{digits}f} GB")
        if self.host_overflows:
            worst = self.host_overflows[0]
            parts.append(
                f"overflows the host memory of node {worst.node} by "
                f"{worst.excess / 1e9:.{digits}f} GB"
            )
        return " and ".join(parts) or "fits in memory"

    def run_spans(self) -> dict[tuple[str, int], tuple[float, float]]:
        """(start, end) of every run (vertex, step) over all its parts (:data:`RUN_KINDS`)."""
        spans: dict[tuple[str, int], tuple[float, float]] = {}
        for event in self.events:
            if event.kind in RUN_KINDS:
                key = (event.vertex, event.step)
                low, high = spans.get(key, (event.start, event.end))
                spans[key] = (min(low, event.start), max(high, event.end))
        return spans

    @property
    def score(self) -> float:
        """Objective of the ``k_eval`` steps: makespan x ``factor`` (see :class:`Evaluation`)."""
        return self.makespan * self.factor

    @property
    def score_step(self) -> float:
        """The objective per step (the step time of an on-policy separate plan)."""
        return self.step_time * self.factor

    def to_json(self) -> dict[str, Any]:
        """The trace file document.

        PPO traces add the template and the score; so does the trace of a
        penalised plan (fused or off-policy, ``factor`` above 1).
        """
        events = []
        for event in self.events:
            item: dict[str, Any] = {
                "vertex": event.vertex,
                "step": event.step,
                "kind": event.kind,
                "start": event.start,
                "end": event.end,
                "gpus": list(event.gpus),
            }
            if event.source is not None:
                item["source"] = list(event.source)
            events.append(item)
        extra: dict[str, Any] = {}
        if self.template is not None or self.factor != 1.0:
            extra = {
                **({} if self.template is None else {"template": self.template}),
                "score_makespan": self.score,
                "score_step_time": self.score_step,
            }
        return {
            "makespan": self.makespan,
            "k_eval": self.k_eval,
            "step_time": self.step_time,
            **self._steady(),
            **extra,
            "samples_per_s": self.samples_per_s,
            "generated_tokens_per_s": self.generated_tokens_per_s,
            "feasible": self.feasible,
            "worst_memory_violation_bytes": self.violation_bytes,
            "worst_host_memory_violation_bytes": self.host_violation_bytes,
            "events": events,
            "peak_memory_bytes": list(self.peak_memory_bytes),
            "capacity_bytes": self.capacity_bytes,
            "host_memory_bytes": list(self.host_memory_bytes),
            "host_capacity_bytes": self.host_capacity_bytes,
            **self._pool_capacities(),
        }

    def _steady(self) -> dict[str, Any]:
        """The period and the unrolled makespan, written only under the steady-state objective."""
        if self.period is None:
            return {}
        return {"period": self.period, "unrolled_makespan": self.unrolled_makespan}

    def _pool_capacities(self) -> dict[str, Any]:
        """Per-GPU and per-node capacities, written only for a cluster of GPU pools."""
        if not self.gpu_capacity_bytes:
            return {}
        return {
            "gpu_capacity_bytes": list(self.gpu_capacity_bytes),
            "node_host_capacity_bytes": list(self.node_capacity_bytes),
        }
