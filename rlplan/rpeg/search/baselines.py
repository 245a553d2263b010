"""The two baseline plan constructors of the reference optimizer.

* :func:`greedy_plan` gives every vertex the fastest memory-feasible strategy
  on the whole cluster (all vertices share every GPU and run one after the
  other).
* :func:`concurrent_plan` groups vertices by DAG depth (vertices of equal
  depth are independent) and partitions the cluster among the vertices of
  each group, picking per group the partition with the smallest estimated
  group time (the slowest part, where vertices sharing a part add up); on a
  cluster of GPU pools it also gives each group one pool, in every
  assignment of groups to pools (as one would by hand).

Both repair memory overflow of the assembled plan by moving vertices to
leaner strategies; they return ``None`` when no feasible plan is found. Both
take a vertex's blocks from the candidate directory, so block pins hold: a
vertex pinned off the whole cluster goes to its widest allowed block
(greedy), and a part of a partition only takes blocks every vertex of the
part may use (concurrent).
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
import weakref

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.frameworks.conform import conform, framework_problems
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.model.shapes import pool_of


def default_staleness(directory: CandidateDirectory) -> tuple[tuple[str, int], ...]:
    """The largest staleness candidate of every trained model (most overlap allowed)."""
    candidates = directory.instance.optimizer.staleness_candidates
    return make_staleness(
        {model: max(candidates[model]) for model in directory.template.trained_models}
    )


def repair_memory(plan: Plan, simulator: Simulator, max_moves: int = 64) -> Plan | None:
    """Greedily move vertices to leaner strategies on their blocks until the plan fits.

    Each move picks, over all vertices and their candidates on the same block
    shape, the one that lowers the worst overflow most, breaking ties by the
    smallest time increase. Returns ``None`` when no move helps.

    Under a framework's rules (``engine.framework``) the plan and every trial
    are first conformed to them (:func:`~rlplan.rpeg.model.frameworks.conform.conform`),
    and a plan that still breaks one is ``None``.
    """
    directory = simulator.directory
    plan = conform(directory, plan)
    violation = simulator.memory_violation(plan)
    for _ in range(max_moves):
        if violation <= 0:
            return None if framework_problems(directory, plan) else plan
        best: tuple[float, float] | None = None
        best_plan = None
        for vertex, placement in enumerate(plan.placements):
            current = directory.candidate(vertex, placement.block.extent, placement.strategy)
            for candidate in directory.options[vertex].get(placement.block.extent, ()):
                if candidate.memory >= current.memory:
                    continue
                trial = plan.with_placement(vertex, Placement(placement.block, candidate.strategy))
                trial = conform(directory, trial)
                trial_violation = simulator.memory_violation(trial)
                key = (trial_violation, candidate.time - current.time)
                if trial_violation < violation and (best is None or key < best):
                    best, best_plan = key, trial
        if best_plan is None:
            return None
        plan, violation = best_plan, best[0]
    return plan if violation <= 0 and not framework_problems(directory, plan) else None


def _greedy_block(directory: CandidateDirectory, vertex: int, whole: Block) -> Block | None:
    """The whole cluster, or for a vertex pinned off it its widest allowed block with candidates."""
    if directory.allows(vertex, whole):
        return whole
    widest = None
    for shape in directory.options[vertex]:
        for block in directory.blocks(vertex, shape):
            if widest is None or block.size > widest.size:
                widest = block
    return widest


def greedy_plan(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """Fastest memory-feasible strategy per vertex on the whole cluster (or its pinned block).

    On a cluster of GPU pools the whole of each pool in turn; the plan with
    the best score is kept.
    """
    best, best_score = None, math.inf
    for whole in directory.cluster.whole_blocks():
        plan = _greedy_on(directory, simulator, whole)
        if plan is None or not directory.cluster.pooled:
            best = best if plan is None else plan
            continue
        score = simulator.evaluate(plan).score
        if score < best_score:
            best, best_score = plan, score
    return best


def _greedy_on(directory: CandidateDirectory, simulator: Simulator, whole: Block) -> Plan | None:
    """:func:`greedy_plan` with every vertex on ``whole`` (or its pinned block), repaired."""
    placements = []
    for vertex in range(len(directory.template.vertices)):
        block = _greedy_block(directory, vertex, whole)
        options = None if block is None else directory.options[vertex].get(block.extent)
        if not options or block is None:
            return None
        placements.append(Placement(block, options[0].strategy))
    plan = Plan(tuple(placements), default_staleness(directory))
    return repair_memory(plan, simulator)


def _pack(choices: list[tuple[Block, ...]]) -> list[Block] | None:
    """First-fit packing of disjoint blocks, one per part from its choices (largest first).

    ``choices[i]`` are the blocks part ``i`` may use, all of one shape, by start.
    A block that overlaps a placed one is skipped together with every later
    block starting before that one's end (a bisection, not a scan: a 1,024-GPU
    cluster has 1,024 one-GPU blocks).
    """
    order = sorted(range(len(choices)), key=lambda i: -choices[i][0].size)
    placed: list[Block | None] = [None] * len(choices)
    used: list[Block] = []
    for index in order:
        blocks = choices[index]
        position = 0
        while position < len(blocks):
            block = blocks[position]
            overlap = next((other for other in used if block.intersects(other)), None)
            if overlap is None:
                placed[index] = block
                used.append(block)
                break
            if block.sliced or overlap.sliced:
                position += 1  # a sliced block's hull holds GPUs it does not take
                continue
            position = bisect.bisect_left(
                blocks, overlap.end, lo=position + 1, key=lambda b: b.start
            )
        else:
            return None
    return placed  # type: ignore[return-value]


def _set_partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    result = []
    for partition in _set_partitions(rest):
        result.append([[first], *partition])
        for index in range(len(partition)):
            result.append([*partition[:index], [first, *partition[index]], *partition[index + 1 :]])
    return result


#: Ranked partitions of a depth group kept (the concurrent baseline tries its groups'
#: first 8, the local search's group move draws from them).
RANKED_LIMIT = 8

#: A ranked partition of one depth group: (estimated group time, minus the parts, the
#: block and candidate of each vertex).
GroupOption = tuple[float, int, dict[int, tuple[Block, Candidate]]]


def group_options(
    group: list[int], directory: CandidateDirectory, pool: int | None = None
) -> list[GroupOption]:
    """Partitions of the cluster (or of pool ``pool``) among a group's vertices, ranked.

    Each comes with its estimated group time; best first, the first
    :data:`RANKED_LIMIT` of them (ties in the order partitions are enumerated). Computed once per
    (directory, group, pool) and shared by the concurrent baseline and the
    local search's group move (on 1,024 GPUs in racks of 8 nodes, about 2 s per
    group of PPO).
    """
    known = _GROUP_OPTIONS.setdefault(directory, {})
    key = (tuple(group), pool)
    if key not in known:
        known[key] = _rank_partitions(group, directory, pool)
    return known[key]


#: The ranked partitions of each directory seen (weakly keyed), per (group, pool).
_GROUP_OPTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _rank_partitions(
    group: list[int], directory: CandidateDirectory, pool: int | None
) -> list[GroupOption]:
    """:func:`group_options`, computed."""
    shapes = directory.cluster.shapes
    if pool is not None:
        shapes = tuple(shape for shape in shapes if pool_of(shape) == pool)
    options = []
    seen = set()
    common: dict[tuple[tuple[int, ...], tuple[int, int, int]], tuple[Block, ...]] = {}

    def common_blocks(part: tuple[int, ...], shape: tuple[int, int, int]) -> tuple[Block, ...]:
        # The blocks of `shape` every vertex of `part` may use (from the directory's
        # per-vertex blocks, not a scan of the cluster: 1,024 GPUs have 1,024 GPU blocks).
        key = (part, shape)
        if key not in common:
            common[key] = tuple(
                block
                for block in directory.blocks(part[0], shape)
                if all(directory.allows(vertex, block) for vertex in part[1:])
            )
        return common[key]

    # Rank every (partition, part shapes) by its estimate first, then pack in that
    # order until RANKED_LIMIT pack: the estimate needs only the shapes, and packing
    # (the costly part: 1,024 GPUs have 1,024 one-GPU blocks) stops early.
    ranked = []
    for partition in _set_partitions(group):
        for part_shapes in itertools.product(shapes, repeat=len(partition)):
            key = tuple(sorted(zip(map(tuple, partition), part_shapes, strict=True)))
            if key in seen:
                continue
            seen.add(key)
            slowest = 0.0
            for part, shape in zip(partition, part_shapes, strict=True):
                total = 0.0
                for vertex in part:
                    candidates = directory.options[vertex].get(shape)
                    if not candidates:
                        break
                    total += candidates[0].time
                else:
                    slowest = max(slowest, total)
                    continue
                break
            else:
                ranked.append((slowest, -len(partition), len(ranked), partition, part_shapes))
    ranked.sort(key=lambda entry: entry[:3])
    for slowest, parts, _, partition, part_shapes in ranked:
        choices = [
            common_blocks(tuple(part), shape)
            for part, shape in zip(partition, part_shapes, strict=True)
        ]
        blocks = None if not all(choices) else _pack(choices)
        if blocks is None:
            continue
        assignment = {
            vertex: (block, directory.options[vertex][block.extent][0])
            for part, block in zip(partition, blocks, strict=True)
            for vertex in part
        }
        options.append((slowest, parts, assignment))
        if len(options) == RANKED_LIMIT:
            break
    return options


def depth_groups(directory: CandidateDirectory) -> list[list[int]]:
    """The vertices of each DAG depth of ``directory``'s template, shallowest first."""
    depths = directory.template.depths()
    return [
        [v for v in range(len(depths)) if depths[v] == depth] for depth in range(max(depths) + 1)
    ]


def concurrent_plan(
    directory: CandidateDirectory, simulator: Simulator, deadline: float = math.inf
) -> Plan | None:
    """Concurrency-aware baseline: partitions the cluster among vertices of equal DAG depth.

    The best partition of every group is tried first, then the next-best ones
    of each group in turn, each assembled plan repaired for memory; once
    ``time.perf_counter()`` passes ``deadline`` no further one is tried (the
    best so far, or the greedy plan, is returned).

    On a cluster of several GPU pools the plan is also built as one would by
    hand, one pool per depth group: for each assignment of the groups to
    pools, every group partitions only its pool, and the assignments are
    tried by increasing sum of their groups' best estimated times, at most
    :data:`POOL_ASSIGNMENTS` of them. The fastest simulated plan is kept:
    that of the whole cluster partitioned as on one pool (blocks of any
    pool), of an assignment, or the greedy plan.
    """
    groups = depth_groups(directory)
    ranked = [group_options(group, directory) for group in groups]
    if any(not options for options in ranked):
        return greedy_plan(directory, simulator)
    best_plan, best_makespan = _assemble(directory, simulator, ranked, deadline)
    if directory.cluster.pooled:
        for assigned in _pool_assignments(directory, groups):
            if time.perf_counter() >= deadline:
                break
            plan, makespan = _assemble(directory, simulator, assigned, deadline)
            if makespan < best_makespan:
                best_plan, best_makespan = plan, makespan
    if best_plan is None:
        return greedy_plan(directory, simulator)
    greedy = greedy_plan(directory, simulator)
    if greedy is not None and simulator.evaluate(greedy).makespan < best_makespan:
        return greedy
    return best_plan


#: Most assignments of depth groups to pools the concurrent baseline tries.
POOL_ASSIGNMENTS = 64


def _pool_assignments(
    directory: CandidateDirectory, groups: list[list[int]]
) -> list[list[list[GroupOption]]]:
    """Ranked partitions of each group inside its pool, per assignment of groups to pools.

    Assignments where some group has no partition of its pool are left out;
    the others go by increasing sum of the groups' best estimated times (ties
    by the pools' order), at most :data:`POOL_ASSIGNMENTS`.
    """
    pools = range(len(directory.cluster.pools))
    inside = [[group_options(group, directory, pool) for pool in pools] for group in groups]
    estimates = [[options[0][0] if options else math.inf for options in row] for row in inside]
    choices = [[pool for pool in pools if row[pool]] for row in inside]
    if math.prod(len(row) for row in choices) > 64 * POOL_ASSIGNMENTS:
        # Too many to sort: each group in its own best pool, or all groups in one.
        best = [min(row, key=lambda pool, g=g: estimates[g][pool]) for g, row in enumerate(choices)]
        chosen = [tuple(best)] + [
            (pool,) * len(groups) for pool in pools if all(pool in row for row in choices)
        ]
    else:
        chosen = list(itertools.product(*choices))
    chosen = sorted(
        dict.fromkeys(chosen),
        key=lambda pick: (sum(estimates[g][pool] for g, pool in enumerate(pick)), pick),
    )
    return [[inside[g][pool] for g, pool in enumerate(pick)] for pick in chosen[:POOL_ASSIGNMENTS]]


def _assemble(
    directory: CandidateDirectory,
    simulator: Simulator,
    ranked: list[list[GroupOption]],
    deadline: float,
) -> tuple[Plan | None, float]:
    """The best repaired plan of the groups' ranked partitions, and its makespan.

    The best partition of every group, then each group's next-best ones in
    turn (up to rank 7); ``(None, inf)`` when none fits.
    """
    template = directory.template
    best_plan, best_makespan = None, float("inf")
    # Try the best partition of every group, then, if the assembled plan does
    # not fit, the next-best ones of each group in turn.
    attempts = [[0] * len(ranked)]
    for group_index in range(len(ranked)):
        for rank in range(1, min(len(ranked[group_index]), 8)):
            choice = [0] * len(ranked)
            choice[group_index] = rank
            attempts.append(choice)
    for attempt, choice in enumerate(attempts):
        if attempt and time.perf_counter() >= deadline:
            break
        placements: list[Placement | None] = [None] * len(template.vertices)
        for group_index, rank in enumerate(choice):
            for vertex, (block, candidate) in ranked[group_index][rank][2].items():
                placements[vertex] = Placement(block, candidate.strategy)
        plan = repair_memory(Plan(tuple(placements), default_staleness(directory)), simulator)  # type: ignore[arg-type]
        if plan is None:
            continue
        makespan = simulator.evaluate(plan).makespan
        if makespan < best_makespan:
            best_plan, best_makespan = plan, makespan
    return best_plan, best_makespan
