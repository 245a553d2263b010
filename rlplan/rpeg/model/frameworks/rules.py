"""Framework rules: what one RL framework can express, one cited rule at a time.

A framework's plan space is the full plan space narrowed by its rules
(docs/plan-space.md#framework-plan-spaces). Each rule is one of a few kinds,
and each kind is applied where the plan space is defined, so every backend
inherits it:

:class:`Unsupported`
    the framework cannot run the instance at all (an algorithm or a model it
    has no worker for); its plan space is empty.
:class:`FieldValues`
    a strategy field of some vertices takes only some values (a filter of the
    candidate directory, like a strategy pin).
:class:`WholeCluster`
    a vertex's block is the whole cluster, on a cluster of several GPU pools
    the whole of its pool (a block filter of the directory).
:class:`NotSliced`
    a vertex's block is not sliced (``placement.sliced_blocks``; a block
    filter of the directory too).
:class:`StalenessValues`
    a trained model's staleness takes only some values.
:class:`SameBlock` / :class:`SameLayout`
    a follower vertex runs on its leader's block (and, for a layout, with its
    leader's :data:`LAYOUT_FIELDS`: tp, pp, dp and the expert and context
    parallel degrees): a tie row per leader assignment.
:class:`SameOrDisjoint`
    two vertices' blocks are equal or share no GPU.
:class:`NestedOrDisjoint`
    two vertices' blocks are nested (one holds the other) or share no GPU:
    runs of nodes that overlap in part (nodes 0-2 and 1-3) are refused.
:class:`DisjointWhenStale`
    two vertices share no GPU when a model runs off-policy.
:class:`FieldWhenShared`
    a vertex whose block shares a GPU with another's takes only some values of
    a field (training states offloaded beside a colocated rollout).
:class:`SameNodeWidth`
    two vertices run on GPU pools of one node width (``gpus_per_node``): a
    framework with one GPUs-per-node setting for both; on a one-pool cluster
    it always holds.

Rules that read the cluster take a
:class:`~rlplan.rpeg.model.frameworks.sizes.PoolSizes` (each pool's GPUs and
node width), or a bare GPU count for a one-pool cluster
(:func:`~rlplan.rpeg.model.frameworks.sizes.pool_sizes`, re-exported here).
Every block lies inside one pool, so a framework role (a Ray resource pool,
worker group or placement group of its vertices) runs on one pool; the other
kinds hold pool by pool as they hold on one pool
(docs/frameworks.md#on-a-cluster-of-several-gpu-pools).

Every rule carries ``words`` (what it allows, in the plan's terms), ``need``
(what the framework would need to drop it, for "1.40x if ..." lines) and
``source`` (the file and release it is read from).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlplan.rpeg.model.frameworks.sizes import PoolSizes, pool_sizes
from rlplan.rpeg.strategy import value_word
from rlplan.rpeg.templates import Kind, Template

if TYPE_CHECKING:
    from rlplan.rpeg.model.blocks import Block
    from rlplan.rpeg.model.cost import Strategy
    from rlplan.rpeg.model.plan import Plan
    from rlplan.rpeg.schema.instance import Instance


#: The strategy fields a :class:`SameLayout` follower takes from its leader: the
#: structural ones and the expert and context parallel degrees, which every
#: framework sets once per engine (a pass on another engine's model runs in that
#: engine's process groups), all 1 for dense models and where never listed.
LAYOUT_FIELDS = ("dp", "pp", "tp", "ep", "etp", "cp")


_layout_fields = operator.attrgetter(*LAYOUT_FIELDS)


def layout_of(strategy: Strategy) -> tuple[int, ...]:
    """The :data:`LAYOUT_FIELDS` of ``strategy``, in that order."""
    return _layout_fields(strategy)


@dataclass(frozen=True)
class Rule:
    """What every rule has: a short name, its meaning, what lifting it needs, its source.

    Attributes
    ----------
    name
        Short identifier, unique in its framework (``logprobs-on-policy``).
    words
        What the framework allows, in the plan's terms.
    need
        What the framework would need to reach plans the rule removes
        ("log-probs could run on other GPUs").
    source
        Where the rule is read from: file, key or assertion, and the release.
    """

    name: str
    words: str
    need: str
    source: str

    def line(self) -> str:
        """``rule name: words (source)``, the form error lines and reports use."""
        return f"rule {self.name}: {self.words} ({self.source})"


@dataclass(frozen=True)
class Unsupported(Rule):
    """The framework cannot run instances for which ``applies(instance)`` is true."""

    applies: Callable[[Instance], bool] = lambda instance: False


@dataclass(frozen=True)
class FieldValues(Rule):
    """Vertices ``vertices`` (names; none: those of ``kinds``) take ``field`` in ``allowed``.

    A ``fixed`` rule is one where the framework sets the field itself (a
    reference model always kept in host memory, an engine cap it never
    passes): the candidates take the rule's values whatever the instance's
    ``placement`` list of that field says. Otherwise the rule narrows the list.
    """

    field: str = ""
    allowed: frozenset[Any] = frozenset()
    vertices: tuple[str, ...] = ()
    kinds: tuple[Kind, ...] = ()
    fixed: bool = False

    def covers(self, name: str, kind: Kind) -> bool:
        """Whether the rule constrains the vertex ``name`` of ``kind``."""
        return name in self.vertices if self.vertices else kind in self.kinds

    def got(self, name: str, kind: Kind, strategy: Strategy) -> str | None:
        """``got <field> <value>`` when vertex ``name``'s ``strategy`` breaks the rule (or None)."""
        value = getattr(strategy, self.field)
        if self.covers(name, kind) and value not in self.allowed:
            return f"got {self.field} {value_word(value)}"
        return None


@dataclass(frozen=True)
class WholeCluster(Rule):
    """Vertices ``vertices`` run on the whole cluster: with several pools, the whole of a pool.

    A block lies inside one pool, so on a cluster of several pools no block
    spans the cluster; the framework's role takes every GPU it can address
    as one group of one node shape, which is one pool.
    """

    vertices: tuple[str, ...] = ()

    def got(self, name: str, block: Block, sizes: PoolSizes | int) -> str | None:
        """``got <block>`` when ``block`` of vertex ``name`` breaks the rule, else None."""
        if name in self.vertices and block.size != pool_sizes(sizes).gpus[block.pool]:
            return f"got {block.label()}"
        return None


@dataclass(frozen=True)
class NotSliced(Rule):
    """Vertices ``vertices`` take no sliced block (part of each of several nodes)."""

    vertices: tuple[str, ...] = ()

    def got(self, name: str, block: Block, sizes: PoolSizes | int) -> str | None:
        """``got <block> (sliced)`` when ``block`` of vertex ``name`` breaks the rule, else None."""
        if name in self.vertices and block.sliced:
            return f"got {block.label()} (sliced)"
        return None


@dataclass(frozen=True)
class StalenessValues(Rule):
    """Every trained model's staleness lies in ``allowed``."""

    allowed: frozenset[int] = frozenset({0})


@dataclass(frozen=True)
class SameBlock(Rule):
    """``follower`` runs on ``leader``'s block."""

    leader: str = ""
    follower: str = ""


@dataclass(frozen=True)
class SameLayout(SameBlock):
    """``follower`` runs on ``leader``'s block with ``leader``'s :data:`LAYOUT_FIELDS`."""


@dataclass(frozen=True)
class SameOrDisjoint(Rule):
    """Any two of ``vertices`` run on one block or on blocks sharing no GPU."""

    vertices: tuple[str, ...] = ()


@dataclass(frozen=True)
class NestedOrDisjoint(Rule):
    """Any two of ``vertices`` run on nested blocks (one holds the other) or share no GPU."""

    vertices: tuple[str, ...] = ()


def overlap_in_part(first: Block, second: Block) -> bool:
    """Whether two blocks share a GPU while neither holds the other."""
    return first.intersects(second) and not (first.contains(second) or second.contains(first))


@dataclass(frozen=True)
class DisjointWhenStale(Rule):
    """``first`` and ``second`` share no GPU when ``model``'s staleness is 1 or more."""

    model: str = "actor"
    first: str = ""
    second: str = ""


@dataclass(frozen=True)
class FieldWhenShared(Rule):
    """``vertex`` takes ``field`` in ``allowed`` when its block shares a GPU with ``other``'s."""

    vertex: str = ""
    other: str = ""
    field: str = ""
    allowed: frozenset[Any] = frozenset()


@dataclass(frozen=True)
class SameNodeWidth(Rule):
    """Any two of ``vertices`` run on pools of equal GPUs per node."""

    vertices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Framework:
    """One framework's plan space: its name, display name and rules.

    Attributes
    ----------
    name
        As ``engine.framework`` and ``--framework`` take it (``nemo-rl``).
    display
        As exports and reports write it (``NeMo RL``).
    release
        The release the rules are read from (``v0.4.0``).
    rules
        The rules, in the order they are checked.
    """

    name: str
    display: str
    release: str
    rules: tuple[Rule, ...]
    #: ``of_kind``'s answers, per kind (not hashed: hashing the rules costs more than the scan).
    _kinds: dict[type[Rule], tuple[Any, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def of_kind(self, kind: type[Rule]) -> tuple[Any, ...]:
        """The rules that are instances of ``kind`` (cached: the directory asks per strategy)."""
        found = self._kinds.get(kind)
        if found is None:
            found = self._kinds[kind] = tuple(rule for rule in self.rules if isinstance(rule, kind))
        return found

    def unsupported(self, instance: Instance) -> Unsupported | None:
        """The first :class:`Unsupported` rule ``instance`` breaks (None: none)."""
        for rule in self.of_kind(Unsupported):
            if rule.applies(instance):
                return rule
        return None

    def strategy_problem(self, name: str, kind: Kind, strategy: Strategy) -> str | None:
        """Why ``strategy`` of vertex ``name`` breaks a :class:`FieldValues` rule (None: none)."""
        for rule in self.of_kind(FieldValues):
            got = rule.got(name, kind, strategy)
            if got is not None:
                return f"{self.display} {rule.line()}; {got}"
        return None

    def block_problem(self, name: str, block: Block, sizes: PoolSizes | int) -> str | None:
        """Why ``block`` breaks a :class:`WholeCluster` or :class:`NotSliced` rule of ``name``."""
        for rule in self.of_kind(WholeCluster) + self.of_kind(NotSliced):
            got = rule.got(name, block, sizes)
            if got is not None:
                return f"{self.display} {rule.line()}; {got}"
        return None

    def fixed_values(self, name: str, kind: Kind, field: str) -> tuple[Any, ...] | None:
        """The values a ``fixed`` :class:`FieldValues` rule sets ``field`` of vertex ``name`` to."""
        for rule in self.of_kind(FieldValues):
            if rule.fixed and rule.field == field and rule.covers(name, kind):
                return tuple(sorted(rule.allowed, key=value_word))
        return None

    def layout_vertices(self) -> frozenset[str]:
        """Vertices whose layout a rule compares (their dominance keeps layouts apart)."""
        names: set[str] = set()
        for rule in self.of_kind(SameLayout):
            names |= {rule.leader, rule.follower}
        return frozenset(names)

    def compared_fields(self, name: str) -> tuple[str, ...]:
        """Strategy fields of vertex ``name`` a cross-vertex rule reads (kept by dominance)."""
        return tuple(
            sorted({rule.field for rule in self.of_kind(FieldWhenShared) if rule.vertex == name})
        )


def plan_problems(
    framework: Framework, template: Template, plan: Plan, gpus: PoolSizes | int
) -> list[str]:
    """Every rule of ``framework`` that ``plan`` breaks, one line each (empty: none).

    Parameters
    ----------
    framework
        The framework.
    template
        The plan's template (names its vertices).
    plan
        The plan.
    gpus
        Each pool's GPUs and node width (for :class:`WholeCluster` and
        :class:`SameNodeWidth`), or the GPUs of a one-pool cluster.
    """
    return [line for _, line in plan_breaks(framework, template, plan, gpus)]


def plan_breaks(
    framework: Framework, template: Template, plan: Plan, gpus: PoolSizes | int
) -> list[tuple[Rule, str]]:
    """Every (rule, line) of :func:`plan_problems`: the rules ``plan`` breaks, with words."""
    sizes = pool_sizes(gpus)
    names = template.names
    placed = {name: plan.placements[i] for i, name in enumerate(names)}
    staleness = plan.staleness_map
    found: list[tuple[Rule, str]] = []
    prefix = framework.display
    for rule in framework.rules:
        if isinstance(rule, FieldValues | WholeCluster | NotSliced):
            for i, name in enumerate(names):
                if isinstance(rule, FieldValues):
                    got = rule.got(name, template.vertices[i].kind, placed[name].strategy)
                else:
                    got = rule.got(name, placed[name].block, sizes)
                if got is not None:
                    found.append((rule, f"{name}: {prefix} {rule.line()}; {got}"))
        else:
            broken = _pair_problem(rule, placed, staleness, sizes)
            if broken is not None:
                found.append((rule, f"{broken}: {prefix} {rule.line()}"))
    return found


def _pair_problem(
    rule: Rule, placed: dict, staleness: dict[str, int], sizes: PoolSizes
) -> str | None:
    """The vertices a cross-vertex ``rule`` finds broken in a plan (None: holds or n/a)."""
    if isinstance(rule, SameNodeWidth):
        return _width_problem(rule, placed, sizes)
    if isinstance(rule, StalenessValues):
        off = [f"staleness.{m} {s}" for m, s in sorted(staleness.items()) if s not in rule.allowed]
        return ", ".join(off) or None
    if isinstance(rule, SameBlock):
        leader, follower = placed.get(rule.leader), placed.get(rule.follower)
        if leader is None or follower is None:
            return None
        same = leader.block == follower.block
        if isinstance(rule, SameLayout):
            same = same and layout_of(leader.strategy) == layout_of(follower.strategy)
        return None if same else f"{rule.follower} vs {rule.leader}"
    if isinstance(rule, SameOrDisjoint):
        present = [n for n in rule.vertices if n in placed]
        for i, first in enumerate(present):
            for second in present[i + 1 :]:
                a, b = placed[first].block, placed[second].block
                if a != b and a.intersects(b):
                    return f"{first} and {second}"
        return None
    if isinstance(rule, NestedOrDisjoint):
        present = [n for n in rule.vertices if n in placed]
        for i, first in enumerate(present):
            for second in present[i + 1 :]:
                if overlap_in_part(placed[first].block, placed[second].block):
                    return f"{first} and {second}"
        return None
    if isinstance(rule, DisjointWhenStale):
        a, b = placed.get(rule.first), placed.get(rule.second)
        if a is None or b is None or staleness.get(rule.model, 0) < 1:
            return None
        return f"{rule.first} and {rule.second}" if a.block.intersects(b.block) else None
    if isinstance(rule, FieldWhenShared):
        a, b = placed.get(rule.vertex), placed.get(rule.other)
        if a is None or b is None or not a.block.intersects(b.block):
            return None
        if getattr(a.strategy, rule.field) in rule.allowed:
            return None
        return f"{rule.vertex} beside {rule.other}"
    return None


def _width_problem(rule: SameNodeWidth, placed: dict, sizes: PoolSizes) -> str | None:
    """``a on 2 GPUs per node and b on 1`` for the first two vertices on pools of two widths."""
    present = [n for n in rule.vertices if n in placed]
    for i, first in enumerate(present):
        for second in present[i + 1 :]:
            a = sizes.widths[placed[first].block.pool]
            b = sizes.widths[placed[second].block.pool]
            if a != b:
                return f"{first} on {a} GPUs per node and {second} on {b}"
    return None


def allowed_words(rule: FieldValues) -> str:
    """The allowed values of a field rule in plan-file words (``false``, ``zero1``)."""
    return ", ".join(sorted(value_word(value) for value in rule.allowed))
