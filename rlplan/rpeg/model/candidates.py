"""The candidate directory: time and memory per (vertex, block shape, strategy).

Time and memory depend on a block's shape only, never on its position, so
they are computed once per (vertex, shape, strategy) and cached here. Every
consumer — simulator, baselines, local search, exact formulations — reads its
coefficients from this one directory.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from rlplan.rpeg.model.blocks import Block, Cluster
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.frameworks import FRAMEWORKS, Framework
from rlplan.rpeg.model.frameworks.rules import LAYOUT_FIELDS
from rlplan.rpeg.model.memory_terms import Footprint
from rlplan.rpeg.model.parallel_layout import context_problem, expert_problem
from rlplan.rpeg.model.pinning import block_pin_problem, pin_strategy_problem
from rlplan.rpeg.schema.instance import Instance, PlacementConfig
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.pins import Pins
from rlplan.rpeg.strategy import DIMENSIONS, Dimension, dimensions_of, value_word
from rlplan.rpeg.templates import FUSED, SEPARATE, Kind, Template, Vertex, build_template


@dataclass(frozen=True, slots=True)
class Candidate:
    """One (vertex, block shape, strategy) with its exact time and per-GPU memory.

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


def _powers_of_two_dividing(value: int) -> list[int]:
    result, power = [], 1
    while value % power == 0 and power <= value:
        result.append(power)
        power *= 2
    return result


def strategy_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
) -> str | None:
    """Why ``strategy`` is outside the plan space of ``vertex`` on ``shape`` (None if inside).

    The plan space is that of the ``placement`` lists narrowed by the
    vertex's pin (``placement.pin``, :mod:`rlplan.rpeg.schema.pins`): a strategy breaking
    a pinned field (or on a block shape other than a pinned extent) is
    outside it, so :func:`enumerate_strategies`, the candidate directory,
    every backend and plan files all honour strategy pins.
    """
    problem = _list_problem(instance, vertex, shape, strategy)
    if problem is not None:
        return problem
    pin = instance.placement.pin.vertex(vertex.name)
    if pin is not None:
        broken = pin_strategy_problem(pin, shape, strategy, instance.workload.sequences)
        if broken is not None:
            return f"placement.pin.{vertex.name}: {broken}"
    framework = framework_of(instance)
    if framework is not None:
        broken = framework.strategy_problem(vertex.name, vertex.kind, strategy)
        if broken is not None:
            return f"engine.framework: {broken}"
    return None


def framework_of(instance: Instance) -> Framework | None:
    """The framework whose plan space ``instance`` is restricted to (None: the full space)."""
    name = instance.engine.framework
    return None if name is None else FRAMEWORKS[name]


def _list_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
) -> str | None:
    """Why ``strategy`` is outside the plan space of the ``placement`` lists (pins aside)."""
    spec = instance.models[vertex.model]
    placement = instance.placement
    size = shape[0] * shape[1] * shape[2]
    dp, pp, tp, mb = strategy.dp, strategy.pp, strategy.tp, strategy.microbatches
    if min(dp, pp, tp, mb, strategy.cp, strategy.ep, strategy.etp) < 1:
        return "dp, pp, tp, cp, ep, etp and microbatches must be positive"
    if strategy.gpus != size:
        return f"dp*cp*pp*tp = {strategy.gpus} differs from the block's {size} GPUs"
    problem = _tensor_problem(spec, vertex.kind, shape, tp)
    if problem is not None:
        return problem
    if spec.heads % tp:
        return f"tp {tp} does not divide the {spec.heads} attention heads of the {vertex.model}"
    if pp > spec.layers:
        return f"pp {pp} exceeds the {spec.layers} layers of the {vertex.model}"
    if dp > instance.workload.sequences:
        return f"dp {dp} exceeds the {instance.workload.sequences} sequences of a step"
    problem = expert_problem(spec, vertex.kind, dp, tp, strategy.cp, strategy.ep, strategy.etp)
    if problem is None:
        problem = context_problem(strategy.cp, instance.workload.total_length)
    if problem is not None:
        return problem
    replica = -(-instance.workload.sequences // dp)
    if vertex.kind is Kind.GENERATE:
        if mb != 1:
            return "a rollout has no microbatches (max_num_seqs and its KV pool batch it)"
    else:
        steps = instance.workload.optimizer_steps if vertex.kind is Kind.TRAIN else 1
        problem = _microbatch_problem(placement, mb, replica, steps)
        if problem is not None:
            return problem
    framework = framework_of(instance)
    for declared in DIMENSIONS:
        if framework is not None and framework.fixed_values(
            vertex.name, vertex.kind, declared.name
        ):
            continue  # the framework sets it: its rule (strategy_problem) names the value
        if declared.mixture_only and not spec.is_moe:
            continue  # a dense model's value is 1: expert_problem says so otherwise
        listed = getattr(placement, declared.name)
        problem = _dimension_problem(declared, vertex.kind, listed, strategy)
        if problem is not None:
            return problem
    return None


def _tensor_problem(
    spec: ModelSpec, kind: Kind, shape: tuple[int, int, int], tp: int
) -> str | None:
    """Why ``tp`` is outside the plan space on ``shape`` (None: inside).

    tp is a power of two dividing the block's node width; a rollout of a
    mixture of experts may also span whole nodes (published DeepSeek-V3
    rollouts run vLLM at tp 32 over 4 nodes), tp a multiple of the node width
    dividing the block (docs/plan-space.md#expert-and-context-parallelism).
    """
    size = shape[0] * shape[1] * shape[2]
    if not tp & (tp - 1):
        if shape[2] % tp == 0:
            return None
        if kind is Kind.GENERATE and spec.is_moe and tp % shape[2] == 0 and size % tp == 0:
            return None
    return f"tp {tp} must be a power of two dividing the block's node width {shape[2]}"


def tensor_degrees(spec: ModelSpec, kind: Kind, shape: tuple[int, int, int]) -> list[int]:
    """Every tp of the plan space on ``shape`` (before the head and layer checks)."""
    size = shape[0] * shape[1] * shape[2]
    degrees = [tp for tp in _powers_of_two_dividing(size)]
    return [tp for tp in degrees if _tensor_problem(spec, kind, shape, tp) is None]


def dimension_values(instance: Instance, vertex: Vertex, declared: Dimension) -> tuple:
    """The values of ``declared`` the plan space gives ``vertex``: its ``placement`` list,
    or the values a framework sets itself (a ``fixed`` rule of ``engine.framework``)."""
    framework = framework_of(instance)
    if framework is not None:
        fixed = framework.fixed_values(vertex.name, vertex.kind, declared.name)
        if fixed is not None:
            return fixed
    return getattr(instance.placement, declared.name)


def _microbatch_problem(
    placement: PlacementConfig, mb: int, replica: int, steps: int = 1
) -> str | None:
    """Why ``mb`` microbatches of ``replica`` sequences are outside the ``placement`` lists.

    A train vertex's ``steps`` (``workload.optimizer_steps``) mini-batches
    each take ``mb / steps`` of the replica's microbatches, so ``mb`` must be a
    multiple of ``steps``; infer and generate vertices pass 1.
    """
    if mb > replica:
        return f"microbatches {mb} exceed the {replica} sequences per replica"
    if mb % steps:
        return (
            f"microbatches {mb} per replica are no multiple of workload.optimizer_steps "
            f"{steps} (each optimizer step trains an equal share of them)"
        )
    if mb not in placement.microbatch_counts(replica):
        if placement.microbatches is not None:
            allowed = ", ".join(map(str, placement.microbatches))
            return f"microbatches {mb} not among placement.microbatches ({allowed})"
        allowed = ", ".join(map(str, placement.micro_batch_sizes or ()))
        return (
            f"{mb} microbatches of {replica} sequences match no "
            f"placement.micro_batch_sizes ({allowed})"
        )
    return None


def _dimension_problem(
    declared: Dimension, kind: Kind, allowed: tuple, strategy: Strategy
) -> str | None:
    """Why ``strategy``'s value of ``declared`` is outside the plan space of a ``kind`` vertex.

    A dimension that does not apply to the kind must keep its default; one
    that does must take a value of ``allowed`` (its ``placement`` list, or a
    framework's fixed values: :func:`dimension_values`).
    """
    value = getattr(strategy, declared.name)
    if not declared.applies_to(kind):
        if value != declared.default:
            return f"{declared.name} applies to {declared.applies_words}"
        return None
    if value not in allowed:
        shown = f"'{value}'" if isinstance(value, str) else value_word(value)
        listed = ", ".join(value_word(choice) for choice in allowed)
        return f"{declared.name} {shown} not among {declared.placement_key} ({listed})"
    return None


def enumerate_strategies(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int]
) -> list[Strategy]:
    """Every strategy of the plan space (pins included) for ``vertex`` on a block of ``shape``."""
    placement = instance.placement
    spec = instance.models[vertex.model]
    size = shape[0] * shape[1] * shape[2]
    strategies = []
    for values in _dimension_variants(instance, vertex, spec):
        cp = values.get("cp", 1)
        for tp in tensor_degrees(spec, vertex.kind, shape):
            if size % (tp * cp):
                continue
            rest = size // (tp * cp)
            for pp in range(1, rest + 1):
                if rest % pp:
                    continue
                dp = rest // pp
                replica = -(-instance.workload.sequences // dp)
                counts = (
                    (1,) if vertex.kind is Kind.GENERATE else placement.microbatch_counts(replica)
                )
                for mb in counts:
                    strategy = Strategy(dp, pp, tp, mb, **values)
                    if strategy_problem(instance, vertex, shape, strategy) is None:
                        strategies.append(strategy)
    return strategies


def _dimension_variants(instance: Instance, vertex: Vertex, spec: ModelSpec) -> list[dict]:
    """Every combination of the dimension values ``vertex`` may take (dense models: no experts)."""
    applying = dimensions_of(vertex.kind)
    choices = []
    for declared in applying:
        values = dimension_values(instance, vertex, declared)
        if declared.mixture_only and not spec.is_moe:
            values = tuple(value for value in values if value == declared.default) or (
                declared.default,
            )
        elif declared.mixture_only:
            values = tuple(value for value in values if spec.experts % value == 0)
        choices.append(values)
    names = [declared.name for declared in applying]
    return [
        dict(zip(names, combination, strict=True)) for combination in itertools.product(*choices)
    ]


class CandidateDirectory:
    """All candidates of an instance, built once.

    Attributes
    ----------
    options
        ``options[v][shape]``: the candidates of vertex ``v`` on a block of
        ``shape`` that fit in memory on their own, can start (a rollout engine
        whose KV pool holds one sequence of the maximum length,
        :attr:`Candidate.starts`) and are not dominated,
        fastest first. A candidate is dominated when another on the same
        shape is no slower and needs no more resident, transient and host
        memory, and has the same weight layout (tp, pp, ZeRO-3 shards: what pub lags
        depend on) unless no pub edge touches the vertex: replacing it never
        lengthens a schedule (durations and lags are no larger) nor raises a
        GPU's or a node's peak, so the optimum over the plan space is
        unchanged. Only shapes with a block the vertex may use (:meth:`blocks`)
        appear.
    """

    def __init__(self, instance: Instance, cluster: Cluster | None = None) -> None:
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
        self.cluster = cluster or Cluster(instance.hardware, instance.placement.min_block_gpus)
        self.cost = CostModel(instance, self.cluster)
        self.capacity = instance.hardware.usable_memory
        #: The framework whose rules narrow the plan space (None: the full space).
        self.framework = framework_of(instance)
        self._cache: dict[tuple[int, tuple[int, int, int], Strategy], Candidate] = {}
        touched = {e.src for e in self.template.pub_edges} | {
            e.dst for e in self.template.pub_edges
        }
        #: Vertices no pub edge touches: their lags depend on blocks only, so
        #: dominance compares every candidate of a shape, whatever its layout.
        self._layout_free = frozenset(
            index for index in range(len(self.template.vertices)) if index not in touched
        )
        #: ``allowed[v][shape]``: the blocks of ``shape`` vertex ``v`` may use,
        #: every block of the shape unless a block pin (``placement.pin``) or a
        #: framework rule narrows them; shapes without such a block are left out.
        self.allowed: list[dict[tuple[int, int, int], tuple[Block, ...]]] = []
        for vertex in self.template.vertices:
            allowed: dict[tuple[int, int, int], tuple[Block, ...]] = {}
            for shape, blocks in self.cluster.blocks_by_shape.items():
                kept = tuple(
                    block
                    for block in blocks
                    if block_pin_problem(instance.placement.pin, vertex.name, block) is None
                    and self._framework_allows(vertex.name, block)
                )
                if kept:
                    allowed[shape] = kept
            self.allowed.append(allowed)
        #: The same blocks as one set per vertex: :meth:`allows` is a hash lookup
        #: (the concurrent baseline asks it millions of times on 256 GPUs).
        self._allowed_sets: list[frozenset[Block]] = [
            frozenset(block for blocks in allowed.values() for block in blocks)
            for allowed in self.allowed
        ]
        self.options: list[dict[tuple[int, int, int], tuple[Candidate, ...]]] = []
        #: Strategies enumerated, those fitting in memory alone (before
        #: dominance pruning) and the rollouts left out because their engine
        #: would not start; ``size`` counts the candidates kept.
        self.enumerated = 0
        self.fitting = 0
        self.refused = 0
        for index, vertex in enumerate(self.template.vertices):
            per_shape: dict[tuple[int, int, int], tuple[Candidate, ...]] = {}
            for shape in self.cluster.shapes:
                if shape not in self.allowed[index]:
                    continue
                strategies = enumerate_strategies(instance, vertex, shape)
                built = [self.candidate(index, shape, strategy) for strategy in strategies]
                feasible = [c for c in built if c.memory <= self.capacity and c.starts]
                self.refused += sum(not c.starts for c in built)
                self.enumerated += len(strategies)
                self.fitting += len(feasible)
                kept = _non_dominated(feasible, index in self._layout_free, self._kept_apart(index))
                if kept:
                    per_shape[shape] = tuple(sorted(kept, key=_candidate_order))
            self.options.append(per_shape)

    def _framework_allows(self, name: str, block: Block) -> bool:
        """Whether the framework's block rules let vertex ``name`` use ``block``."""
        if self.framework is None:
            return True
        return self.framework.block_problem(name, block, self.cluster.num_gpus) is None

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
            found = CandidateDirectory(self.instance.restricted(template), self.cluster)
            found._variants = self._variants
            self._variants[fused] = found
        return found

    def for_plan(self, plan) -> CandidateDirectory:
        """The directory of ``plan``'s template (this one or its AC-share sibling)."""
        return self if plan.fused == self.fused else self.variant(plan.fused)

    def candidate(self, vertex: int, shape: tuple[int, int, int], strategy: Strategy) -> Candidate:
        """The candidate of ``vertex`` with ``strategy`` on ``shape`` (computed on first use)."""
        key = (vertex, shape, strategy)
        found = self._cache.get(key)
        if found is None:
            template_vertex = self.template.vertices[vertex]
            footprint: Footprint = self.cost.footprint(template_vertex, strategy)
            shortfall = 0.0
            if template_vertex.kind is Kind.GENERATE:
                shortfall = self.cost.rollout_shortfall(template_vertex.model, strategy)
            found = Candidate(
                vertex,
                shape,
                strategy,
                self.cost.run_time(template_vertex, shape, strategy),
                footprint.resident,
                footprint.transient,
                shortfall,
                self._host_bytes(template_vertex, strategy),
            )
            self._cache[key] = found
        return found

    def _host_bytes(self, vertex: Vertex, strategy: Strategy) -> float:
        """Host bytes per GPU of ``vertex``: offloaded states, or a sleeping engine's weights."""
        colocation = self.cost.colocation
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
        return self.cost.rollout_refusal(vertex.model, candidate.strategy)

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
            for strategy in enumerate_strategies(instance, template_vertex, shape):
                candidate = self.candidate(vertex, shape, strategy)
                overflow = max(candidate.memory - self.capacity, candidate.shortfall)
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


def _candidate_order(candidate: Candidate) -> tuple:
    strategy = candidate.strategy
    return (
        candidate.time,
        candidate.memory,
        strategy.tp,
        strategy.pp,
        strategy.microbatches,
        # One vertex's candidates differ only in the dimensions of its kind, so
        # declaration order is the tie-break order.
        *(getattr(strategy, declared.name) for declared in DIMENSIONS),
    )


def _dominance_key(candidate: Candidate, layout_free: bool, apart: tuple[str, ...] = ()) -> tuple:
    """Candidates compared for dominance: those whose pub lags are the same.

    Without pub edges the layout does not matter. A ZeRO-3 layout sharded over
    dp > 1 equals no user's layout, so every such candidate pays the same pub
    lags whatever its (tp, pp). Strategy fields named in ``apart`` (those a
    framework rule reads) must also agree.
    """
    kept = tuple(getattr(candidate.strategy, name) for name in apart)
    if layout_free:
        return kept
    layout = candidate.strategy.layout
    return (*kept, *(layout if layout[2] == 1 else ("sharded over dp",)))


def _non_dominated(
    candidates: list[Candidate], layout_free: bool = False, apart: tuple[str, ...] = ()
) -> list[Candidate]:
    groups: dict[tuple, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(_dominance_key(candidate, layout_free, apart), []).append(candidate)
    kept = []
    for group in groups.values():
        group.sort(key=lambda c: (c.time, c.resident, c.transient, c.host, *_candidate_order(c)))
        front: list[Candidate] = []
        for candidate in group:
            dominated = any(
                other.time <= candidate.time
                and other.resident <= candidate.resident
                and other.transient <= candidate.transient
                and other.host <= candidate.host
                for other in front
            )
            if not dominated:
                front.append(candidate)
        kept.extend(front)
    return kept
