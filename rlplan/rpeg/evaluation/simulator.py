"""The exact simulator: the single judge of every plan.

Runs are placed by a serial schedule-generation scheme. Each run starts at the
latest of (a) every predecessor's end plus the edge's lag and (b) the time
every GPU of its block becomes free. Runs are taken in the plan's ``order``
when it has one (it must be topological), otherwise in a deterministic list
order: the ready run that can start earliest, ties by step then template order.

A data edge may carry a plan-independent delay (a rule reward's CPU stage,
:mod:`rlplan.rpeg.templates`): it is added to the edge's lag whatever the
blocks, and the trace shows the stage as one ``cpu`` event per step from the
rollout's end (docs/simulator.md, "Rule rewards").

Memory is checked under the static residency rule: a GPU's peak is the sum,
over models with a vertex on it, of that model's largest resident footprint
there, plus the largest transient of the vertices on it; each node's host
memory holds offloaded states and sleeping engines
(:mod:`rlplan.rpeg.evaluation.host_memory`).

Colocation is priced as the frameworks pay it (docs/cost-model.md#colocation):
a rollout engine whose block shares a GPU with another vertex's wakes before
each run and sleeps after it, offloaded train and infer vertices load their
states before each run and a train vertex stores them after it, and the
refit of an engine on its trainer's block is a CUDA IPC copy. Each is its own
event of the trace, inside the run's span on its GPUs (refits between runs).

A simulator judges plans of both templates of an AC-share instance: a plan
of the other template goes to the sibling simulator of that template's
directory. The makespan and step time are always the raw simulated ones;
the *score* the solvers minimise is the makespan times ``1 + lambda_ac`` for
a fused (AC-share) plan and times ``1 + lambda_stale`` for an off-policy plan
(some trained model at staleness > 0), the makespan itself otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation import host_memory
from rlplan.rpeg.evaluation.host_memory import HostOverflow
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.templates import Kind, unroll

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
        End of the last run of the ``k_eval`` steps, seconds.
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
        }


class Simulator:
    """Simulates plans of one instance.

    Parameters
    ----------
    directory
        The instance's candidate directory (its costs are the simulator's).
    """

    def __init__(self, directory: CandidateDirectory) -> None:
        self.directory = directory
        self.instance = directory.instance
        self.template = directory.template
        self.cost = directory.cost
        self.cluster = directory.cluster
        self.capacity = directory.capacity
        self.k_eval = self.instance.k_eval
        self.num_vertices = len(self.template.vertices)
        self.num_runs = self.num_vertices * self.k_eval
        self.fused = directory.fused
        #: Objective factor of this template's on-policy plans (1 + lambda_ac when
        #: fused) and of its off-policy plans (x 1 + lambda_stale).
        self.factor = self.instance.score_factor(self.fused)
        self.stale_factor = self.instance.score_factor(self.fused, (("", 1),))
        self._variants: dict[bool, Simulator] = {self.fused: self}
        models = []
        for vertex in self.template.vertices:
            if vertex.model not in models:
                models.append(vertex.model)
        self.models = tuple(models)
        self._model_of = tuple(models.index(v.model) for v in self.template.vertices)
        self._is_train = tuple(v.kind is Kind.TRAIN for v in self.template.vertices)
        self._data_edges = tuple((e.src, e.dst) for e in self.template.data_edges)
        self._data_delays = self.template.data_delays
        stages = self.template.stage_edges
        #: (vertex feeding the CPU stage, its name, its seconds), or None.
        self._stage = (
            (stages[0].src, stages[0].stage, max(e.delay_s for e in stages)) if stages else None
        )
        self._pub_edges = tuple((e.src, e.dst, e.model) for e in self.template.pub_edges)
        vertices = self.template.vertices
        #: Rollout engines, and which pub edges refit one (their lags: :meth:`_pub_lag`).
        self._engines = tuple(i for i, v in enumerate(vertices) if v.kind is Kind.GENERATE)
        self._refits = tuple(vertices[dst].kind is Kind.GENERATE for _, dst, _ in self._pub_edges)
        self.colocation = self.cost.colocation
        self.host_capacity = self.instance.hardware.host_memory_per_node
        self._switches: dict[tuple, tuple[float, float]] = {}
        self._graphs: dict[tuple, tuple] = {}
        self._lag_cache: dict[tuple, float] = {}
        self._mean_generated = self.instance.workload.mean_generated

    def variant(self, fused: bool) -> Simulator:
        """The simulator of the separate (``fused=False``) or fused template, built once."""
        found = self._variants.get(fused)
        if found is None:
            found = Simulator(self.directory.variant(fused))
            found._variants = self._variants
            self._variants[fused] = found
        return found

    def for_plan(self, plan: Plan) -> Simulator:
        """The simulator of ``plan``'s template (this one or its AC-share sibling)."""
        return self if plan.fused == self.fused else self.variant(plan.fused)

    def plan_factor(self, plan: Plan) -> float:
        """The objective factor of ``plan`` (:meth:`Instance.score_factor` of its template)."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).plan_factor(plan)
        return self.stale_factor if any(s > 0 for _, s in plan.staleness) else self.factor

    # -- graph of runs per staleness ----------------------------------------------

    def graph(self, staleness: tuple[tuple[str, int], ...]) -> tuple:
        """(predecessors, successors) of every run for this staleness, cached."""
        found = self._graphs.get(staleness)
        if found is None:
            edges = unroll(self.template, self.k_eval, dict(staleness))
            preds: list[list[tuple[int, int]]] = [[] for _ in range(self.num_runs)]
            succs: list[list[int]] = [[] for _ in range(self.num_runs)]
            for edge in edges:
                preds[edge.dst].append((edge.src, edge.template_edge))
                succs[edge.src].append(edge.dst)
            found = (
                tuple(tuple(p) for p in preds),
                tuple(tuple(s) for s in succs),
                tuple(len(p) for p in preds),
            )
            self._graphs[staleness] = found
        return found

    # -- per-plan coefficients ---------------------------------------------------------

    def lags(self, plan: Plan) -> list[float]:
        """Lag of every template edge (data edges, then pub edges) under this plan.

        Lags are cached by the positions (and, for pub edges, the layouts) of
        their two endpoints, so a plan costs one dictionary look-up per edge.
        A data edge's lag is its transfer plus its delay (a rule reward's
        stage, 0 on other edges).
        """
        if plan.fused != self.fused:
            return self.variant(plan.fused).lags(plan)
        placements = plan.placements
        cache = self._lag_cache
        delays = self._data_delays
        lags = []
        for index, (src, dst) in enumerate(self._data_edges):
            first, second = placements[src].block, placements[dst].block
            if first is second:
                lags.append(delays[index])
                continue
            key = (first.start, first.size, second.start, second.size)
            lag = cache.get(key)
            if lag is None:
                lag = cache[key] = self._data_lag(first, second)
            lags.append(lag + delays[index])
        for index, (src, dst, _) in enumerate(self._pub_edges):
            source, target = placements[src], placements[dst]
            first, second = source.block, target.block
            origin, destination = source.strategy, target.strategy
            key = (
                index,
                first.start,
                first.size,
                second.start,
                second.size,
                # (tp, pp, ZeRO-3 shards, ep, etp): what the source's weights look
                # like; the destination's decides the shard it receives.
                *origin.layout,
                *destination.layout,
            )
            lag = cache.get(key)
            if lag is None:
                lag = cache[key] = self._pub_lag(index, source, target)
            lags.append(lag)
        return lags

    def _data_lag(self, first, second) -> float:
        if first == second:
            return 0.0
        return self.cost.data_lag(False, self.cluster.span_level(first, second))

    def _pub_lag(self, index: int, source, target) -> float:
        model = self._pub_edges[index][2]
        same_block = source.block == target.block
        destination = target.strategy
        same_layout = source.strategy.layout == destination.layout
        level = (
            target.block.level
            if same_block
            else self.cluster.span_level(source.block, target.block)
        )
        if self._refits[index]:
            return self.colocation.refit_lag(model, same_block, same_layout, level, destination)
        return self.cost.pub_lag(model, same_block, same_layout, level, destination)

    # -- colocation --------------------------------------------------------------------

    def colocated(self, plan: Plan) -> tuple[bool, ...]:
        """Per vertex: whether it is a rollout engine whose block shares a GPU with another's.

        Any shared GPU counts: a block nested in the engine's, one holding
        it, or a run of nodes overlapping it in part.
        """
        blocks = [placement.block for placement in plan.placements]
        flags = [False] * len(blocks)
        for engine in self._engines:
            own = blocks[engine]
            flags[engine] = any(
                index != engine and block.intersects(own) for index, block in enumerate(blocks)
            )
        return tuple(flags)

    def switch(self, vertex: int, strategy) -> tuple[float, float]:
        """(wake, sleep) seconds of rollout engine ``vertex`` with ``strategy`` when colocated."""
        key = (vertex, strategy)
        found = self._switches.get(key)
        if found is None:
            model = self.template.vertices[vertex].model
            found = self._switches[key] = (
                self.colocation.wake(model, strategy),
                self.colocation.sleep(model, strategy),
            )
        return found

    def durations(
        self,
        plan: Plan,
        candidates: list | None = None,
        colocated: tuple[bool, ...] | None = None,
    ) -> list[float]:
        """Seconds of each vertex's runs: its candidate's time, plus wake and sleep if colocated."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).durations(plan, candidates, colocated)
        candidates = candidates if candidates is not None else self.candidates(plan)
        colocated = colocated if colocated is not None else self.colocated(plan)
        durations = [candidate.time for candidate in candidates]
        for engine in self._engines:
            if colocated[engine]:
                wake, sleep = self.switch(engine, plan.placements[engine].strategy)
                durations[engine] += wake + sleep
        return durations

    def phases(
        self, plan: Plan, colocated: tuple[bool, ...]
    ) -> list[tuple[str, float, str, float]]:
        """Per vertex (kind before, seconds, kind after, seconds) around the compute of a run.

        Wake and sleep of a colocated engine, onload and offload of an
        offloaded train or infer vertex; 0 s where there is none.
        """
        phases = []
        for index, placement in enumerate(plan.placements):
            vertex, strategy = self.template.vertices[index], placement.strategy
            if vertex.kind is Kind.GENERATE:
                wake, sleep = self.switch(index, strategy) if colocated[index] else (0.0, 0.0)
                phases.append(("wake", wake, "sleep", sleep))
                continue
            onload = self.colocation.onload(vertex.kind, vertex.model, strategy)
            offload = self.colocation.offload(vertex.kind, vertex.model, strategy)
            phases.append(("onload", onload, "offload", offload))
        return phases

    def candidates(self, plan: Plan) -> list:
        """The candidate (time, memory) of every vertex under this plan."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).candidates(plan)
        directory = self.directory
        return [
            directory.candidate(index, placement.block.extent, placement.strategy)
            for index, placement in enumerate(plan.placements)
        ]

    def memory_violation(self, plan: Plan, candidates: list | None = None) -> float:
        """Worst per-GPU overflow plus worst per-node host overflow, bytes (0 when all fit)."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).memory_violation(plan, candidates)
        candidates = candidates if candidates is not None else self.candidates(plan)
        return self.gpu_violation(plan, candidates) + self.host_violation(plan, candidates)

    def host_terms(
        self, plan: Plan, candidates: list, colocated: tuple[bool, ...] | None = None
    ) -> dict[int, tuple[float, list[int]]]:
        """Host bytes and their holders on every node where some vertex holds bytes."""
        colocated = colocated if colocated is not None else self.colocated(plan)
        engines = [False] * self.num_vertices
        hosts = [candidate.host for candidate in candidates]
        for engine in self._engines:
            engines[engine] = True
            if not colocated[engine]:
                hosts[engine] = 0.0  # an engine alone on its GPUs never sleeps
        return host_memory.node_terms(
            [p.block for p in plan.placements],
            hosts,
            engines,
            self._model_of,
            self.cluster.gpus_per_node,
        )

    def host_violation(
        self, plan: Plan, candidates: list, colocated: tuple[bool, ...] | None = None
    ) -> float:
        """Worst per-node host-memory overflow in bytes (0 when every node fits)."""
        if not any(candidate.host > 0 for candidate in candidates):
            return 0.0
        terms = self.host_terms(plan, candidates, colocated)
        return host_memory.worst_overflow(terms, self.host_capacity)

    def host_overflows(self, plan: Plan, candidates: list, colocated=None) -> list[HostOverflow]:
        """Every node whose host memory the plan overflows, the worst first."""
        names = self.template.names
        overflows = [
            HostOverflow(node, needed, self.host_capacity, tuple(names[v] for v in holders))
            for node, (needed, holders) in sorted(
                self.host_terms(plan, candidates, colocated).items()
            )
            if needed > self.host_capacity
        ]
        return sorted(overflows, key=lambda o: (-o.excess, o.node))

    def gpu_violation(self, plan: Plan, candidates: list | None = None) -> float:
        """Worst per-GPU overflow in bytes (0 when every GPU fits).

        A GPU's peak grows with the set of blocks covering it. Every block
        covering GPU x also covers the first GPU of the one among them that
        starts last, so checking the first GPU of each placed block suffices.
        This holds for nested blocks and for runs of nodes that overlap in
        part: nodes 0-2 and 1-3 are both checked at node 1's first GPU.
        """
        candidates = candidates if candidates is not None else self.candidates(plan)
        ranges = [(p.block.start, p.block.start + p.block.size) for p in plan.placements]
        model_of = self._model_of
        worst = 0.0
        for gpu in {low for low, _ in ranges}:
            resident: dict[int, float] = {}
            transient = 0.0
            for index, (low, high) in enumerate(ranges):
                if low <= gpu < high:
                    candidate = candidates[index]
                    model = model_of[index]
                    if candidate.resident > resident.get(model, 0.0):
                        resident[model] = candidate.resident
                    if candidate.transient > transient:
                        transient = candidate.transient
            overflow = sum(resident.values()) + transient - self.capacity
            if overflow > worst:
                worst = overflow
        return worst

    def peak_memory(self, plan: Plan) -> list[float]:
        """Peak bytes of every GPU."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).peak_memory(plan)
        candidates = self.candidates(plan)
        peaks = []
        for gpu in range(self.cluster.num_gpus):
            resident: dict[int, float] = {}
            transient = 0.0
            for index, placement in enumerate(plan.placements):
                block = placement.block
                if block.start <= gpu < block.end:
                    candidate = candidates[index]
                    model = self._model_of[index]
                    resident[model] = max(resident.get(model, 0.0), candidate.resident)
                    transient = max(transient, candidate.transient)
            peaks.append(sum(resident.values()) + transient)
        return peaks

    # -- scheduling -----------------------------------------------------------------------

    def _schedule(self, plan: Plan, durations: list[float], lags: list[float]):
        """Start and end of every run, and the order runs were placed in."""
        preds, succs, indegree = self.graph(plan.staleness)
        count, num_runs = self.num_vertices, self.num_runs
        spans = [(p.block.start, p.block.end) for p in plan.placements]
        free = [0.0] * self.cluster.num_gpus
        start = [0.0] * num_runs
        end = [0.0] * num_runs
        placed: list[int] = []
        if plan.order is not None:
            position = [0] * num_runs
            sequence = [step * count + vertex for vertex, step in plan.order]
            for index, run in enumerate(sequence):
                position[run] = index
            for index, run in enumerate(sequence):
                vertex = run % count
                ready = 0.0
                for pred, edge in preds[run]:
                    if position[pred] > index:
                        raise PlanError(
                            "plan.order",
                            f"not a topological order: ({self.template.vertices[vertex].name}, "
                            f"{run // count}) comes before its predecessor "
                            f"({self.template.vertices[pred % count].name}, {pred // count})",
                        )
                    arrival = end[pred] + (lags[edge] if edge >= 0 else 0.0)
                    if arrival > ready:
                        ready = arrival
                low, high = spans[vertex]
                gpu_free = max(free[low:high])
                begin = ready if ready > gpu_free else gpu_free
                finish = begin + durations[vertex]
                start[run], end[run] = begin, finish
                free[low:high] = [finish] * (high - low)
            return start, end, sequence
        remaining = list(indegree)
        ready_time = [0.0] * num_runs
        ready = [run for run in range(num_runs) if remaining[run] == 0]
        while ready:
            best_run, best_start = -1, 0.0
            for run in ready:
                low, high = spans[run % count]
                gpu_free = max(free[low:high])
                begin = ready_time[run] if ready_time[run] > gpu_free else gpu_free
                if best_run < 0 or begin < best_start or (begin == best_start and run < best_run):
                    best_run, best_start = run, begin
            ready.remove(best_run)
            vertex = best_run % count
            finish = best_start + durations[vertex]
            start[best_run], end[best_run] = best_start, finish
            low, high = spans[vertex]
            free[low:high] = [finish] * (high - low)
            placed.append(best_run)
            for succ in succs[best_run]:
                remaining[succ] -= 1
                if remaining[succ] == 0:
                    arrival = 0.0
                    for pred, edge in preds[succ]:
                        value = end[pred] + (lags[edge] if edge >= 0 else 0.0)
                        if value > arrival:
                            arrival = value
                    ready_time[succ] = arrival
                    ready.append(succ)
        return start, end, placed

    # -- public API --------------------------------------------------------------------------

    def evaluate(self, plan: Plan) -> Evaluation:
        """Makespan, score and worst memory violation of ``plan`` (the fast path)."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).evaluate(plan)
        candidates = self.candidates(plan)
        colocated = self.colocated(plan)
        durations = self.durations(plan, candidates, colocated)
        _, end, placed = self._schedule(plan, durations, self.lags(plan))
        violation = self.gpu_violation(plan, candidates) + self.host_violation(
            plan, candidates, colocated
        )
        return Evaluation(max(end), violation, tuple(placed), self.plan_factor(plan))

    def simulate(self, plan: Plan) -> Trace:
        """Full simulation: schedule, transfers, per-GPU memory and throughput."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).simulate(plan)
        candidates = self.candidates(plan)
        colocated = self.colocated(plan)
        durations = self.durations(plan, candidates, colocated)
        lags = self.lags(plan)
        start, end, _ = self._schedule(plan, durations, lags)
        events = self._events(plan, start, end, lags, self.phases(plan, colocated))
        makespan = max(end)
        step_time = makespan / self.k_eval
        sequences = self.instance.workload.sequences
        peaks = self.peak_memory(plan)
        violation = max(0.0, max(peaks) - self.capacity)
        host = self.host_terms(plan, candidates, colocated)
        nodes = self.cluster.num_gpus // self.cluster.gpus_per_node
        return Trace(
            makespan=makespan,
            k_eval=self.k_eval,
            step_time=step_time,
            samples_per_s=sequences / step_time,
            generated_tokens_per_s=sequences * self._mean_generated / step_time,
            events=tuple(events),
            peak_memory_bytes=tuple(peaks),
            capacity_bytes=self.capacity,
            violation_bytes=violation,
            start_order=tuple(
                (run % self.num_vertices, run // self.num_vertices)
                for run in sorted(range(self.num_runs), key=lambda r: (start[r], r))
            ),
            template=self.template.kind if self.instance.algorithm == "ppo" else None,
            factor=self.plan_factor(plan),
            host_memory_bytes=tuple(host.get(node, (0.0, []))[0] for node in range(nodes)),
            host_capacity_bytes=self.host_capacity,
            host_violation_bytes=host_memory.worst_overflow(host, self.host_capacity),
            host_overflows=tuple(self.host_overflows(plan, candidates, colocated)),
        )

    def _events(self, plan: Plan, start, end, lags, phases) -> list[Event]:
        """The trace's events: each run's parts on its GPUs, then its incoming transfers.

        A run's parts follow one another from its start: the wake or onload,
        the compute, the offload or sleep (parts of 0 s are left out). An edge
        with a positive lag is a ``refit`` when it brings trained weights to a
        rollout engine, else a ``transfer``; it starts after its edge's delay
        (a CPU stage, which follows the run that feeds it).
        """
        count = self.num_vertices
        names = self.template.names
        preds, _, _ = self.graph(plan.staleness)
        delays = self._data_delays
        refit_edges = {len(self._data_edges) + i for i, refit in enumerate(self._refits) if refit}
        events: list[Event] = []
        for run in sorted(range(self.num_runs), key=lambda r: (start[r], r)):
            vertex, step = run % count, run // count
            gpus = tuple(plan.placements[vertex].block.gpus())
            before_kind, before, after_kind, after = phases[vertex]
            cuts = (start[run], start[run] + before, end[run] - after, end[run])
            for kind, low, high in (
                (before_kind, cuts[0], cuts[1]),
                ("compute", cuts[1], cuts[2]),
                (after_kind, cuts[2], cuts[3]),
            ):
                if kind == "compute" or high > low:
                    events.append(Event(names[vertex], step, kind, low, high, gpus))
            if self._stage is not None and vertex == self._stage[0]:
                _, stage, seconds = self._stage
                source = (names[vertex], step)
                events.append(Event(stage, step, "cpu", end[run], end[run] + seconds, (), source))
            for pred, edge in preds[run]:
                delay = delays[edge] if 0 <= edge < len(delays) else 0.0
                if edge >= 0 and lags[edge] - delay > 0:
                    kind = "refit" if edge in refit_edges else "transfer"
                    source = (names[pred % count], pred // count)
                    events.append(
                        Event(
                            names[vertex],
                            step,
                            kind,
                            end[pred] + delay,
                            end[pred] + lags[edge],
                            (),
                            source,
                        )
                    )
        return events
