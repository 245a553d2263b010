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

from collections.abc import Sequence
from dataclasses import dataclass

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation import host_memory
from rlplan.rpeg.evaluation.host_memory import HostOverflow
from rlplan.rpeg.evaluation.occupancy import Occupancy
from rlplan.rpeg.evaluation.period import (
    CycleEdge,
    cycle_edges,
    cycle_offsets,
    cycle_problem,
    cyclic_sequence,
    max_cycle_ratio,
    periodic_starts,
    sequence_offsets,
)
from rlplan.rpeg.evaluation.schedule import (
    NotTopological,
    RunGraph,
    list_schedule,
    ordered_schedule,
)
from rlplan.rpeg.evaluation.trace import EDGE_KINDS, RUN_KINDS, Evaluation, Event, Trace
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, staleness_fused
from rlplan.rpeg.templates import Kind, unroll

#: Re-exported: the result types live in :mod:`rlplan.rpeg.evaluation.trace`.
__all__ = ["EDGE_KINDS", "RUN_KINDS", "Evaluation", "Event", "Simulator", "Trace"]

#: Steps of the list schedule whose middle gives a plan's steady-state order
#: (docs/simulator.md, "The steady-state period"): the shorter first, the longer
#: when the shorter's middle does not repeat yet.
PERIOD_STEPS = (16, 64)


@dataclass(frozen=True, slots=True)
class StalenessTerms:
    """What of a plan depends on its staleness alone, built once per staleness.

    Attributes
    ----------
    fused
        Whether the staleness names the fused (AC-share) template.
    factor
        The plan's objective factor (:meth:`Simulator.plan_factor`); only
        for the simulator's own template.
    graph
        The unrolled runs (:meth:`Simulator.run_graph`); None when the
        staleness names the other template.
    """

    fused: bool
    factor: float
    graph: RunGraph | None


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
        #: One cost model and usable memory per GPU pool (docs/cost-model.md#pools).
        self.costs = directory.costs
        self.cluster = directory.cluster
        self.capacity = directory.capacity
        self.capacities = directory.capacities
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
        self._colocations = tuple(cost.colocation for cost in self.costs)
        #: Host memory of every flat node, the smallest of them, and each pool's node width.
        self.host_capacities = self.cluster.node_capacities()
        self.host_capacity = min(self.cluster.host_capacities)
        self._node_widths = self.cluster.node_widths()
        self._switches: dict[tuple, tuple[float, float]] = {}
        self._graphs: dict[tuple, RunGraph] = {}
        #: Per staleness tuple: :class:`StalenessTerms` (:meth:`staleness_terms`).
        self._staleness_terms: dict[tuple, StalenessTerms] = {}
        #: Lags of template edges by their endpoints' blocks (and layouts): :meth:`_lags`.
        self._lag_cache: dict[tuple, float] = {}
        self._mean_generated = self.instance.workload.mean_generated
        #: Whether a plan's time is its steady-state period (``optimizer.objective``).
        self.steady_state = self.instance.steady_state
        self._pub_steps = tuple(e.staleness_model for e in self.template.pub_edges)

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
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).plan_factor(plan)
        return terms.factor

    def staleness_terms(self, staleness: tuple[tuple[str, int], ...]) -> StalenessTerms:
        """The template, factor and run graph of plans with ``staleness``, cached.

        A plan's fast path reads its template, objective factor and runs from
        this one look-up.
        """
        found = self._staleness_terms.get(staleness)
        if found is None:
            fused = staleness_fused(staleness)
            if fused != self.fused:
                found = StalenessTerms(fused, 0.0, None)
            else:
                stale = any(value > 0 for _, value in staleness)
                factor = self.stale_factor if stale else self.factor
                found = StalenessTerms(fused, factor, self.run_graph(staleness))
            self._staleness_terms[staleness] = found
        return found

    # -- graph of runs per staleness ----------------------------------------------

    def graph(self, staleness: tuple[tuple[str, int], ...]) -> tuple:
        """(predecessors, successors, in-degrees) of every run for this staleness, cached."""
        found = self.run_graph(staleness)
        return found.preds, found.succs, found.indegree

    def run_graph(
        self, staleness: tuple[tuple[str, int], ...], steps: int | None = None
    ) -> RunGraph:
        """The runs of ``steps`` (default ``k_eval``) steps for this staleness, cached."""
        steps = self.k_eval if steps is None else steps
        key = staleness if steps == self.k_eval else (staleness, steps)
        found = self._graphs.get(key)
        if found is None:
            edges = unroll(self.template, steps, dict(staleness))
            runs = self.num_vertices * steps
            preds: list[list[tuple[int, int]]] = [[] for _ in range(runs)]
            succs: list[list[int]] = [[] for _ in range(runs)]
            for edge in edges:
                preds[edge.dst].append((edge.src, edge.template_edge))
                succs[edge.src].append(edge.dst)
            found = RunGraph(
                preds=tuple(tuple(p) for p in preds),
                succs=tuple(tuple(s) for s in succs),
                indegree=tuple(len(p) for p in preds),
                vertex_of=tuple(run % self.num_vertices for run in range(runs)),
                sources=tuple(run for run in range(runs) if not preds[run]),
            )
            self._graphs[key] = found
        return found

    # -- per-plan coefficients ---------------------------------------------------------

    def lags(self, plan: Plan) -> list[float]:
        """Lag of every template edge (data edges, then pub edges) under this plan.

        A data edge's lag is its transfer plus its delay (a rule reward's
        stage, 0 on other edges).
        """
        if plan.fused != self.fused:
            return self.variant(plan.fused).lags(plan)
        return self._lags(plan.placements)[:-1]

    def _lags(self, placements: Sequence[Placement]) -> list[float]:
        """:meth:`lags` followed by the chain edges' 0.0 (what the schedulers read).

        Lags are cached by the positions (and, for pub edges, the layouts) of
        their two endpoints, so a plan costs one dictionary look-up per edge.
        """
        cache = self._lag_cache
        delays = self._data_delays
        lags = []
        for index, (src, dst) in enumerate(self._data_edges):
            first, second = placements[src].block, placements[dst].block
            if first is second:
                lags.append(delays[index])
                continue
            # (start, end) names a block: a sliced one ends past start + size.
            key = (first.start, first.end, second.start, second.end)
            lag = cache.get(key)
            if lag is None:
                lag = cache[key] = self._data_lag(first, second)
            lags.append(lag + delays[index])
        for index, (src, dst, _) in enumerate(self._pub_edges):
            source, target = placements[src], placements[dst]
            first, second = source.block, target.block
            # (tp, pp, ZeRO-3 shards, ep, etp): what the source's weights look
            # like; the destination's decides the shard it receives.
            key = (
                index,
                first.start,
                first.end,
                second.start,
                second.end,
                source.strategy.layout,
                target.strategy.layout,
            )
            lag = cache.get(key)
            if lag is None:
                lag = cache[key] = self._pub_lag(index, source, target)
            lags.append(lag)
        lags.append(0.0)
        return lags

    def _data_lag(self, first, second) -> float:
        if first == second:
            return 0.0
        cost = self.costs[second.pool]
        return cost.data_lag(False, self.cluster.span_level(first, second))

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
        # The destination's pool: its weight shard, and its links on its own block.
        pool = target.block.pool
        if self._refits[index]:
            colocation = self._colocations[pool]
            return colocation.refit_lag(model, same_block, same_layout, level, destination)
        return self.costs[pool].pub_lag(model, same_block, same_layout, level, destination)

    # -- colocation --------------------------------------------------------------------

    def colocated(self, plan: Plan) -> tuple[bool, ...]:
        """Per vertex: whether it is a rollout engine whose block shares a GPU with another's.

        Any shared GPU counts: a block nested in the engine's, one holding
        it, or a run of nodes overlapping it in part.
        """
        return self._colocated(Occupancy.of(plan.placements))

    def _colocated(self, occupancy: Occupancy) -> tuple[bool, ...]:
        flags = [False] * self.num_vertices
        for engine in self._engines:
            flags[engine] = occupancy.shares(engine)
        return tuple(flags)

    def switch(self, vertex: int, strategy, pool: int = 0) -> tuple[float, float]:
        """(wake, sleep) seconds of rollout engine ``vertex`` with ``strategy`` when colocated,
        on a block of GPU pool ``pool``."""
        key = (vertex, strategy, pool)
        found = self._switches.get(key)
        if found is None:
            model = self.template.vertices[vertex].model
            colocation = self._colocations[pool]
            found = self._switches[key] = (
                colocation.wake(model, strategy),
                colocation.sleep(model, strategy),
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
        return self._durations(plan.placements, candidates, colocated)

    def _durations(
        self,
        placements: Sequence[Placement],
        candidates: Sequence[Candidate],
        colocated: Sequence[bool],
    ) -> list[float]:
        durations = [candidate.time for candidate in candidates]
        for engine in self._engines:
            if colocated[engine]:
                placement = placements[engine]
                wake, sleep = self.switch(engine, placement.strategy, placement.block.pool)
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
            pool = placement.block.pool
            if vertex.kind is Kind.GENERATE:
                idle = (0.0, 0.0)
                wake, sleep = self.switch(index, strategy, pool) if colocated[index] else idle
                phases.append(("wake", wake, "sleep", sleep))
                continue
            colocation = self._colocations[pool]
            onload = colocation.onload(vertex.kind, vertex.model, strategy)
            offload = colocation.offload(vertex.kind, vertex.model, strategy)
            phases.append(("onload", onload, "offload", offload))
        return phases

    def candidates(self, plan: Plan) -> list:
        """The candidate (time, memory) of every vertex under this plan."""
        if plan.fused != self.fused:
            return self.variant(plan.fused).candidates(plan)
        return self.directory.candidates_of(plan.placements)

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
        for engine in self._engines:
            engines[engine] = True
        return host_memory.node_terms(
            [p.block for p in plan.placements],
            self._hosts(candidates, colocated),
            engines,
            self._model_of,
            self.cluster,
        )

    def _hosts(self, candidates: Sequence[Candidate], colocated: Sequence[bool]) -> list[float]:
        """Host bytes per GPU of every vertex (0 for an engine alone on its GPUs: never asleep)."""
        hosts = [candidate.host for candidate in candidates]
        for engine in self._engines:
            if not colocated[engine]:
                hosts[engine] = 0.0
        return hosts

    def host_violation(
        self, plan: Plan, candidates: list, colocated: tuple[bool, ...] | None = None
    ) -> float:
        """Worst per-node host-memory overflow in bytes (0 when every node fits)."""
        occupancy = Occupancy.of(plan.placements)
        colocated = colocated if colocated is not None else self._colocated(occupancy)
        return self._host_violation(plan, candidates, colocated, occupancy)

    def _host_violation(
        self,
        plan: Plan,
        candidates: list[Candidate],
        colocated: tuple[bool, ...],
        occupancy: Occupancy,
    ) -> float:
        """:meth:`host_violation`; the per-node terms only when the bound says a node may overflow.

        :meth:`Occupancy.host_bound` bounds every node's bytes from above,
        so when it fits the answer is 0 exactly as the per-node terms give it.
        """
        bound = occupancy.host_bound(self._hosts(candidates, colocated), self._node_widths)
        if bound <= self.host_capacity:
            return 0.0
        terms = self.host_terms(plan, candidates, colocated)
        return host_memory.worst_overflow(terms, self.host_capacities)

    def host_overflows(self, plan: Plan, candidates: list, colocated=None) -> list[HostOverflow]:
        """Every node whose host memory the plan overflows, the worst first."""
        names = self.template.names
        capacities = self.host_capacities
        overflows = [
            HostOverflow(node, needed, capacities[node], tuple(names[v] for v in holders))
            for node, (needed, holders) in sorted(
                self.host_terms(plan, candidates, colocated).items()
            )
            if needed > capacities[node]
        ]
        return sorted(overflows, key=lambda o: (-o.excess, o.node))

    def gpu_violation(self, plan: Plan, candidates: list | None = None) -> float:
        """Worst per-GPU overflow in bytes (0 when every GPU fits).

        A GPU's peak grows with the set of blocks covering it; checking the
        first GPU of each placed block suffices, for nested blocks and for runs
        of nodes that overlap in part (:meth:`Occupancy.gpu_overflow`).
        """
        candidates = candidates if candidates is not None else self.candidates(plan)
        occupancy = Occupancy.of(plan.placements)
        return occupancy.gpu_overflow(candidates, self._model_of, self.capacities)

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
                if block.start <= gpu < block.end and (
                    not block.sliced or block.holds(gpu, gpu + 1)
                ):
                    candidate = candidates[index]
                    model = self._model_of[index]
                    resident[model] = max(resident.get(model, 0.0), candidate.resident)
                    transient = max(transient, candidate.transient)
            peaks.append(sum(resident.values()) + transient)
        return peaks

    # -- scheduling -----------------------------------------------------------------------

    def _schedule(
        self,
        plan: Plan,
        graph: RunGraph,
        occupancy: Occupancy,
        durations: list[float],
        lags: list[float],
    ) -> tuple[list[float], list[float], list[int]]:
        """Start and end of every run, and the order runs were placed in.

        ``lags`` as :meth:`_lags` gives them (the chain edges' 0.0 last).
        """
        if plan.order is None:
            return list_schedule(graph, occupancy.cover, durations, lags)
        count = self.num_vertices
        steps = len(graph.preds) // count
        if self.steady_state:
            self._check_cycle(plan, lags)
            sequence = cyclic_sequence(plan.order, count, steps)
        else:
            sequence = [step * count + vertex for vertex, step in plan.order]
        try:
            start, end = ordered_schedule(graph, occupancy.cover, durations, lags, sequence)
        except NotTopological as exc:
            names = self.template.names
            raise PlanError(
                "plan.order",
                f"not a topological order: ({names[exc.run % count]}, {exc.run // count}) "
                f"comes before its predecessor ({names[exc.pred % count]}, {exc.pred // count})",
            ) from None
        return start, end, sequence

    # -- the steady-state period (docs/simulator.md, "The steady-state period") ------------

    def precedences(
        self, staleness: tuple[tuple[str, int], ...], lags: Sequence[float]
    ) -> list[tuple[int, int, float, int]]:
        """(source, user, lag s, step lag) of every template edge: data edges at step lag 0,
        pub edges at 1 + the staleness of their model (0 for a synchronous edge)."""
        values = dict(staleness)
        found = [(src, dst, lags[i], 0) for i, (src, dst) in enumerate(self._data_edges)]
        offset = len(self._data_edges)
        for index, (src, dst, _) in enumerate(self._pub_edges):
            key = self._pub_steps[index]
            sigma = values[key] if key is not None else 0
            found.append((src, dst, lags[offset + index], 1 + sigma))
        return found

    def _check_cycle(self, plan: Plan, lags: Sequence[float]) -> None:
        """Refuse a steady-state order that is not a cyclic order of the plan (PlanError)."""
        problem = cycle_problem(
            plan.order, self.num_vertices, self.precedences(plan.staleness, lags)
        )
        if problem is not None:
            names = self.template.names
            for index in range(self.num_vertices - 1, -1, -1):
                problem = problem.replace(f"vertex {index}", names[index])
            raise PlanError("plan.order", problem)

    def period(self, plan: Plan) -> float:
        """The steady-state period of ``plan``: its long-run mean step time (s)."""
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).period(plan)
        placements = plan.placements
        occupancy = Occupancy.of(placements)
        colocated = self._colocated(occupancy)
        durations = self._durations(placements, self.directory.candidates_of(placements), colocated)
        return self._period(plan, occupancy, durations, self._lags(placements))

    def _period(
        self, plan: Plan, occupancy: Occupancy, durations: list[float], lags: list[float]
    ) -> float:
        """The largest cycle ratio of the plan's event graph (:mod:`.period`).

        The order on shared GPUs is the plan's cyclic order, or without one
        the list schedule's, read in the middle of :data:`PERIOD_STEPS` steps;
        should that not repeat, the limit of the list schedule's makespan.
        """
        edges = self._event_graph(plan, occupancy, durations, lags)
        if edges is None:
            steps = PERIOD_STEPS[-1]
            longer = self.makespan_over(plan, 2 * steps)
            return (longer - self.makespan_over(plan, steps)) / steps
        return max_cycle_ratio(self.num_vertices, edges)

    def _event_graph(
        self, plan: Plan, occupancy: Occupancy, durations: list[float], lags: list[float]
    ) -> list[CycleEdge] | None:
        """The plan's event graph (:func:`cycle_edges`); None if its list order never repeats."""
        cover = occupancy.cover
        precedences = self.precedences(plan.staleness, lags)
        if plan.order is not None:
            self._check_cycle(plan, lags)
            return cycle_edges(durations, precedences, cycle_offsets(plan.order, cover))
        for steps in PERIOD_STEPS:
            graph = self.run_graph(plan.staleness, steps)
            _, _, placed = list_schedule(graph, cover, durations, lags)
            offsets = sequence_offsets(placed, self.num_vertices, steps, cover)
            if offsets is not None:
                return cycle_edges(durations, precedences, offsets)
        return None

    def periodic_schedule(self, plan: Plan) -> tuple[float, list[float]]:
        """(period, offset a_v of every vertex) of the earliest periodic schedule of ``plan``.

        Run (v, t) starts at a_v + t*T. Without a repeating list order the
        offsets are those of the event graph of the plan's placement with no
        turns (the warm start of an exact model needs them only as a hint).
        """
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).periodic_schedule(plan)
        placements = plan.placements
        occupancy = Occupancy.of(placements)
        colocated = self._colocated(occupancy)
        durations = self._durations(placements, self.directory.candidates_of(placements), colocated)
        lags = self._lags(placements)
        period = self._period(plan, occupancy, durations, lags)
        edges = self._event_graph(plan, occupancy, durations, lags)
        if edges is None:
            edges = cycle_edges(durations, self.precedences(plan.staleness, lags), {})
        return period, periodic_starts(self.num_vertices, edges, period)

    def makespan_over(self, plan: Plan, steps: int) -> float:
        """Makespan of ``plan`` unrolled over ``steps`` steps, in its order (list or cyclic)."""
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).makespan_over(plan, steps)
        placements = plan.placements
        occupancy = Occupancy.of(placements)
        colocated = self._colocated(occupancy)
        durations = self._durations(placements, self.directory.candidates_of(placements), colocated)
        graph = self.run_graph(plan.staleness, steps)
        if plan.order is not None and not self.steady_state and steps != self.k_eval:
            raise ValueError("a plan's order of k_eval steps does not extend to other steps")
        _, end, _ = self._schedule(plan, graph, occupancy, durations, self._lags(placements))
        return max(end)

    # -- public API --------------------------------------------------------------------------

    def evaluate(self, plan: Plan) -> Evaluation:
        """Makespan, score and worst memory violation of ``plan`` (the fast path).

        Everything of the plan is computed once: its candidates, which
        blocks share GPUs (:class:`Occupancy`), its durations and lags; the
        staleness's template, factor and runs are one look-up
        (:meth:`staleness_terms`).
        """
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).evaluate(plan)
        placements = plan.placements
        candidates = self.directory.candidates_of(placements)
        occupancy = Occupancy.of(placements)
        colocated = self._colocated(occupancy)
        durations = self._durations(placements, candidates, colocated)
        lags = self._lags(placements)
        _, end, placed = self._schedule(plan, terms.graph, occupancy, durations, lags)
        violation = occupancy.gpu_overflow(
            candidates, self._model_of, self.capacities
        ) + self._host_violation(plan, candidates, colocated, occupancy)
        makespan = max(end)
        if self.steady_state:
            makespan = self.k_eval * self._period(plan, occupancy, durations, lags)
        return Evaluation(makespan, violation, tuple(placed), terms.factor)

    def simulate(self, plan: Plan) -> Trace:
        """Full simulation: schedule, transfers, per-GPU memory and throughput."""
        terms = self.staleness_terms(plan.staleness)
        if terms.graph is None:
            return self.variant(terms.fused).simulate(plan)
        candidates = self.candidates(plan)
        occupancy = Occupancy.of(plan.placements)
        colocated = self._colocated(occupancy)
        durations = self._durations(plan.placements, candidates, colocated)
        lags = self._lags(plan.placements)
        start, end, _ = self._schedule(plan, terms.graph, occupancy, durations, lags)
        events = self._events(plan, start, end, lags, self.phases(plan, colocated))
        makespan = max(end)
        period = None
        if self.steady_state:
            period = self._period(plan, occupancy, durations, lags)
        step_time = makespan / self.k_eval if period is None else period
        sequences = self.instance.workload.sequences
        peaks = self.peak_memory(plan)
        capacities = self.gpu_capacities()
        violation = max(0.0, *(peak - cap for peak, cap in zip(peaks, capacities, strict=True)))
        host = self.host_terms(plan, candidates, colocated)
        nodes = self.cluster.num_nodes
        return Trace(
            makespan=makespan if period is None else self.k_eval * period,
            k_eval=self.k_eval,
            step_time=step_time,
            samples_per_s=sequences / step_time,
            generated_tokens_per_s=sequences * self._mean_generated / step_time,
            events=tuple(events),
            peak_memory_bytes=tuple(peaks),
            capacity_bytes=min(self.capacities),
            violation_bytes=violation,
            start_order=tuple(
                (run % self.num_vertices, run // self.num_vertices)
                for run in sorted(range(self.num_runs), key=lambda r: (start[r], r))
            ),
            template=self.template.kind if self.instance.algorithm == "ppo" else None,
            factor=terms.factor,
            host_memory_bytes=tuple(host.get(node, (0.0, []))[0] for node in range(nodes)),
            host_capacity_bytes=self.host_capacity,
            host_violation_bytes=host_memory.worst_overflow(host, self.host_capacities),
            host_overflows=tuple(self.host_overflows(plan, candidates, colocated)),
            gpu_capacity_bytes=capacities if self.cluster.pooled else (),
            node_capacity_bytes=self.host_capacities if self.cluster.pooled else (),
            period=period,
            unrolled_makespan=makespan,
        )

    def gpu_capacities(self) -> tuple[float, ...]:
        """Usable memory of every flat GPU (its pool's)."""
        return tuple(
            self.capacities[geometry.pool]
            for geometry in self.cluster.pools
            for _ in range(geometry.num_gpus)
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
