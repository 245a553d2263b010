"""Compound moves: one memory setting for a whole group of vertices at once.

A plan's best memory settings are often joint: offloading one inference
vertex frees little, offloading every one of them frees the GPU memory a
trainer needs to grow onto their block, and a trainer grows only once they
have. One vertex at a time, each step of such a path is uphill and the
annealing rarely walks it. :func:`set_group_setting` takes the whole step
in one move (docs/solvers.md#local).
"""

from __future__ import annotations

import dataclasses
import random
import weakref

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.strategy import dimension

#: The memory dimensions the group move sets: activation checkpointing, state
#: sharding and offload (rlplan.rpeg.strategy.DIMENSIONS).
MEMORY_DIMENSIONS = ("recompute", "sharding", "offload")


def _setting_groups(directory: CandidateDirectory) -> list[tuple[str, tuple[int, ...]]]:
    """(dimension, vertices) pairs: every vertex kind with the dimension, and all its kinds
    together, where two or more vertices have it and the plan space lists both values
    (computed once per directory)."""
    found = _GROUPS.get(directory)
    if found is None:
        found = _GROUPS[directory] = _find_groups(directory)
    return found


#: The groups of each directory seen, weakly keyed.
_GROUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _find_groups(directory: CandidateDirectory) -> list[tuple[str, tuple[int, ...]]]:
    vertices = directory.template.vertices
    groups: list[tuple[str, tuple[int, ...]]] = []
    for name in MEMORY_DIMENSIONS:
        declared = dimension(name)
        having = [v for v, vertex in enumerate(vertices) if vertex.kind in declared.kinds]
        varied = [
            v
            for v in having
            if len(
                {
                    getattr(c.strategy, name)
                    for options in directory.options[v].values()
                    for c in options
                }
            )
            > 1
        ]
        by_kind = [
            tuple(v for v in varied if vertices[v].kind is kind)
            for kind in sorted(declared.kinds, key=lambda kind: kind.value)
        ]
        for group in {*by_kind, tuple(varied)}:
            if len(group) >= 2:
                groups.append((name, group))
    return sorted(groups)


def group_settings_vary(directory: CandidateDirectory) -> bool:
    """Whether two or more vertices of the plan space can each take two values of a
    memory dimension (else :func:`set_group_setting` proposes nothing)."""
    return bool(_setting_groups(directory))


def with_setting(
    directory: CandidateDirectory, vertex: int, placement: Placement, name: str, value
) -> Placement | None:
    """``placement`` with strategy field ``name`` set to ``value``, the rest kept.

    The exact strategy when the vertex's candidates on its block list it,
    else the fastest candidate of the same (dp, pp, tp) with ``value``;
    ``None`` when there is neither, or when the field already has ``value``.
    """
    current = placement.strategy
    if getattr(current, name) == value:
        return None
    options = directory.options[vertex].get(placement.block.extent, ())
    wanted = dataclasses.replace(current, **{name: value})
    fallback: Strategy | None = None
    for candidate in options:
        strategy = candidate.strategy
        if strategy == wanted:
            return Placement(placement.block, strategy)
        if (
            fallback is None
            and getattr(strategy, name) == value
            and (strategy.dp, strategy.pp, strategy.tp) == (current.dp, current.pp, current.tp)
        ):
            fallback = strategy
    return None if fallback is None else Placement(placement.block, fallback)


def set_group_setting(state: SearchState, context, rng: random.Random) -> list[Plan]:
    """One memory setting (offload, sharding or recompute) for every vertex of a group.

    The group is the vertices of one kind that can take both values of the
    dimension, or all of its kinds together; each vertex keeps the rest of
    its strategy where its block's candidates allow (:func:`with_setting`).
    One plan per value of the dimension that changes at least one vertex.
    """
    directory = context.directory
    groups = _setting_groups(directory)
    if not groups:
        return []
    name, group = rng.choice(groups)
    plan = state.plan
    proposed = []
    for value in dimension(name).candidates:
        placements = list(plan.placements)
        changed = False
        for vertex in group:
            moved = with_setting(directory, vertex, placements[vertex], name, value)
            if moved is not None:
                placements[vertex], changed = moved, True
        if changed:
            proposed.append(Plan(tuple(placements), plan.staleness, None))
    return proposed


def staleness_in_order(state: SearchState, model: str, value: int) -> Plan | None:
    """``state``'s plan with ``model`` at a higher staleness ``value``, its run order kept.

    :meth:`Plan.with_staleness` drops the order, so the simulator then uses its
    list order. A higher staleness only drops waits, so the order the simulator
    used for the current plan (``state.evaluation.order``) stays topological.
    An off-policy optimum is often the on-policy plan's own order with the
    refit no longer waited for, where the list order starts the next rollout
    early and is slower; the polish tries both (docs/solvers.md#local).
    None: the staleness does not rise, or the plan has no simulated order.
    """
    plan, placed = state.plan, state.evaluation.order
    if not placed or value <= plan.staleness_map[model]:
        return None
    count = len(plan.placements)
    order = tuple((run % count, run // count) for run in placed)
    return plan.with_staleness(model, value).with_order(order)
