"""The rows of a framework's cross-vertex rules, written once for both exact backends.

Per-vertex rules (strategy fields, whole-cluster blocks) are filters of the
candidate directory, so the formulation never sees the assignments they
remove; the rules that tie two vertices or a vertex and a staleness become
rows here (docs/formulation.md#framework-rules):

:class:`ImplicationRow`
    when ``condition`` holds, so does ``then`` (a follower on its leader's
    block, or in its layout): CP-SAT ``sum(then) >= 1`` enforced by the
    condition's literal, the MILP ``condition <= sum(then)``;
:class:`ExclusionRow`
    its conditions do not all hold at once: CP-SAT a clause of negated
    literals, the MILP ``sum(conditions) <= k - 1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rlplan.formulation.model import Formulation
from rlplan.formulation.rows import Chooses, Condition, OnBlocks, StalenessIs
from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldWhenShared,
    NestedOrDisjoint,
    SameBlock,
    SameLayout,
    SameNodeWidth,
    SameOrDisjoint,
    StalenessValues,
    layout_of,
    overlap_in_part,
)


@dataclass(frozen=True)
class ImplicationRow:
    """``condition`` implies ``then`` (an empty ``then`` forbids the condition)."""

    condition: Condition
    then: OnBlocks | Chooses


@dataclass(frozen=True)
class ExclusionRow:
    """Not every one of ``conditions`` holds."""

    conditions: tuple[Condition, ...]


FrameworkRow = ImplicationRow | ExclusionRow


def framework_rows(f: Formulation) -> Iterator[FrameworkRow]:
    """Every row of the problem's framework rules (none without ``engine.framework``)."""
    framework = f.problem.directory.framework
    if framework is None:
        return
    names = f.problem.directory.template.names
    index = {name: position for position, name in enumerate(names)}
    for rule in framework.rules:
        if isinstance(rule, SameBlock):
            if rule.leader in index and rule.follower in index:
                leader, follower = index[rule.leader], index[rule.follower]
                if isinstance(rule, SameLayout):
                    yield from _same_layout(f, leader, follower)
                else:
                    yield from _same_block(f, leader, follower)
        elif isinstance(rule, SameOrDisjoint):
            present = [index[name] for name in rule.vertices if name in index]
            for i, first in enumerate(present):
                for second in present[i + 1 :]:
                    yield from _same_or_disjoint(f, first, second)
        elif isinstance(rule, NestedOrDisjoint):
            present = [index[name] for name in rule.vertices if name in index]
            for i, first in enumerate(present):
                for second in present[i + 1 :]:
                    yield from _nested_or_disjoint(f, first, second)
        elif isinstance(rule, DisjointWhenStale):
            if rule.first in index and rule.second in index:
                yield from _disjoint_when_stale(f, rule, index[rule.first], index[rule.second])
        elif isinstance(rule, FieldWhenShared):
            if rule.vertex in index and rule.other in index:
                yield from _field_when_shared(f, rule, index[rule.vertex], index[rule.other])
        elif isinstance(rule, SameNodeWidth):
            present = [index[name] for name in rule.vertices if name in index]
            for i, first in enumerate(present):
                for second in present[i + 1 :]:
                    yield from _same_node_width(f, first, second)
        elif isinstance(rule, StalenessValues):
            for model, choices in f.staleness_choices.items():
                for value in choices:
                    if value not in rule.allowed:
                        yield ExclusionRow((StalenessIs(model, value),))


def _same_block(f: Formulation, leader: int, follower: int) -> Iterator[ImplicationRow]:
    """On each leader block, the follower is on that block too."""
    followed = set(f.blocks_of(follower))
    for block in f.blocks_of(leader):
        then = (block,) if block in followed else ()
        yield ImplicationRow(OnBlocks(leader, (block,)), OnBlocks(follower, then))


def _same_layout(f: Formulation, leader: int, follower: int) -> Iterator[ImplicationRow]:
    """Each leader assignment implies a follower assignment on its block in its layout
    (:data:`~rlplan.rpeg.model.frameworks.rules.LAYOUT_FIELDS`)."""
    by_key: dict[tuple, list[int]] = {}
    for position, assignment in enumerate(f.assignments[follower]):
        by_key.setdefault(_placed_layout(assignment), []).append(position)
    for position, assignment in enumerate(f.assignments[leader]):
        matches = tuple(by_key.get(_placed_layout(assignment), ()))
        yield ImplicationRow(Chooses(leader, (position,)), Chooses(follower, matches))


def _placed_layout(assignment) -> tuple:
    return (assignment.block, *layout_of(assignment.candidate.strategy))


def _same_or_disjoint(f: Formulation, first: int, second: int) -> Iterator[ExclusionRow]:
    """The two vertices' blocks are equal or share no GPU."""
    for block in f.blocks_of(first):
        crossing = tuple(b for b in f.overlapping_blocks(second, block) if b != block)
        if crossing:
            yield ExclusionRow((OnBlocks(first, (block,)), OnBlocks(second, crossing)))


def _nested_or_disjoint(f: Formulation, first: int, second: int) -> Iterator[ExclusionRow]:
    """The two vertices' blocks are nested or share no GPU (none overlaps the other in part)."""
    for block in f.blocks_of(first):
        crossing = tuple(
            b
            for b in f.overlapping_blocks(second, block)
            if overlap_in_part(f.blocks[b], f.blocks[block])
        )
        if crossing:
            yield ExclusionRow((OnBlocks(first, (block,)), OnBlocks(second, crossing)))


def _disjoint_when_stale(
    f: Formulation, rule: DisjointWhenStale, first: int, second: int
) -> Iterator[ExclusionRow]:
    """With the model off-policy, the two vertices share no GPU."""
    stale = [s for s in f.staleness_choices.get(rule.model, ()) if s >= 1]
    for value in stale:
        for block in f.blocks_of(first):
            overlapping = f.overlapping_blocks(second, block)
            if overlapping:
                yield ExclusionRow(
                    (
                        StalenessIs(rule.model, value),
                        OnBlocks(first, (block,)),
                        OnBlocks(second, overlapping),
                    )
                )


def _field_when_shared(
    f: Formulation, rule: FieldWhenShared, vertex: int, other: int
) -> Iterator[ExclusionRow]:
    """On a block sharing GPUs with ``other``'s, ``vertex`` takes an allowed field value."""
    for block in f.blocks_of(other):
        overlapping = set(f.overlapping_blocks(vertex, block))
        bad = tuple(
            position
            for position, assignment in enumerate(f.assignments[vertex])
            if f.block_index[assignment.block] in overlapping
            and getattr(assignment.candidate.strategy, rule.field) not in rule.allowed
        )
        if bad:
            yield ExclusionRow((OnBlocks(other, (block,)), Chooses(vertex, bad)))


def _same_node_width(f: Formulation, first: int, second: int) -> Iterator[ExclusionRow]:
    """The two vertices' pools have one width: per width of ``first``'s, none of the others.

    One row per node width ``w`` that ``first`` can take: ``first`` on a block
    of a pool of width ``w`` excludes ``second`` on any block of a pool of
    another width (no row on a one-pool cluster, or where all pools agree).
    """
    widths = [geometry.gpus_per_node for geometry in f.problem.directory.cluster.pools]
    if len(set(widths)) < 2:
        return
    by_width: dict[int, list[int]] = {}
    for block in f.blocks_of(first):
        by_width.setdefault(widths[f.blocks[block].pool], []).append(block)
    for width, blocks in sorted(by_width.items()):
        others = tuple(b for b in f.blocks_of(second) if widths[f.blocks[b].pool] != width)
        if others:
            yield ExclusionRow((OnBlocks(first, tuple(blocks)), OnBlocks(second, others)))
