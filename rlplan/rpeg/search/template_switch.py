"""The local search's template move: switch a plan between separate and fused actor-critic.

An AC-share instance (PPO with ``optimizer.staleness_candidates.ac_share``)
has two templates (:mod:`rlplan.rpeg.templates`). :func:`convert_plan` carries a
plan over to the other template, vertex by vertex:

* ``actor.generate``, ``reference.infer`` and ``reward.infer`` exist in both
  and keep their placement;
* separate -> fused: ``ac.infer`` takes the block of ``critic.infer`` or of
  ``actor.infer``, ``ac.train`` the block of ``actor.train`` or of
  ``critic.train`` (the first of each pair, or a random one);
* fused -> separate: ``actor.infer`` and ``critic.infer`` take the block of
  ``ac.infer``, ``actor.train`` and ``critic.train`` that of ``ac.train``;
* on its new block a vertex keeps its strategy when the target template
  allows it there, else takes the fastest candidate of that block's shape
  (or, with none, its fastest candidate anywhere);
* staleness: ``ac`` takes the actor's, actor and critic take the ``ac``
  one, each moved to the nearest value of its own candidate list;
* the run order is dropped, and memory overflow is repaired with
  :func:`rlplan.rpeg.search.baselines.repair_memory` when possible.

:func:`switch_template` is the move (same signature as those of
:mod:`rlplan.rpeg.search.moves`); the search proposes it among its structural
moves when the instance has both templates.
"""

from __future__ import annotations

import random

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.search.baselines import repair_memory

#: Where each vertex of the target template takes its block from, by target template.
_SOURCES: dict[bool, dict[str, tuple[str, ...]]] = {
    True: {
        "ac.infer": ("critic.infer", "actor.infer"),
        "ac.train": ("actor.train", "critic.train"),
    },
    False: {
        "actor.infer": ("ac.infer",),
        "critic.infer": ("ac.infer",),
        "actor.train": ("ac.train",),
        "critic.train": ("ac.train",),
    },
}

#: Where each trained model of the target template takes its staleness from.
_STALENESS_SOURCES: dict[bool, dict[str, str]] = {
    True: {"ac": "actor"},
    False: {"actor": "ac", "critic": "ac"},
}


def _nearest(value: int, choices: tuple[int, ...]) -> int:
    return min(choices, key=lambda choice: (abs(choice - value), choice))


def _placement_on(
    directory: CandidateDirectory, vertex: int, source: Placement
) -> Placement | None:
    """``source``'s block with its strategy if allowed there for ``vertex``, else the fastest."""
    block = source.block
    if not directory.allows(vertex, block):
        return None
    options = directory.options[vertex].get(block.extent, ())
    if not options:
        return None
    for candidate in options:
        if candidate.strategy == source.strategy:
            return Placement(block, candidate.strategy)
    return Placement(block, options[0].strategy)


def _fastest_anywhere(directory: CandidateDirectory, vertex: int) -> Placement | None:
    candidate = directory.fastest(vertex)
    if candidate is None:
        return None
    blocks = directory.blocks(vertex, candidate.shape)
    return Placement(blocks[0], candidate.strategy) if blocks else None


def convert_plan(
    plan: Plan,
    source: CandidateDirectory,
    target: CandidateDirectory,
    rng: random.Random | None = None,
) -> Plan | None:
    """``plan`` (of ``source``'s template) carried over to ``target``'s template.

    Parameters
    ----------
    plan
        A plan of ``source``'s template.
    source, target
        The directories of the two templates (:meth:`CandidateDirectory.variant`).
    rng
        With a generator, each fused vertex takes its block from a random one
        of its two sources; without, from the first.

    Returns
    -------
    Plan | None
        The converted plan (not necessarily memory-feasible), or None when
        some vertex of the target template has no candidate at all.
    """
    names = source.template.names
    by_name = dict(zip(names, plan.placements, strict=True))
    sources = _SOURCES[target.fused]
    placements = []
    for index, name in enumerate(target.template.names):
        if name in by_name:
            origins = [by_name[name]]
        else:
            origins = [by_name[n] for n in sources[name] if n in by_name]
            if rng is not None and len(origins) > 1:
                rng.shuffle(origins)
        placement = None
        for origin in origins:
            placement = _placement_on(target, index, origin)
            if placement is not None:
                break
        if placement is None:
            placement = _fastest_anywhere(target, index)
        if placement is None:
            return None
        placements.append(placement)
    current = plan.staleness_map
    choices = target.instance.optimizer.staleness_candidates
    staleness = {}
    for model in target.template.trained_models:
        origin = _STALENESS_SOURCES[target.fused].get(model)
        value = current.get(origin, 0) if origin is not None else 0
        staleness[model] = _nearest(value, choices[model])
    return Plan(tuple(placements), make_staleness(staleness))


def switch_template(plan: Plan, context, rng: random.Random, simulator=None) -> list[Plan]:
    """The move: ``plan`` in the other template (memory repaired when possible); [] if none.

    ``context`` is the :class:`~rlplan.rpeg.search.moves.MoveContext` of the plan's
    template; the instance must allow AC-share. ``simulator`` (any template's
    simulator of the instance) checks memory for the repair; without it one
    is built.
    """

    source = context.directory
    if not source.instance.ac_share:
        return []
    target = source.variant(not plan.fused)
    converted = convert_plan(plan, source, target, rng)
    if converted is None:
        return []
    checker = simulator.variant(target.fused) if simulator is not None else Simulator(target)
    repaired = repair_memory(converted, checker)
    return [repaired if repaired is not None else converted]
