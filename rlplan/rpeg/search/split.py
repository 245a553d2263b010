"""The split-placement baseline: generation on one block, everything else on a disjoint one.

The rule (docs/solvers.md#baselines), as one would lay out a disaggregated
run by hand:

1. The two sides are the generate vertices (the rollout) and every other
   vertex (training, log-probs, reference, values, a reward model).
2. Each vertex's work is its fastest candidate's GPU-seconds over every block
   shape (time x GPUs); a side's work is the sum over its vertices. The
   generation side's share of the GPUs is its share of the work.
3. In each GPU pool, the generation block sizes tried are the two shape sizes
   at or below the share's GPU count and the two above it (the neighbouring
   splits), smaller than the pool; each shape of such a size is paired with
   the largest shape for the other side that fits beside it, in both orders
   (generation on the first GPUs, or on the last). On a cluster of several
   pools the sides also take one whole pool each, in both assignments.
4. Every vertex runs its fastest strategy on its side's block; every trained
   model has staleness 1 where the instance lists it (generation of step t
   overlaps the training of step t - 1), else its smallest listed staleness.
5. Each plan is repaired for memory (:func:`~rlplan.rpeg.search.baselines.repair_memory`)
   and simulated; the one of the smallest score is kept (``None`` when none fits).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.search.baselines import repair_memory
from rlplan.rpeg.templates import Kind

#: Generation block sizes tried on each side of the work share's GPU count.
NEIGHBOURS = 2


def split_staleness(directory: CandidateDirectory) -> tuple[tuple[str, int], ...]:
    """Staleness 1 for every trained model that lists it, else its smallest listed value."""
    candidates = directory.instance.optimizer.staleness_candidates
    return make_staleness(
        {
            model: 1 if 1 in candidates[model] else min(candidates[model])
            for model in directory.template.trained_models
        }
    )


def sides(directory: CandidateDirectory) -> tuple[list[int], list[int]]:
    """The generate vertices and all the others, by template order."""
    vertices = directory.template.vertices
    generation = [v for v, vertex in enumerate(vertices) if vertex.kind is Kind.GENERATE]
    rest = [v for v in range(len(vertices)) if v not in generation]
    return generation, rest


def work(directory: CandidateDirectory, vertices: Sequence[int]) -> float:
    """Sum over ``vertices`` of their fastest candidate's GPU-seconds (time x GPUs) on any shape."""
    total = 0.0
    for vertex in vertices:
        gpu_seconds = [
            candidates[0].time * math.prod(shape)
            for shape, candidates in directory.options[vertex].items()
            if candidates
        ]
        total += min(gpu_seconds, default=math.inf)
    return total


def generation_share(
    directory: CandidateDirectory, parts: tuple[list[int], list[int]] | None = None
) -> float:
    """The generation side's share of both sides' work (rule step 2), or the first part's."""
    generation, rest = sides(directory) if parts is None else parts
    first, second = work(directory, generation), work(directory, rest)
    return first / (first + second) if first + second > 0 else 0.5


def _common(directory: CandidateDirectory, part: Sequence[int], shape) -> tuple[Block, ...]:
    """Blocks of ``shape`` every vertex of ``part`` may use and has candidates on, by start."""
    if any(not directory.options[v].get(shape) for v in part):
        return ()
    return tuple(
        block
        for block in directory.blocks(part[0], shape)
        if all(directory.allows(v, block) for v in part[1:])
    )


def _beside(blocks: tuple[Block, ...], taken: Block) -> Block | None:
    """The first of ``blocks`` sharing no GPU with ``taken``."""
    return next((block for block in blocks if not block.intersects(taken)), None)


def _tried_sizes(sizes: list[int], target: float) -> list[int]:
    """The :data:`NEIGHBOURS` sizes at or below ``target`` and as many above it."""
    below = [size for size in sizes if size <= target][-NEIGHBOURS:]
    above = [size for size in sizes if size > target][:NEIGHBOURS]
    return below + above


def split_blocks(
    directory: CandidateDirectory,
    share: float,
    parts: tuple[list[int], list[int]] | None = None,
) -> Iterator[tuple[Block, Block]]:
    """(generation block, other block) pairs of rule step 3, without repeats.

    ``parts`` replaces the two sides (generation and the rest) by two other
    vertex lists, the first sized by ``share``.
    """
    generation, rest = sides(directory) if parts is None else parts
    cluster = directory.cluster
    seen: set[tuple[Block, Block]] = set()
    for pool, geometry in enumerate(cluster.pools):
        shapes = [shape for shape in cluster.shapes if pool_of(shape) == pool]
        total = geometry.num_gpus
        sizes = sorted({math.prod(shape) for shape in shapes if math.prod(shape) < total})
        by_size = sorted(shapes, key=lambda shape: -math.prod(shape))
        for size in _tried_sizes(sizes, share * total):
            for shape in (s for s in shapes if math.prod(s) == size):
                firsts = _common(directory, generation, shape)
                for other in by_size:
                    pair = _place(firsts, _common(directory, rest, other))
                    if pair is not None:
                        yield from _new(pair, seen)
                        break
    if cluster.pooled:
        wholes = cluster.whole_blocks()
        for first in wholes:
            for second in wholes:
                if (
                    first is not second
                    and all(directory.allows(v, first) for v in generation)
                    and all(directory.allows(v, second) for v in rest)
                ):
                    yield from _new([(first, second)], seen)


def _place(
    firsts: tuple[Block, ...], seconds: tuple[Block, ...]
) -> list[tuple[Block, Block]] | None:
    """Both orders of a disjoint (generation, other) pair: generation first, then last."""
    if not firsts or not seconds:
        return None
    pairs = []
    early = _beside(seconds, firsts[0])
    if early is not None:
        pairs.append((firsts[0], early))
    late = _beside(firsts, seconds[0])
    if late is not None:
        pairs.append((late, seconds[0]))
    return pairs or None


def _new(
    pairs: list[tuple[Block, Block]], seen: set[tuple[Block, Block]]
) -> Iterator[tuple[Block, Block]]:
    for pair in pairs:
        if pair not in seen:
            seen.add(pair)
            yield pair


def split_plan(directory: CandidateDirectory, simulator: Simulator) -> Plan | None:
    """The best simulated split placement (the module's rule); ``None`` when none fits."""
    generation, rest = sides(directory)
    if not generation or not rest:
        return None
    staleness = split_staleness(directory)
    best, best_score = None, math.inf
    for first, second in split_blocks(directory, generation_share(directory)):
        placements = [None] * len(directory.template.vertices)
        for part, block in ((generation, first), (rest, second)):
            for vertex in part:
                placements[vertex] = Placement(
                    block, directory.options[vertex][block.extent][0].strategy
                )
        plan = repair_memory(Plan(tuple(placements), staleness), simulator)  # type: ignore[arg-type]
        if plan is None:
            continue
        score = simulator.evaluate(plan).score
        if score < best_score:
            best, best_score = plan, score
    return best
