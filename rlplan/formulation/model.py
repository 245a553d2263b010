"""The backend-neutral formulation of a planning instance.

Everything the exact backends need is computed here once, from the same
candidate directory and cost model the simulator uses:

* assignments: every (vertex, block, candidate) with its duration, resident
  and transient bytes per GPU;
* runs (vertex, step) and the template edges, with the pairwise transfer lags
  as a function of the two endpoints' blocks (data edges) or of the source
  block and the destination assignment (pub edges), and the fixed delay a
  data edge may carry (a rule reward's CPU stage, added to its lag);
* the staleness candidates and which pub edge each one switches on;
* the integer time unit, the horizon from the best heuristic plan, and the
  conversion of a plan into a warm start.

Durations and lags are rounded *down* to the time unit, so the optimum of the
integer model is a valid lower bound on the true optimum over the plan space;
the unit is chosen so that rounding along any path of runs and transfers
costs at most ``REL_ROUNDING`` of the heuristic makespan.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlplan.rpeg.evaluation.choice_bound import ChoiceBound
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.schema.hardware import LEVELS
from rlplan.rpeg.schema.pools import INTER_POOL
from rlplan.rpeg.templates import Kind

#: Largest total rounding error of a schedule, relative to the upper bound.
REL_ROUNDING = 1e-4


@dataclass(frozen=True)
class Assignment:
    """A (vertex, block, candidate) with integer coefficients.

    ``duration`` is in time units (rounded down); ``resident``,
    ``transient`` and ``host`` are bytes per GPU rounded up (a model that fits
    is safe in the simulator). ``switch`` is what a rollout engine's duration
    gains when colocated (wake and sleep): the colocated duration rounded down,
    minus ``duration``, so that a colocated run is floored once.
    """

    vertex: int
    block: Block
    candidate: Candidate
    duration: int
    resident: int
    transient: int
    host: int = 0
    switch: int = 0

    @property
    def layout(self) -> tuple[int, int, int]:
        """Weight layout (tp, pp, ZeRO-3 shards): pub edges cost nothing between equal ones."""
        return self.candidate.strategy.layout


@dataclass
class Formulation:
    """Index sets and coefficients shared by the CP-SAT and MILP backends."""

    problem: Problem
    unit: float
    horizon: int
    assignments: list[list[Assignment]]
    blocks: tuple[Block, ...]
    block_index: dict[Block, int]
    staleness_choices: dict[str, tuple[int, ...]]
    num_vertices: int
    k_eval: int
    data_edges: tuple[tuple[int, int], ...]
    #: (source, user, model whose weights travel, model whose staleness applies
    #: or None for a synchronous edge).
    pub_edges: tuple[tuple[int, int, str, str | None], ...]
    #: The largest usable memory per GPU over the pools (bytes, rounded down); each
    #: memory row holds its unit's pool's (:attr:`memory_capacities`).
    memory_capacity: int
    gpu_units: tuple[tuple[int, int], ...]
    upper_bound: float
    #: Vertex whose block is fixed to the first block of its orbit under the cluster's
    #: symmetries (symmetry breaking; GPU 0 when every mask is one), or None.
    symmetry_root: int | None = None
    #: Pools inside which the root's block is fixed to the first of its orbit: those whose
    #: XOR masks are symmetries with no block pin singling out positions in them.
    symmetry_pools: tuple[int, ...] = ()
    #: Delay (seconds) of every data edge, in ``data_edges`` order (empty: none).
    data_delays: tuple[float, ...] = ()
    #: Rollout engines (generate vertices): they wake and sleep when colocated.
    engines: tuple[int, ...] = ()
    #: Host memory of a node in bytes, rounded down: the largest over the nodes;
    #: each host row holds its node's (:attr:`node_capacities`).
    host_capacity: int = 0
    #: Usable memory per GPU of each pool, and host memory of every flat node (rounded down).
    memory_capacities: tuple[int, ...] = ()
    node_capacities: tuple[int, ...] = ()
    #: Levels a transfer between two blocks may cross: ``g``, ``n``, ``r``, and
    #: ``x`` (between pools) on a cluster of several pools.
    levels: tuple[str, ...] = LEVELS
    #: Steady-state formulation (``optimizer.objective: steady_state``): its runs are one
    #: period's (``k_eval`` is 1), and a solution's run starts are followed by the period
    #: T in units (docs/formulation.md#the-steady-state-objective).
    steady: bool = False
    stats: dict = field(default_factory=dict)
    _elsewhere: dict = field(default_factory=dict, repr=False)
    _covering: dict = field(default_factory=dict, repr=False)

    # -- coefficients ------------------------------------------------------------------

    def data_lag_at(self, level: str, delay: float = 0.0, pool: int = 0) -> int:
        """Lag (units, rounded down) of a data edge between two different blocks at ``level``.

        ``delay`` is the edge's fixed delay in seconds (:meth:`data_delay`),
        added before rounding: one floor per edge, as the time unit assumes.
        ``pool`` is the destination block's GPU pool, whose links ``g``, ``n``
        and ``r`` are (``x``, between pools, is the inter-pool link).
        """
        cost = self.problem.directory.costs[pool]
        return self.to_units(cost.data_lag(False, level) + delay)

    def capacity_of(self, unit: tuple[int, int]) -> int:
        """Usable memory per GPU (bytes, rounded down) of the pool GPU unit ``unit`` lies in."""
        return self.memory_capacities[self.problem.directory.cluster.pool_of_gpu(unit[0])]

    def data_delay(self, index: int) -> float:
        """Fixed delay (seconds) of data edge ``index``: a rule reward's stage, else 0."""
        return self.data_delays[index] if index < len(self.data_delays) else 0.0

    def pub_lag_at(self, model: str, level: str, target: Assignment) -> int:
        """Lag (units) of a pub edge from another block spanning ``level`` with the user's block.

        A p2p of the user's weight shard: it depends on the level and the
        user's (tp, pp) only, not on where exactly the source block lies; the
        links are those of the user's pool.
        """
        cost = self.problem.directory.costs[target.block.pool]
        return self.to_units(cost.pub_lag(model, False, False, level, target.candidate.strategy))

    def reshard_lag(self, model: str, target: Assignment) -> int:
        """Lag (units) of a pub edge on the user's own block from another (tp, pp) layout."""
        cost = self.problem.directory.costs[target.block.pool]
        seconds = cost.pub_lag(model, True, False, target.block.level, target.candidate.strategy)
        return self.to_units(seconds)

    def blocks_of(self, vertex: int) -> tuple[int, ...]:
        """Indices of the blocks ``vertex`` can be placed on (cached)."""
        key = ("blocks", vertex)
        found = self._covering.get(key)
        if found is None:
            found = tuple(sorted({self.block_index[a.block] for a in self.assignments[vertex]}))
            self._covering[key] = found
        return found

    def assignments_on(self, vertex: int, block: int) -> tuple[int, ...]:
        """Indices of ``vertex``'s assignments on block ``block`` (cached)."""
        key = ("on", vertex)
        grouped = self._covering.get(key)
        if grouped is None:
            grouped = {}
            for index, a in enumerate(self.assignments[vertex]):
                grouped.setdefault(self.block_index[a.block], []).append(index)
            grouped = {b: tuple(indices) for b, indices in grouped.items()}
            self._covering[key] = grouped
        return grouped.get(block, ())

    def overlapping_blocks(self, vertex: int, target: int) -> tuple[int, ...]:
        """Blocks of ``vertex`` that share a GPU with block ``target`` (cached).

        Nested blocks, and runs of nodes that overlap in part (nodes 0-2 and
        1-3), share the GPUs of their intersection.
        """
        key = ("overlapping", vertex, target)
        found = self._covering.get(key)
        if found is None:
            block = self.blocks[target]
            found = tuple(b for b in self.blocks_of(vertex) if self.blocks[b].intersects(block))
            self._covering[key] = found
        return found

    def refit_lag(self, model: str, target: Assignment, same_layout: bool) -> int:
        """Lag (units) of a refit of rollout engine ``target`` from a trainer on its own block.

        The CUDA IPC copy, after a reshard when the trainer's layout differs
        (:meth:`rlplan.rpeg.model.colocation.ColocationCosts.refit_lag`).
        """
        colocation = self.problem.directory.costs[target.block.pool].colocation
        strategy = target.candidate.strategy
        seconds = colocation.refit_lag(model, True, same_layout, target.block.level, strategy)
        return self.to_units(seconds)

    def elsewhere_blocks(self, vertex: int, target: int, level: str) -> tuple[int, ...]:
        """Blocks of ``vertex`` other than ``target`` whose span with it has ``level``."""
        key = (vertex, target, level)
        found = self._elsewhere.get(key)
        if found is None:
            cluster = self.problem.directory.cluster
            target_block = self.blocks[target]
            found = tuple(
                b
                for b in self.blocks_of(vertex)
                if b != target and cluster.span_level(self.blocks[b], target_block) == level
            )
            self._elsewhere[key] = found
        return found

    def other_layout_assignments(
        self, vertex: int, target: int, layout: tuple[int, int, int]
    ) -> tuple[int, ...]:
        """Assignments of ``vertex`` on block ``target`` whose weight layout is not ``layout``."""
        return tuple(
            index
            for index in self.assignments_on(vertex, target)
            if self.assignments[vertex][index].layout != layout
        )

    @property
    def sliced(self) -> bool:
        """Whether some block of the formulation is sliced (its GPUs are no one range)."""
        return any(block.sliced for block in self.blocks)

    def node_terms(self, vertex: int) -> dict[int, tuple[tuple[int, int, int], ...]]:
        """Per flat node, ``(assignment, first GPU, GPUs)`` of ``vertex``'s assignments there.

        A block's GPUs on one node are one range, contiguous or sliced: the
        exclusivity of sliced blocks is written node by node from these.
        """
        cluster = self.problem.directory.cluster
        found: dict[int, list[tuple[int, int, int]]] = {}
        for index, a in enumerate(self.assignments[vertex]):
            for node, low, high in cluster.node_ranges(a.block):
                found.setdefault(node, []).append((index, low, high - low))
        return {node: tuple(terms) for node, terms in sorted(found.items())}

    def covering(self, vertex: int, unit: tuple[int, int]) -> tuple[int, ...]:
        """Assignments of ``vertex`` whose block covers the GPU unit ``unit`` (cached)."""
        key = (vertex, unit)
        found = self._covering.get(key)
        if found is None:
            # Through the (far fewer) blocks: the assignments on each covering block.
            found = tuple(
                sorted(
                    index
                    for block in self.covering_blocks(vertex, unit)
                    for index in self.assignments_on(vertex, block)
                )
            )
            self._covering[key] = found
        return found

    def covering_blocks(self, vertex: int, unit: tuple[int, int]) -> tuple[int, ...]:
        """Blocks of ``vertex`` that cover the GPU unit ``unit`` (cached).

        Every block of ``vertex`` holds at least one of its assignments, so
        one unit's covering blocks are a subset of another's exactly when its
        covering assignments are: the unit signatures below compare blocks.
        """
        key = ("blocks covering", vertex, unit)
        found = self._covering.get(key)
        if found is None:
            low, high = unit
            found = tuple(
                b
                for b in self.blocks_of(vertex)
                if self.blocks[b].start <= low
                and high <= self.blocks[b].end
                and (not self.blocks[b].sliced or self.blocks[b].holds(low, high))
            )
            self._covering[key] = found
        return found

    def maximal_units(self, vertices: tuple[int, ...] | None = None) -> tuple[tuple[int, int], ...]:
        """GPU units whose constraints are not implied by another unit's.

        A unit whose covering assignments (for every vertex in ``vertices``)
        are a subset of another unit's has a peak memory, a load and a set of
        possible conflicts no larger than that unit's; its memory, load and
        exclusivity constraints are implied, so only the maximal units are
        kept (one per group of identical ones).
        """
        vertices = tuple(range(self.num_vertices)) if vertices is None else vertices
        key = ("maximal", vertices)
        found = self._covering.get(key)
        if found is None:
            signatures: dict[tuple, tuple[int, int]] = {}
            for unit in self.gpu_units:
                signature = tuple(frozenset(self.covering_blocks(v, unit)) for v in vertices)
                if any(signature) and signature not in signatures:
                    signatures[signature] = unit
            items = list(signatures.items())  # by unit start, as gpu_units
            starts = [unit[0] for _, unit in items]
            kept = []
            for signature, unit in items:
                # A unit dominating this one is covered by every block covering
                # this one, so it lies inside the smallest of them: only the
                # units there are compared (near-linear on large clusters).
                smallest = min(
                    (self.blocks[b] for blocks in signature for b in blocks), key=lambda b: b.size
                )
                low = bisect.bisect_left(starts, smallest.start)
                high = bisect.bisect_left(starts, smallest.end)
                if not any(
                    other != signature
                    and all(a <= b for a, b in zip(signature, other, strict=True))
                    for other, _ in items[low:high]
                ):
                    kept.append(unit)
            found = tuple(kept)
            self._covering[key] = found
        return found

    def distinct_units(self) -> tuple[tuple[int, int], ...]:
        """One GPU unit per distinct set of covering assignments (cached)."""
        key = ("distinct",)
        found = self._covering.get(key)
        if found is None:
            signatures: dict[tuple, tuple[int, int]] = {}
            for unit in self.gpu_units:
                signature = tuple(
                    frozenset(self.covering_blocks(v, unit)) for v in range(self.num_vertices)
                )
                if any(signature) and signature not in signatures:
                    signatures[signature] = unit
            found = tuple(signatures.values())
            self._covering[key] = found
        return found

    def root_vertices(self) -> tuple[int, ...]:
        """Vertices without data predecessors: every other run of a step descends from them."""
        targets = {dst for _, dst in self.data_edges}
        return tuple(v for v in range(self.num_vertices) if v not in targets)

    def load_rows(self) -> list[tuple[tuple[int, int], list[tuple[int, int, int]]]]:
        """Rows of the valid inequality ``makespan >= sum(coefficient * choose[v, a])``.

        Per distinct GPU unit: the ``k_eval`` runs of every assignment covering
        it go one after another (the unit's load), and when a root vertex
        (generation) does not cover the unit, nothing runs there before its
        first run ends (every run descends from it), so its duration adds once.
        Coefficients are in time units.
        """
        roots = set(self.root_vertices())
        rows = []
        for unit in self.distinct_units():
            terms = []
            for vertex in range(self.num_vertices):
                items = self.assignments[vertex]
                if vertex not in roots or self.steady:  # only the covering assignments
                    terms.extend(
                        (vertex, index, self.k_eval * items[index].duration)
                        for index in self.covering(vertex, unit)
                    )
                    continue
                covering = set(self.covering(vertex, unit))
                for index, assignment in enumerate(items):
                    if index in covering:
                        terms.append((vertex, index, self.k_eval * assignment.duration))
                    elif assignment.duration > 0:
                        terms.append((vertex, index, assignment.duration))
            rows.append((unit, terms))
        return rows

    def always_before(self) -> set[tuple[int, int]]:
        """Run pairs (r1, r2) ordered by data and chain edges under every staleness."""
        successors: dict[int, list[int]] = {}
        for step in range(self.k_eval):
            for src, dst in self.data_edges:
                successors.setdefault(self.run(src, step), []).append(self.run(dst, step))
            if step > 0:
                for vertex in range(self.num_vertices):
                    successors.setdefault(self.run(vertex, step - 1), []).append(
                        self.run(vertex, step)
                    )
        ordered = set()
        for run in range(self.num_runs):
            stack, seen = list(successors.get(run, ())), set()
            while stack:
                nxt = stack.pop()
                if nxt in seen:
                    continue
                seen.add(nxt)
                ordered.add((run, nxt))
                stack.extend(successors.get(nxt, ()))
        return ordered

    def conflict_pairs(self) -> list[tuple[int, int, tuple[tuple[int, int], ...]]]:
        """Run pairs that may share GPUs with no fixed order, with the GPU units they may share.

        Runs of one vertex are chained, and pairs ordered by data or chain
        edges under every staleness need no ordering decision.
        """
        shared_units: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        for first in range(self.num_vertices):
            for second in range(first + 1, self.num_vertices):
                units = tuple(
                    unit
                    for unit in self.maximal_units((first, second))
                    if self.covering(first, unit) and self.covering(second, unit)
                )
                if units:
                    shared_units[(first, second)] = units
        ordered = self.always_before()
        pairs = []
        for r1 in range(self.num_runs):
            for r2 in range(r1 + 1, self.num_runs):
                v1, v2 = r1 % self.num_vertices, r2 % self.num_vertices
                if v1 == v2 or (r1, r2) in ordered or (r2, r1) in ordered:
                    continue
                units = shared_units.get((min(v1, v2), max(v1, v2)))
                if units:
                    pairs.append((r1, r2, units))
        return pairs

    def to_units(self, seconds: float) -> int:
        """Seconds to integer units, rounded down (keeps bounds valid)."""
        return math.floor(seconds / self.unit + 1e-9)

    def run(self, vertex: int, step: int) -> int:
        """Run id (step-major)."""
        return step * self.num_vertices + vertex

    @property
    def num_runs(self) -> int:
        """Runs of ``k_eval`` steps."""
        return self.num_vertices * self.k_eval

    def staleness_options(self, key: str | None) -> tuple[int, ...]:
        """Staleness values a pub edge may take (a synchronous edge: only 0)."""
        return (0,) if key is None else self.staleness_choices[key]

    def pub_source_step(self, step: int, staleness: int) -> int:
        """Step of the train run a user at ``step`` waits for (negative: none)."""
        return step - 1 - staleness

    # -- plans ---------------------------------------------------------------------------

    def assignment_of(self, vertex: int, placement: Placement) -> int:
        """Index of the assignment matching a plan's placement of ``vertex``."""
        for index, assignment in enumerate(self.assignments[vertex]):
            if (
                assignment.block == placement.block
                and assignment.candidate.strategy == placement.strategy
            ):
                return index
        raise KeyError(f"placement of vertex {vertex} is not among its assignments")

    def plan_from_choice(
        self, chosen: list[int], staleness: dict[str, int], starts: list[float] | None
    ) -> Plan:
        """A plan from chosen assignment indices, staleness and (optionally) run starts."""
        placements = tuple(
            Placement(self.assignments[v][a].block, self.assignments[v][a].candidate.strategy)
            for v, a in enumerate(chosen)
        )
        order = None
        if starts is not None and self.steady:
            order = self.cyclic_order(starts)
        elif starts is not None:
            runs = self.decoded_order(starts)
            order = tuple((r % self.num_vertices, r // self.num_vertices) for r in runs)
        return Plan(placements, make_staleness(staleness), order)

    def cyclic_order(self, starts: Sequence[float]) -> tuple[tuple[int, int], ...]:
        """The cyclic order of a steady-state solution: one period's offsets, then T (units).

        The runs of the window [a_0, a_0 + T) by start: run (v, t) starts at
        a_v + t*T, and the window's run of v is that of step t_v (shift -t_v,
        shifts from 0).
        """
        period = max(round(starts[-1]), 1)
        offsets = [round(start) for start in starts[: self.num_vertices]]
        steps = [-((offsets[v] - offsets[0]) // period) for v in range(self.num_vertices)]
        low = min(-t for t in steps)
        runs = sorted(range(self.num_vertices), key=lambda v: (offsets[v] + steps[v] * period, v))
        return tuple((v, -steps[v] - low) for v in runs)

    def decoded_order(self, starts: Sequence[float]) -> list[int]:
        """Run ids by start (units): the order of a plan decoded from a backend's solution.

        Rounding absorbs a MILP solver's float noise, and ties go by run id,
        which is a topological order of the runs.
        """
        return sorted(range(self.num_runs), key=lambda run: (round(starts[run]), run))

    def canonical(self, plan: Plan) -> Plan:
        """``plan`` mirrored so that the symmetry root's block starts first in its orbit.

        The mirror ``i -> i ^ mask`` of the GPU indices inside the root's pool is a
        symmetry of the cluster (see :meth:`rlplan.rpeg.model.blocks.Cluster.is_symmetry`
        and :attr:`rlplan.rpeg.model.pools.PooledCluster.symmetric_pools`), so the mirrored plan has
        the same simulated makespan and memory; without symmetry breaking the
        plan is returned unchanged.
        """
        if self.symmetry_root is None:
            return plan
        cluster = self.problem.directory.cluster
        root = plan.placements[self.symmetry_root].block
        if root.pool not in self.symmetry_pools:
            return plan
        mask = cluster.pools[root.pool].canonical_mask(root)
        if mask == 0:
            return plan
        placements = tuple(
            Placement(cluster.mirror(p.block, mask, root.pool), p.strategy) for p in plan.placements
        )
        return Plan(placements, plan.staleness, plan.order)

    def warm_start(self, plan: Plan) -> tuple[list[int], dict[str, int], list[int]]:
        """(assignment index per vertex, staleness, start per run in units) of a plan.

        The plan is first put in canonical form (:meth:`canonical`), so it
        satisfies the symmetry breaking.
        """
        plan = self.canonical(plan)
        if self.steady:
            return self._steady_start(plan)
        trace = self.problem.simulator.simulate(plan)
        chosen = [self.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        starts = [0] * self.num_runs
        names = self.problem.directory.template.names
        for (vertex, step), (start, _) in trace.run_spans().items():
            starts[self.run(names.index(vertex), step)] = self.to_units(start)
        return chosen, plan.staleness_map, starts

    def _steady_start(self, plan: Plan) -> tuple[list[int], dict[str, int], list[int]]:
        """:meth:`warm_start` of a steady-state formulation: one period's offsets, then T.

        The offsets are the earliest periodic schedule of the plan at its
        simulated period (:func:`rlplan.rpeg.evaluation.period.periodic_starts`).
        """
        simulator = self.problem.simulator.for_plan(plan)
        period, starts = simulator.periodic_schedule(plan)
        chosen = [self.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        low = min(starts)
        units = [self.to_units(start - low) for start in starts]
        return chosen, plan.staleness_map, [*units, math.ceil(period / self.unit)]

    def colocated_of(self, chosen: Sequence[int]) -> tuple[bool, ...]:
        """Per vertex: whether it is a rollout engine sharing a GPU with another vertex."""
        blocks = [self.assignments[v][a].block for v, a in enumerate(chosen)]
        flags = [False] * self.num_vertices
        for engine in self.engines:
            flags[engine] = any(
                v != engine and block.intersects(blocks[engine]) for v, block in enumerate(blocks)
            )
        return tuple(flags)

    def durations(self, chosen: Sequence[int]) -> list[int]:
        """Duration (units) of every vertex's runs, with wake and sleep of a colocated engine."""
        colocated = self.colocated_of(chosen)
        return [
            self.assignments[v][a].duration + (self.assignments[v][a].switch if colocated[v] else 0)
            for v, a in enumerate(chosen)
        ]

    def run_ends(self, chosen: list[int], starts: list[int]) -> list[int]:
        """End (units) of every run, given assignment indices and run starts (units).

        A steady-state solution's period after the starts is left out.
        """
        durations = self.durations(chosen)
        return [
            start + durations[run % self.num_vertices]
            for run, start in enumerate(starts[: self.num_runs])
        ]

    def rounding_tolerance(self) -> float:
        """Largest difference (s) between a model schedule and its simulation.

        Steady state: per period, times the ``k_eval`` periods the objective counts.
        """
        periods = self.problem.instance.k_eval if self.steady else 1
        return periods * self.unit * (2 * self.num_runs + 2)

    def simulation_tolerance(self, objective: float) -> float:
        """How far (s) a backend's objective may lie from the simulated makespan of its plan.

        The time-unit rounding (:meth:`rounding_tolerance`), plus a relative
        1e-6 for a MIP solver's floating-point feasibility tolerance.
        """
        return self.rounding_tolerance() + 1e-6 * max(1.0, abs(objective))


def build_formulation(problem: Problem, upper_bound: float, prune: bool = True) -> Formulation:
    """Build the formulation of ``problem`` given a heuristic makespan ``upper_bound`` (s).

    With ``prune``, the assignments no plan of makespan at most
    ``upper_bound`` can use are left out
    (docs/formulation.md#assignments-no-better-plan-can-use); without, every
    plan of the space is one of the model's.
    """
    directory = problem.directory
    instance = problem.instance
    steady = instance.steady_state
    # Steady state: one period's runs, and the horizon of their offsets (every run of a
    # step lies within 1 + σ periods of the step's first, rows.turn_offsets).
    k_eval = 1 if steady else instance.k_eval
    runs = len(directory.template.vertices) * k_eval
    if steady:
        upper_bound /= instance.k_eval
    # A path has at most `runs` runs and `runs` transfers; flooring each loses < 1 unit.
    unit = upper_bound * REL_ROUNDING / (2 * runs + 2)
    assignments: list[list[Assignment]] = []
    root = symmetry_root(directory)
    mirrored = _root_pools(directory, root) if root is not None else ()
    engines = tuple(
        v for v, vertex in enumerate(directory.template.vertices) if vertex.kind is Kind.GENERATE
    )
    # Assignments no plan below the upper bound can use are left out
    # (docs/formulation.md#assignments-no-better-plan-can-use); the steady state keeps all.
    bound = ChoiceBound(directory, problem.simulator.switch) if prune and not steady else None
    limit = upper_bound * (1 + REL_ROUNDING)
    every = 0
    for vertex, per_shape in enumerate(directory.options):
        items = []
        for shape, candidates in per_shape.items():
            # The vertex's blocks: block pins (placement.pin) are applied there.
            blocks = directory.blocks(vertex, shape)
            if vertex == root and pool_of(shape) in mirrored:
                geometry = directory.cluster.pools[pool_of(shape)]
                blocks = tuple(block for block in blocks if geometry.is_canonical(block))
            every += len(candidates) * len(blocks)
            if bound is not None:
                candidates = bound.usable(vertex, shape, candidates, limit)
            units = [_duration_units(problem, vertex in engines, c, unit) for c in candidates]
            for block, (candidate, (duration, switch)) in itertools.product(
                blocks, zip(candidates, units, strict=True)
            ):
                items.append(
                    Assignment(
                        vertex,
                        block,
                        candidate,
                        duration,
                        math.ceil(candidate.resident),
                        math.ceil(candidate.transient),
                        math.ceil(candidate.host),
                        switch,
                    )
                )
        assignments.append(items)
    used_blocks = sorted(
        {a.block for items in assignments for a in items}, key=lambda b: (b.start, -b.size, b.end)
    )
    template = directory.template
    # GPU units: maximal GPU ranges covered by the same set of blocks (memory is
    # checked once per unit instead of once per GPU); a sliced block cuts at the
    # ends of its piece on each of its nodes.
    cluster = directory.cluster
    # Pool boundaries cut too: a unit lies inside one pool (and has its capacity).
    cuts = sorted(
        {0, cluster.num_gpus}
        | {geometry.offset for geometry in cluster.pools}
        | {low for b in used_blocks for low, _ in b.pieces()}
        | {high for b in used_blocks for _, high in b.pieces()}
    )
    gpu_units = tuple((low, high) for low, high in itertools.pairwise(cuts))
    spread = 3 + max((max(v) for v in instance.optimizer.staleness_candidates.values()), default=0)
    formulation = Formulation(
        problem=problem,
        unit=unit,
        horizon=math.ceil((spread if steady else 1) * upper_bound / unit) + 1,
        assignments=assignments,
        blocks=tuple(used_blocks),
        block_index={b: i for i, b in enumerate(used_blocks)},
        staleness_choices={
            m: instance.optimizer.staleness_candidates[m] for m in template.trained_models
        },
        num_vertices=len(template.vertices),
        k_eval=k_eval,
        data_edges=tuple((e.src, e.dst) for e in template.data_edges),
        pub_edges=tuple((e.src, e.dst, e.model, e.staleness_model) for e in template.pub_edges),
        memory_capacity=max(math.floor(capacity) for capacity in directory.capacities),
        gpu_units=gpu_units,
        upper_bound=upper_bound,
        symmetry_root=root,
        symmetry_pools=mirrored,
        data_delays=template.data_delays,
        engines=engines,
        host_capacity=max(math.floor(capacity) for capacity in cluster.host_capacities),
        memory_capacities=tuple(math.floor(capacity) for capacity in directory.capacities),
        node_capacities=tuple(math.floor(capacity) for capacity in cluster.node_capacities()),
        levels=(*LEVELS, INTER_POOL) if cluster.pooled else LEVELS,
        steady=steady,
    )
    formulation.stats = {
        "assignments": sum(len(items) for items in assignments),
        "assignments_before_bound": every,
        "time_unit_s": unit,
        "symmetry_breaking": root is not None,
    }
    if cluster.pooled:
        formulation.stats["symmetry_pools"] = [cluster.names[pool] for pool in mirrored]
    return formulation


def _duration_units(
    problem: Problem, engine: bool, candidate: Candidate, unit: float
) -> tuple[int, int]:
    """(duration, switch) of a candidate in units, both rounded down.

    A rollout engine's colocated duration (its time plus wake and sleep) is
    rounded down as one number: ``switch`` is what it adds to ``duration``.
    """
    duration = math.floor(candidate.time / unit + 1e-9)
    if not engine:
        return duration, 0
    wake, sleep = problem.simulator.switch(
        candidate.vertex, candidate.strategy, pool_of(candidate.shape)
    )
    return duration, math.floor((candidate.time + wake + sleep) / unit + 1e-9) - duration


def symmetry_root(directory: CandidateDirectory) -> int | None:
    """The vertex whose block may be fixed to the first block of its orbit, or None.

    When XOR-ing GPU indices with some masks is a symmetry of the cluster and
    no block pin singles out positions (every vertex may use every block of
    each of its shapes), any plan can be mirrored so that the generation
    vertex (the root of every step's graph) lies on the block of its orbit
    that starts first (:meth:`rlplan.rpeg.model.blocks.Cluster.canonical_mask`),
    with the same makespan: fixing that removes symmetric copies of every plan
    without losing the optimum. With every mask a symmetry that block starts
    at GPU 0; with runs of nodes that are not aligned only the node masks 0
    and all ones are, so a block of nodes 1-2 of 4 stays where it is. On a
    cluster of several pools the masks are those of each pool in
    :func:`symmetry_pools`, applied to that pool's own GPU indices; the root
    is fixed inside the pool its block lies in, and left free in the others.
    """
    targets = {edge.dst for edge in directory.template.data_edges}
    roots = [v for v in range(len(directory.template.vertices)) if v not in targets]
    if not roots or not _root_pools(directory, roots[0]):
        return None
    return roots[0]


def _root_pools(directory: CandidateDirectory, root: int) -> tuple[int, ...]:
    """The :func:`symmetry_pools` the root has blocks in (its restriction acts there only)."""
    own = {pool_of(shape) for shape in directory.options[root]}
    return tuple(pool for pool in symmetry_pools(directory) if pool in own)


def symmetry_pools(directory: CandidateDirectory) -> tuple[int, ...]:
    """Pools whose XOR masks break symmetry: XOR-symmetric, no position pinned inside.

    A pool qualifies when its own shape is XOR-symmetric
    (:attr:`rlplan.rpeg.model.pools.PooledCluster.symmetric_pools`) and every
    vertex may use every block of each of its shapes in that pool (a block
    pin naming a position there would not be mirrored with the plan). A
    one-type cluster is its one pool: ``(0,)`` or ``()``.
    """
    cluster = directory.cluster
    pools = set(cluster.symmetric_pools)
    for vertex in range(len(directory.template.vertices)):
        for shape in directory.options[vertex]:
            if len(directory.blocks(vertex, shape)) != len(cluster.blocks_by_shape[shape]):
                pools.discard(pool_of(shape))
    return tuple(sorted(pools))
