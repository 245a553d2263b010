"""Plans made to follow a framework's rules: the heuristics' repair, everyone's check.

The exact backends write the cross-vertex rules as rows
(:mod:`rlplan.formulation.framework`); the heuristics (baselines, random
starts, local-search neighbours) build plans one vertex at a time, so each of
their plans is first *conformed*: a follower takes its leader's block (and
layout), a vertex beside a colocated rollout takes an allowed value of the
rule's field, a staleness outside the framework's values, or one the
placement forbids, falls back to one it allows. What cannot be repaired
that way (two blocks that overlap without being equal) is left, and
:func:`framework_problems` reports it (docs/plan-space.md#framework-plan-spaces).
"""

from __future__ import annotations

import weakref

from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.frameworks.rules import (
    DisjointWhenStale,
    FieldWhenShared,
    SameBlock,
    SameLayout,
    StalenessValues,
    layout_of,
    plan_problems,
    pool_sizes,
)
from rlplan.rpeg.model.plan import Placement, Plan


def framework_problems(directory: CandidateDirectory, plan: Plan) -> list[str]:
    """The rules of the directory's framework that ``plan`` breaks (empty: none or no framework)."""
    framework = directory.framework
    if framework is None:
        return []
    template = directory.for_plan(plan).template
    return plan_problems(framework, template, plan, pool_sizes(directory.cluster))


def conform(directory: CandidateDirectory, plan: Plan) -> Plan:
    """``plan`` repaired to follow the framework's rules where one vertex's change can.

    Followers of :class:`SameBlock` / :class:`SameLayout` rules move to their
    leader's block (a candidate with the leader's layout, the current
    strategy if it is one, else the fastest); a :class:`FieldWhenShared`
    vertex switches to the fastest candidate of its block with an allowed
    field (in its own layout when there is one); staleness outside :class:`StalenessValues`
    becomes the largest allowed value below it, and a :class:`DisjointWhenStale`
    pair that shares GPUs runs on-policy. The result may still break a rule
    (:func:`framework_problems` tells).
    """
    framework = directory.framework
    if framework is None:
        return plan
    directory = directory.for_plan(plan)
    names = directory.template.names
    for rule in framework.of_kind(SameBlock):
        if rule.leader in names and rule.follower in names:
            plan = _follow(
                directory, plan, names.index(rule.leader), names.index(rule.follower), rule
            )
    for rule in framework.of_kind(FieldWhenShared):
        if rule.vertex in names and rule.other in names:
            plan = _field_beside(
                directory, plan, names.index(rule.vertex), names.index(rule.other), rule
            )
    return _staleness(framework, names, plan)


class _Options:
    """A directory's candidates grouped for conforming: by layout, and by allowed field value.

    Built on first use per (vertex, shape) and kept while the directory lives:
    the memory repair conforms every trial move, so each lookup is a dictionary
    hit instead of a scan of the shape's candidates. Each group keeps the
    directory's order (fastest first) and maps strategy -> candidate.
    """

    def __init__(self, directory: CandidateDirectory) -> None:
        # The directory's per-vertex options, not the directory: it keys the cache weakly.
        self.options = directory.options
        self._layouts: dict[tuple, dict[tuple[int, ...], dict]] = {}
        self._fields: dict[tuple, tuple[dict, dict[tuple[int, ...], dict]]] = {}
        self._every: dict[tuple, dict] = {}

    def every(self, vertex: int, shape: tuple) -> dict:
        """Strategy -> candidate of ``vertex`` on ``shape``, fastest first."""
        key = (vertex, shape)
        found = self._every.get(key)
        if found is None:
            options = self.options[vertex].get(shape, ())
            found = self._every[key] = {c.strategy: c for c in options}
        return found

    def with_layout(self, vertex: int, shape: tuple, layout: tuple[int, ...]) -> dict:
        """Strategy -> candidate of ``vertex`` on ``shape`` in ``layout``, fastest first."""
        key = (vertex, shape)
        groups = self._layouts.get(key)
        if groups is None:
            groups = self._layouts[key] = _grouped(self.options[vertex].get(shape, ()))
        return groups.get(layout, {})

    def with_field(self, vertex: int, shape: tuple, rule: FieldWhenShared) -> tuple[dict, dict]:
        """The candidates with an allowed value of ``rule.field``: all, and by layout."""
        key = (vertex, shape, rule.field, rule.allowed)
        found = self._fields.get(key)
        if found is None:
            allowed = tuple(
                c
                for c in self.options[vertex].get(shape, ())
                if getattr(c.strategy, rule.field) in rule.allowed
            )
            found = self._fields[key] = ({c.strategy: c for c in allowed}, _grouped(allowed))
        return found


def _grouped(candidates: tuple[Candidate, ...]) -> dict[tuple[int, ...], dict]:
    groups: dict[tuple[int, ...], dict] = {}
    for candidate in candidates:
        groups.setdefault(layout_of(candidate.strategy), {})[candidate.strategy] = candidate
    return groups


_OPTIONS: weakref.WeakKeyDictionary[CandidateDirectory, _Options] = weakref.WeakKeyDictionary()


def _options(directory: CandidateDirectory) -> _Options:
    found = _OPTIONS.get(directory)
    if found is None:
        found = _OPTIONS[directory] = _Options(directory)
    return found


def _follow(
    directory: CandidateDirectory, plan: Plan, leader: int, follower: int, rule: SameBlock
) -> Plan:
    """The follower on the leader's block (with its layout for a :class:`SameLayout` rule)."""
    lead, follow = plan.placements[leader], plan.placements[follower]
    same_layout = isinstance(rule, SameLayout)
    layout = layout_of(lead.strategy)
    if follow.block == lead.block and (not same_layout or layout_of(follow.strategy) == layout):
        return plan
    shape = lead.block.extent
    index = _options(directory)
    if same_layout:
        options = index.with_layout(follower, shape, layout)
    else:
        options = index.every(follower, shape)
    chosen = _keep_or_fastest(options, follow.strategy)
    if chosen is None or not directory.allows(follower, lead.block):
        return plan
    return plan.with_placement(follower, Placement(lead.block, chosen.strategy))


def _field_beside(
    directory: CandidateDirectory, plan: Plan, vertex: int, other: int, rule: FieldWhenShared
) -> Plan:
    """The vertex with an allowed value of the rule's field when it shares GPUs with ``other``."""
    mine, theirs = plan.placements[vertex], plan.placements[other]
    if not mine.block.intersects(theirs.block):
        return plan
    if getattr(mine.strategy, rule.field) in rule.allowed:
        return plan
    allowed, by_layout = _options(directory).with_field(vertex, mine.block.extent, rule)
    # The vertex's own layout first (a layout tie may hold it), else the fastest.
    options = by_layout.get(layout_of(mine.strategy)) or allowed
    if not options:
        return plan
    return plan.with_placement(vertex, Placement(mine.block, next(iter(options))))


def _keep_or_fastest(options: dict, strategy) -> Candidate | None:
    """The candidate of ``strategy`` among ``options`` (strategy -> candidate), else the first."""
    found = options.get(strategy)
    return found if found is not None else next(iter(options.values()), None)


def _staleness(framework, names: tuple[str, ...], plan: Plan) -> Plan:
    """Staleness the framework allows, on-policy where a stale pair shares GPUs."""
    placed = dict(zip(names, plan.placements, strict=True))
    for model, value in plan.staleness:
        allowed = sorted(
            s
            for s in range(value + 1)
            if all(s in rule.allowed for rule in framework.of_kind(StalenessValues))
        )
        for rule in framework.of_kind(DisjointWhenStale):
            first, second = placed.get(rule.first), placed.get(rule.second)
            if rule.model == model and first and second and first.block.intersects(second.block):
                allowed = [s for s in allowed if s < 1]
        wanted = allowed[-1] if allowed else value
        if wanted != value:
            plan = plan.with_staleness(model, wanted)
    return plan
