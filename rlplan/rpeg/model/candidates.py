"""The candidate directory: time and memory per (vertex, pool, block shape, strategy).

Time and memory depend on a block's shape and on its GPU pool only, never on
its position, so they are computed once per (vertex, pool, shape, strategy)
and cached here; a shape is keyed with its pool (:mod:`rlplan.rpeg.model.shapes`),
and each pool has its cost model, built on the pool's hardware
(docs/cost-model.md#pools). Every consumer — simulator, baselines, local
search, exact formulations — reads its coefficients from this one directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.dominance import candidate_order as _candidate_order
from rlplan.rpeg.model.dominance import non_dominated as _non_dominated
from rlplan.rpeg.model.enumeration import (
    dimension_values,
    enumerate_strategies,
    framework_of,
    strategy_problem,
    tensor_degrees,
)
from rlplan.rpeg.model.frameworks.rules import LAYOUT_FIELDS, pool_sizes
from rlplan.rpeg.model.memory_terms import Footprint
from rlplan.rpeg.model.pinning import block_pin_problem
from rlplan.rpeg.model.pools import PooledCluster
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.schema.instance import Instance
from rlplan.rpeg.schema.pins import Pins
from rlplan.rpeg.templates import FUSED, SEPARATE, Kind, Template, Vertex, build_template

if TYPE_CHECKING:  # plan.py imports this module
    from rlplan.rpeg.model.plan import Placement

#: Re-exported: the plan-space rules and their enumeration live in
#: :mod:`rlplan.rpeg.model.enumeration`, dominance in :mod:`rlplan.rpeg.model.dominance`.
__all__ = [
    "Candidate",
    "CandidateDirectory",
    "dimension_values",
    "enumerate_strategies",
    "framework_of",
    "strategy_problem",
    "tensor_degrees",
]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One (vertex, block shape, strategy) with its exact time and per-GPU memory.

    ``shape`` is the block's extent tagged with its pool
    (:func:`~rlplan.rpeg.model.shapes.pool_of` reads it): times and bytes are
    that pool's.

    ``shortfall`` is, for a rollout, the bytes its engine's KV pool lacks to
    hold one sequence of the maximum length (:meth:`CostModel.rollout_shortfall
    <rlplan.rpeg.model.cost.CostModel.rollout_shortfall>`); the engine refuses to
    start when it is positive. Other vertices have 0.

    ``host`` is the bytes per GPU the vertex keeps in its node's host memory:
    offloaded states, or a rollout engine's weights while it sleeps (which
    count only when the engine is colocated; docs/cost-model.md#colocation).
    """

    vertex: int
    shape: tuple[int, int, int]
    strategy: Strategy
    time: float
    resident: float
    transient: float
    shortfall: float = 0.0
    host: float = 0.0

    @property
    def memory(self) -> float:
        """Per-GPU bytes when the vertex runs alone on its block."""
        return self.resident + self.transient

    @property
    def starts(self) -> bool:
        """Whether the vertex can run at all (a rollout engine that starts; always for others)."""
        return self.shortfall <= 0.0


class CandidateDirectory:
    """All candidates of an instance, built once.

    Attributes
    ----------
    options
        ``options[v][shape]``: the candidates of vertex ``v`` on a block of
        ``shape`` (an extent tagged with its pool, so each pool has its own
        entries) that fit in its pool's memory on their own, can start (a rollout engine
        whose KV pool holds one sequence of the maximum length,
        :attr:`Candidate.starts`) and are not dominated,
        fastest first. A candidate is dominated when another on the same
        shape is no slower and needs no more resident, transient and host
        memory, and has the same weight layout (tp, pp, ZeRO-3 shards, ep,
        etp: what pub lags depend on) unless no pub edge touches the vertex:
        replacing it never lengthens a schedule (durations and lags are no
        larger) nor raises a GPU's or a node's peak, so the optimum over the
        plan space is unchanged (:mod:`rlplan.rpeg.model.dominance`). With
        ``prune=False`` every candidate that fits and starts is kept. Only
        shapes with a block the vertex may use (:meth:`blocks`) appear.
    """

    def __init__(
        self, instance: Instance, cluster: PooledCluster | None = None, *, prune: bool = True
    ) -> None:
        self.instance = instance
        self.template: Template = build_template(
            instance.algorithm,
            instance.engine.recompute_logprobs,
            instance.engine.reference_model,
            fused=instance.fused,
            reward_delay=instance.reward_rule_seconds,
        )
        #: Directories of the instance's other template (AC-share), built on first use.
        self._variants: dict[bool, CandidateDirectory] = {instance.fused: self}
        self.cluster = cluster or PooledCluster(
            instance.pools,
            instance.placement.min_block_gpus,
            instance.placement.node_blocks,
            instance.placement.sliced_blocks,
        )
        #: One cost model per pool, on the pool's hardware and geometry.
        self.costs = tuple(
            CostModel(instance, geometry, pool.hardware)
            for geometry, pool in zip(self.cluster.pools, instance.pools, strict=True)
        )
        #: Usable memory per GPU of each pool.
        self.capacities = tuple(pool.hardware.usable_memory for pool in instance.pools)
        #: The first pool's cost model and capacity (the only ones of a one-type cluster).
        self.cost = self.costs[0]
        self.capacity = self.capacities[0]
        #: The framework whose rules narrow the plan space (None: the full space).
        self.framework = framework_of(instance)
        #: Whether dominated candidates are left out (False: every candidate that
        #: fits and starts is kept, the unpruned plan space tests compare with).
        self.prune = prune
        self._cache: dict[tuple[int, tuple[int, int, int], Strategy], Candidate] = {}
        pub_edges = self.template.pub_edges
        #: Vertices no pub edge touches: their lags depend on blocks only, so
        #: dominance compares every candidate of a shape, whatever its layout.
        touched = {e.src for e in pub_edges} | {e.dst for e in pub_edges}
        self._layout_free = frozenset(range(len(self.template.vertices))) - touched
        #: Vertices a pub edge ends at: their lags read their weight shard.
        self._destinations = frozenset(e.dst for e in pub_edges)
        #: ``allowed[v][shape]``: the blocks of ``shape`` vertex ``v`` may use,
        #: every block of the shape unless a block pin (``placement.pin``) or a
        #: framework rule narrows them; shapes without such a block are left out.
        self.allowed = [self._allowed_blocks(vertex.name) for vertex in self.template.vertices]
        #: The same blocks as one set per vertex: :meth:`allows` is a hash lookup
        #: (the concurrent baseline asks it millions of times on 256 GPUs).
        self._allowed_sets: list[frozenset[Block]] = [
            frozenset(block for blocks in allowed.values() for block in blocks)
            for allowed in self.allowed
        ]
        #: Strategies enumerated, those fitting in memory alone (before
        #: dominance pruning) and the rollouts left out because their engine
        #: would not start; ``size`` counts the candidates kept.
        self.enumerated = 0
        self.fitting = 0
        self.refused = 0
        self.options: list[dict[tuple[int, int, int], tuple[Candidate, ...]]] = [
            self._vertex_options(index) for index in range(len(self.template.vertices))
        ]

    def _allowed_blocks(self, name: str) -> dict[tuple[int, int, int], tuple[Block, ...]]:
        """The blocks vertex ``name`` may use by shape (its block pin and framework applied)."""
        pins = self.instance.placement.pin
        allowed: dict[tuple[int, int, int], tuple[Block, ...]] = {}
        for shape, blocks in self.cluster.blocks_by_shape.items():
            kept = tuple(
                block
                for block in blocks
                if block_pin_problem(pins, name, block, self.cluster.names) is None
                and self._framework_allows(name, block)
            )
            if kept:
                allowed[shape] = kept
        return allowed

    def _vertex_options(self, index: int) -> dict[tuple[int, int, int], tuple[Candidate, ...]]:
        """The kept candidates of vertex ``index`` per shape, fastest first (counters updated)."""
        vertex = self.template.vertices[index]
        per_shape: dict[tuple[int, int, int], tuple[Candidate, ...]] = {}
        for shape in self.cluster.shapes:
            if shape not in self.allowed[index]:
                continue
            strategies = enumerate_strategies(self.instance, vertex, shape)
            feasible = self._fitting(index, shape, strategies)
            self.enumerated += len(strategies)
            self.fitting += len(feasible)
            kept = feasible
            if self.prune:
                kept = _non_dominated(
                    feasible,
                    index in self._layout_free,
                    self._kept_apart(index),
                    index in self._destinations,
                )
            if kept:
                per_shape[shape] = tuple(sorted(kept, key=_candidate_order))
        return per_shape

    def _fitting(
        self, index: int, shape: tuple[int, int, int], strategies: list[Strategy]
    ) -> list[Candidate]:
        """The candidates of ``strategies`` that fit in memory alone and start.

        Memory and a rollout's shortfall come first: the run time (the
        costlier part) is computed only for strategies that fit. Counts the
        rollouts whose engine would not start in :attr:`refused`.
        """
        vertex = self.template.vertices[index]
        cost, capacity = self.cost_of(shape), self.capacity_of(shape)
        kept = []
        for strategy in strategies:
            found = self._cache.get((index, shape, strategy))
            if found is None:
                footprint = cost.footprint(vertex, strategy)
                shortfall = self._shortfall(vertex, shape, strategy)
                self.refused += shortfall > 0.0
                if footprint.total > capacity or shortfall > 0.0:
                    continue
                found = self._build(index, shape, strategy, footprint, shortfall)
            else:
                self.refused += not found.starts
                if found.memory > capacity or not found.starts:
                    continue
            kept.append(found)
        return kept

    def cost_of(self, shape: tuple[int, int, int]):
        """The cost model of the pool a block of ``shape`` lies in."""
        return self.costs[pool_of(shape)]

    def capacity_of(self, shape: tuple[int, int, int]) -> float:
        """Usable memory per GPU of the pool a block of ``shape`` lies in."""
        return self.capacities[pool_of(shape)]

    def _framework_allows(self, name: str, block: Block) -> bool:
        """Whether the framework's block rules let vertex ``name`` use ``block``."""
        if self.framework is None:
            return True
        return self.framework.block_problem(name, block, pool_sizes(self.cluster)) is None

    def _kept_apart(self, vertex: int) -> tuple[str, ...]:
        """What dominance must not compare across for ``vertex`` under the framework's rules.

        A cross-vertex rule reads a vertex's layout (:class:`SameLayout
        <rlplan.rpeg.model.frameworks.rules.SameLayout>`) or a field
        (:class:`FieldWhenShared <rlplan.rpeg.model.frameworks.rules.FieldWhenShared>`):
        a candidate replacing another must agree on them, or the rule could
        hold for the pruned one and not for its replacement.
        """
        if self.framework is None:
            return ()
        name = self.template.vertices[vertex].name
        layout = LAYOUT_FIELDS if name in self.framework.layout_vertices() else ()
        return (*layout, *self.framework.compared_fields(name))

    @property
    def fused(self) -> bool:
        """Whether this directory holds the fused actor-critic (AC-share) template."""
        return self.template.fused

    def variant(self, fused: bool) -> CandidateDirectory:
        """The directory of the separate (``fused=False``) or fused template, built once.

        Both share the cluster; the fused one exists only for instances whose
        plan space includes AC-share (:attr:`Instance.ac_share`).
        """
        found = self._variants.get(fused)
        if found is None:
            if fused and not self.instance.ac_share:
                raise ValueError("the instance has no AC-share (fused actor-critic) template")
            template = FUSED if fused else SEPARATE
            found = CandidateDirectory(
                self.instance.restricted(template), self.cluster, prune=self.prune
            )
            found._variants = self._variants
            self._variants[fused] = found
        return found

    def for_plan(self, plan) -> CandidateDirectory:
        """The directory of ``plan``'s template (this one or its AC-share sibling)."""
        return self if plan.fused == self.fused else self.variant(plan.fused)

    def candidate(self, vertex: int, shape: tuple[int, int, int], strategy: Strategy) -> Candidate:
        """The candidate of ``vertex`` with ``strategy`` on ``shape`` (computed on first use)."""
        found = self._cache.get((vertex, shape, strategy))
        if found is None:
            template_vertex = self.template.vertices[vertex]
            footprint = self.cost_of(shape).footprint(template_vertex, strategy)
            shortfall = self._shortfall(template_vertex, shape, strategy)
            found = self._build(vertex, shape, strategy, footprint, shortfall)
        return found

    def candidates_of(self, placements: Sequence[Placement]) -> list[Candidate]:
        """The candidate of every vertex under ``placements`` (one per vertex, template order).

        :meth:`candidate` for each, looked up in one call: the simulator asks
        this once per plan.
        """
        cache = self._cache
        found = []
        for vertex, placement in enumerate(placements):
            block = placement.block
            candidate = cache.get((vertex, block.extent, placement.strategy))
            if candidate is None:
                candidate = self.candidate(vertex, block.extent, placement.strategy)
            found.append(candidate)
        return found

    def _shortfall(self, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy) -> float:
        """Bytes a rollout engine's KV pool lacks for one sequence (0 for other vertices)."""
        if vertex.kind is Kind.GENERATE:
            return self.cost_of(shape).rollout_shortfall(vertex.model, strategy)
        return 0.0

    def _build(
        self,
        vertex: int,
        shape: tuple[int, int, int],
        strategy: Strategy,
        footprint: Footprint,
        shortfall: float,
    ) -> Candidate:
        """The candidate with its run time and host bytes, cached."""
        template_vertex = self.template.vertices[vertex]
        cost = self.cost_of(shape)
        found = Candidate(
            vertex,
            shape,
            strategy,
            cost.run_time(template_vertex, shape, strategy),
            footprint.resident,
            footprint.transient,
            shortfall,
            self._host_bytes(cost, template_vertex, strategy),
        )
        self._cache[(vertex, shape, strategy)] = found
        return found

    def _host_bytes(self, cost: CostModel, vertex: Vertex, strategy: Strategy) -> float:
        """Host bytes per GPU of ``vertex``: offloaded states, or a sleeping engine's weights."""
        colocation = cost.colocation
        if vertex.kind is Kind.GENERATE:
            return colocation.engine_host_bytes(vertex.model, strategy)
        return colocation.held_bytes(vertex.kind, vertex.model, strategy)

    def blocks(self, vertex: int, shape: tuple[int, int, int]) -> tuple[Block, ...]:
        """The blocks of ``shape`` that ``vertex`` may use (block pins applied), by start.

        Every consumer of blocks (formulation, local-search moves, baselines,
        random plans, the exhaustive oracle) takes a vertex's blocks from here.
        """
        return self.allowed[vertex].get(shape, ())

    def allows(self, vertex: int, block: Block) -> bool:
        """Whether ``vertex`` may use ``block`` (it matches the vertex's block pin, if any)."""
        return block in self._allowed_sets[vertex]

    def refusal(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` cannot run: its rollout engine would not start (None: it runs)."""
        if candidate.starts:
            return None
        vertex = self.template.vertices[candidate.vertex]
        return self.cost_of(candidate.shape).rollout_refusal(vertex.model, candidate.strategy)

    def fastest(self, vertex: int) -> Candidate | None:
        """The fastest memory-feasible candidate of ``vertex`` on any shape."""
        best = None
        for candidates in self.options[vertex].values():
            if candidates and (
                best is None or _candidate_order(candidates[0]) < _candidate_order(best)
            ):
                best = candidates[0]
        return best

    def smallest_shortfall(
        self, vertex: int, pinned: bool = True
    ) -> tuple[float, Candidate | None]:
        """Smallest memory overflow of ``vertex`` over all its strategies (0 if one fits).

        A strategy's overflow is its memory beyond the usable memory or, for a
        rollout engine that would not start, the bytes its KV pool lacks
        (:attr:`Candidate.shortfall`), whichever is larger. Over the pinned
        plan space, or with ``pinned=False`` over the plan space without the
        instance's pins (to tell whether a pin is what makes the vertex fit
        nowhere); ``(inf, None)`` when it has no strategy at all.
        """
        best_overflow, best = float("inf"), None
        template_vertex = self.template.vertices[vertex]
        instance = self.instance
        if not pinned:
            free = dataclasses.replace(instance.placement, pin=Pins())
            instance = dataclasses.replace(instance, placement=free)
        for shape in self.cluster.shapes:
            if pinned and shape not in self.allowed[vertex]:
                continue
            capacity = self.capacity_of(shape)
            for strategy in enumerate_strategies(instance, template_vertex, shape):
                candidate = self.candidate(vertex, shape, strategy)
                overflow = max(candidate.memory - capacity, candidate.shortfall)
                if overflow < best_overflow:
                    best_overflow, best = overflow, candidate
        return max(best_overflow, 0.0), best

    @property
    def size(self) -> int:
        """Number of (vertex, shape, strategy) candidates kept."""
        return sum(len(c) for per_shape in self.options for c in per_shape.values())

    def assignment_count(self) -> int:
        """Number of (vertex, block, strategy) assignments."""
        return sum(
            len(candidates) * len(self.blocks(vertex, shape))
            for vertex, per_shape in enumerate(self.options)
            for shape, candidates in per_shape.items()
        )
