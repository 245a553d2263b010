"""Neighbourhood moves of the local search: objects behind one protocol.

A move (:class:`Move`) has a ``name``, a ``kind`` and a ``propose(state,
context, rng)`` method that takes the current :class:`SearchState`, the
:class:`MoveContext` and a random generator and returns a list of neighbour
plans (empty when the move does not apply); the search evaluates them and
proposes the best. The search takes a sequence of moves
(:data:`DEFAULT_MOVES` unless told otherwise), so a move runs alone by passing
only that one, and a new move plugs in as one more object.

The ``kind`` tells the search when to propose a move: :data:`SINGLE` and
:data:`PAIR` moves change blocks or co-location (one vertex, or two) and come
every ``e_struct`` evaluations; :data:`PARAMETER` moves keep every vertex's
block. Moves that pick a strategy on a new block sample up to ``k_x``
candidates of that shape. On a cluster of several GPU pools ``change_pool``
(:mod:`rlplan.rpeg.search.pool_moves`) moves a vertex to another pool; the
search leaves it out on a one-pool cluster. Two moves change several vertices
at once: ``set_group_setting`` (one memory setting for a group of vertices) and
``repartition_group`` (:mod:`rlplan.rpeg.search.group_moves`: the vertices of
one DAG depth on another partition of the cluster, which needs the context's
simulator to repair memory).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.optimizer import OptimizerConfig
from rlplan.rpeg.search.compound_moves import group_settings_vary, set_group_setting
from rlplan.rpeg.search.expert_moves import change_expert_layout, expert_layouts_vary
from rlplan.rpeg.search.group_moves import groups_repartition, repartition_group
from rlplan.rpeg.search.pool_moves import change_pool, pools_vary
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.templates import unroll

#: Move kinds: structural moves of one vertex, of two vertices, and parameter moves.
SINGLE, PAIR, PARAMETER = "single", "pair", "parameter"


@dataclass
class MoveContext:
    """What moves need to know about the plan space, precomputed once."""

    directory: CandidateDirectory
    knobs: OptimizerConfig
    #: The simulator of ``directory``'s plan space, for moves that repair a plan's
    #: memory before proposing it (None: those moves propose nothing).
    simulator: Simulator | None = None
    blocks_by_size: dict[int, tuple[Block, ...]] = field(init=False)
    vertex_weights: list[float] = field(init=False)
    predecessors: dict[tuple, tuple[tuple[int, ...], ...]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        grouped: dict[int, list[Block]] = {}
        for block in self.directory.cluster.blocks:
            grouped.setdefault(block.size, []).append(block)
        self.blocks_by_size = {size: tuple(blocks) for size, blocks in grouped.items()}
        weights = []
        for index in range(len(self.directory.template.vertices)):
            fastest = self.directory.fastest(index)
            weights.append(fastest.time if fastest is not None else 1.0)
        self.vertex_weights = weights

    def pick_vertex(self, rng: random.Random, plan: Plan) -> int:
        """A vertex, uniformly (``uniform_vertex``) or in proportion to its run time."""
        count = len(plan.placements)
        if self.knobs.uniform_vertex:
            return rng.randrange(count)
        return rng.choices(range(count), weights=self.vertex_weights)[0]

    def sample_candidates(
        self,
        vertex: int,
        shape: tuple[int, int, int],
        rng: random.Random,
        keep_mb: int | None = None,
    ) -> list[Candidate]:
        """Up to ``k_x`` candidates of ``vertex`` on ``shape``: the fastest plus random others."""
        options = self.directory.options[vertex].get(shape, ())
        if keep_mb is not None and self.knobs.fixed_mb:
            same = [c for c in options if c.strategy.microbatches == keep_mb]
            options = tuple(same) or options
        if not options:
            return []
        k = self.knobs.k_x
        if len(options) <= k:
            return list(options)
        return [options[0], *rng.sample(options[1:], k - 1)]

    def run_predecessors(self, plan: Plan) -> tuple[tuple[int, ...], ...]:
        """Direct predecessors of every run under the plan's staleness (cached)."""
        key = plan.staleness
        found = self.predecessors.get(key)
        if found is None:
            runs = len(plan.placements) * self.directory.instance.k_eval
            preds: list[list[int]] = [[] for _ in range(runs)]
            for edge in unroll(self.directory.template, self.directory.instance.k_eval, dict(key)):
                preds[edge.dst].append(edge.src)
            found = tuple(tuple(p) for p in preds)
            self.predecessors[key] = found
        return found


def _replace(plan: Plan, vertex: int, block: Block, candidates: list[Candidate]) -> list[Plan]:
    return [plan.with_placement(vertex, Placement(block, c.strategy)) for c in candidates]


def change_strategy(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Another strategy for one vertex on its block."""
    plan = state.plan
    vertex = context.pick_vertex(rng, plan)
    placement = plan.placements[vertex]
    candidates = [
        c
        for c in context.sample_candidates(
            vertex, placement.block.extent, rng, placement.strategy.microbatches
        )
        if c.strategy != placement.strategy
    ]
    return _replace(plan, vertex, placement.block, candidates)


def change_microbatches(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Another setting of one vertex's (dp, pp, tp): micro-batching, recompute, sharding,
    offload, or the rollout's gpu_memory_utilization and max_num_seqs."""
    plan = state.plan
    if context.knobs.fixed_mb:
        return []
    vertex = context.pick_vertex(rng, plan)
    placement = plan.placements[vertex]
    current = placement.strategy
    options = [
        c
        for c in context.directory.options[vertex].get(placement.block.extent, ())
        if (c.strategy.dp, c.strategy.pp, c.strategy.tp) == (current.dp, current.pp, current.tp)
        and c.strategy != current
    ]
    if not options:
        return []
    return _replace(plan, vertex, placement.block, [rng.choice(options)])


def move_block(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Move one vertex to another block of the same shape (same strategy)."""
    plan = state.plan
    vertex = context.pick_vertex(rng, plan)
    placement = plan.placements[vertex]
    others = [
        b for b in context.directory.blocks(vertex, placement.block.extent) if b != placement.block
    ]
    if not others:
        return []
    return [plan.with_placement(vertex, Placement(rng.choice(others), placement.strategy))]


def resize_block(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Shrink or grow one vertex's block to the next block size below or above its own.

    The new block lies in the old one or contains it: half or twice its
    size among aligned blocks; with ``placement.node_blocks: any``, one node
    fewer or more among runs of nodes (nodes 1-2 grow to nodes 0-2 or 1-3).
    """
    plan = state.plan
    vertex = context.pick_vertex(rng, plan)
    block = plan.placements[vertex].block
    sizes = sorted(context.blocks_by_size)
    position = sizes.index(block.size)
    neighbours = []
    if position > 0:
        neighbours += [b for b in context.blocks_by_size[sizes[position - 1]] if block.contains(b)]
    if position + 1 < len(sizes):
        neighbours += [b for b in context.blocks_by_size[sizes[position + 1]] if b.contains(block)]
    neighbours = [
        b
        for b in neighbours
        if context.directory.allows(vertex, b) and context.directory.options[vertex].get(b.extent)
    ]
    if not neighbours:
        return []
    target = rng.choice(neighbours)
    return _replace(plan, vertex, target, context.sample_candidates(vertex, target.extent, rng))


def _two_vertices(plan: Plan, context: MoveContext, rng: random.Random) -> tuple[int, int]:
    first = context.pick_vertex(rng, plan)
    second = context.pick_vertex(rng, plan)
    while second == first and len(plan.placements) > 1:
        second = rng.randrange(len(plan.placements))
    return first, second


def _fastest_on(
    vertex: int, block: Block, context: MoveContext, current: Placement
) -> Placement | None:
    options = context.directory.options[vertex].get(block.extent, ())
    if not options or not context.directory.allows(vertex, block):
        return None
    if block.extent == current.block.extent:
        return Placement(block, current.strategy)
    return Placement(block, options[0].strategy)


def swap_blocks(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Exchange the blocks of two vertices (each keeps its strategy if the shape allows)."""
    plan = state.plan
    first, second = _two_vertices(plan, context, rng)
    a, b = plan.placements[first], plan.placements[second]
    if a.block == b.block:
        return []
    new_first = _fastest_on(first, b.block, context, a)
    new_second = _fastest_on(second, a.block, context, b)
    if new_first is None or new_second is None:
        return []
    return [plan.with_placement(first, new_first).with_placement(second, new_second)]


def colocate(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Put one vertex on another vertex's block."""
    plan = state.plan
    first, second = _two_vertices(plan, context, rng)
    target = plan.placements[first].block
    if plan.placements[second].block == target or not context.directory.allows(second, target):
        return []
    return _replace(plan, second, target, context.sample_candidates(second, target.extent, rng))


def separate(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Move one of two vertices sharing GPUs to a block disjoint from the other's."""
    plan = state.plan
    first, second = _two_vertices(plan, context, rng)
    anchor = plan.placements[first].block
    moving = plan.placements[second]
    if not anchor.intersects(moving.block):
        return []
    sizes = sorted({moving.block.size, max(1, moving.block.size // 2)})
    targets = [
        b
        for size in sizes
        for b in context.blocks_by_size.get(size, ())
        if not b.intersects(anchor)
        and context.directory.allows(second, b)
        and context.directory.options[second].get(b.extent)
    ]
    if not targets:
        return []
    target = rng.choice(targets)
    return _replace(plan, second, target, context.sample_candidates(second, target.extent, rng))


def change_staleness(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Another staleness for one trained model."""
    plan = state.plan
    choices = context.knobs.staleness_candidates
    models = [m for m, _ in plan.staleness if len(choices[m]) > 1]
    if not models:
        return []
    model = rng.choice(models)
    current = plan.staleness_map[model]
    return [plan.with_staleness(model, rng.choice([s for s in choices[model] if s != current]))]


def swap_order(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """Run a later run before an earlier one that shares GPUs with it (a priority swap).

    The run order is the one the simulator used for the current plan
    (``state.evaluation.order``). The later run moves to just before the
    earlier one when none of its direct predecessors lies between them, which
    keeps the order topological. Under the steady-state objective there is
    none: a plan's order is then cyclic, and the search keeps the list order
    (docs/solvers.md#the-steady-state-objective).
    """
    plan, placed = state.plan, state.evaluation.order
    if not placed or context.knobs.objective == "steady_state":
        return []
    count = len(plan.placements)
    position = {run: index for index, run in enumerate(placed)}
    predecessors = context.run_predecessors(plan)
    later = rng.randrange(1, len(placed))
    run = placed[later]
    block = plan.placements[run % count].block
    low = max((position[p] for p in predecessors[run]), default=-1)
    choices = [
        index
        for index in range(low + 1, later)
        if plan.placements[placed[index] % count].block.intersects(block)
    ]
    if not choices:
        return []
    earlier = rng.choice(choices)
    sequence = list(placed)
    sequence.pop(later)
    sequence.insert(earlier, run)
    return [plan.with_order(tuple((r % count, r // count) for r in sequence))]


class Move(Protocol):
    """What the search needs of a move: a name, a kind and a proposal."""

    name: str
    kind: str

    def propose(self, state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
        """Neighbour plans of ``state`` (empty when the move does not apply)."""
        ...


@dataclass(frozen=True)
class PlanMove:
    """A move given by a function ``(state, context, rng) -> list[Plan]``.

    Attributes
    ----------
    name
        The move's name (the function's, by default).
    kind
        :data:`SINGLE`, :data:`PAIR` or :data:`PARAMETER`.
    function
        The neighbourhood function.
    """

    name: str
    kind: str
    function: Callable[[SearchState, MoveContext, random.Random], list[Plan]]
    #: Whether the move can apply to a directory's plan space (None: always); the
    #: search leaves out moves that cannot, so its random draws stay those of the
    #: moves that can.
    applies: Callable[[CandidateDirectory], bool] | None = None

    def applicable(self, directory: CandidateDirectory) -> bool:
        """Whether the move can propose anything on ``directory``'s plan space."""
        return self.applies is None or self.applies(directory)

    def propose(self, state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
        """Neighbour plans of ``state`` (empty when the move does not apply)."""
        return self.function(state, context, rng)


def _move(kind: str, function, applies=None) -> PlanMove:
    return PlanMove(function.__name__, kind, function, applies)


MOVE_BLOCK = _move(SINGLE, move_block)
RESIZE_BLOCK = _move(SINGLE, resize_block)
CHANGE_POOL = _move(SINGLE, change_pool, pools_vary)
SWAP_BLOCKS = _move(PAIR, swap_blocks)
COLOCATE = _move(PAIR, colocate)
SEPARATE = _move(PAIR, separate)
CHANGE_STRATEGY = _move(PARAMETER, change_strategy)
CHANGE_MICROBATCHES = _move(PARAMETER, change_microbatches)
CHANGE_EXPERT_LAYOUT = _move(PARAMETER, change_expert_layout, expert_layouts_vary)
CHANGE_STALENESS = _move(PARAMETER, change_staleness)
SWAP_ORDER = _move(PARAMETER, swap_order)
SET_GROUP_SETTING = _move(PARAMETER, set_group_setting, group_settings_vary)
REPARTITION_GROUP = _move(PAIR, repartition_group, groups_repartition)

#: The moves of the search, in the order it draws them within a kind.
DEFAULT_MOVES: tuple[Move, ...] = (
    MOVE_BLOCK,
    RESIZE_BLOCK,
    SWAP_BLOCKS,
    COLOCATE,
    SEPARATE,
    CHANGE_STRATEGY,
    CHANGE_MICROBATCHES,
    CHANGE_STALENESS,
    SWAP_ORDER,
    CHANGE_EXPERT_LAYOUT,
    CHANGE_POOL,
    SET_GROUP_SETTING,
    REPARTITION_GROUP,
)
