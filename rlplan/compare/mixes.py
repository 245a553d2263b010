"""Pool mixes of ``pareto``: whole nodes of GPU types that fill a budget.

A *mix* gives each GPU type of a non-empty combination a number of whole
nodes. Each node of type ``t`` has a width ``G_t`` (GPUs) and a cost
``c_t``: its hourly price ``G_t x price_t`` with ``--budget-per-hour``, its
GPU count ``G_t`` with ``--total-gpus`` (a budget of GPUs, each costing 1). A
mix is kept when

* it fits: ``sum_t n_t c_t <= B`` (B the budget or the GPU total);
* it is maximal: no type of the mix could grow to its next node count and
  still fit. Types outside the mix do not count: the mix of only the dearer
  type is kept even when a node of a cheaper type would still fit beside it
  (that is another mix, of both).

A type's node count must shape into its racks (:func:`rlplan.compare.shapes.
cluster_shape`): any count up to the rack width ``W``, then whole racks
(``2W``, ``3W``, ...). "Next node count" is the next such count, so with
``W = 2`` a type at 2 nodes grows to 4, not 3.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

from rlplan.rpeg.errors import InputError

#: Relative slack of the budget comparison (float noise of summed prices only).
_SLACK = 1e-9
#: Mixes counted before the count gives up (the message then says "more than").
COUNT_CAP = 1_000_000


@dataclass(frozen=True)
class NodeKind:
    """One GPU type as the enumeration sees it.

    Attributes
    ----------
    name
        The type's name.
    node_gpus
        GPUs per node ``G_t``.
    node_cost
        What one node takes from the budget ``c_t`` (currency per hour, or GPUs).
    rack_width
        Nodes per rack ``W`` of its shapes; None: any count is one rack.
    """

    name: str
    node_gpus: int
    node_cost: float
    rack_width: int | None

    def next_count(self, nodes: int) -> int:
        """The next node count that shapes into racks after ``nodes``."""
        if self.rack_width is None or nodes + 1 <= self.rack_width:
            return nodes + 1
        return (nodes // self.rack_width + 1) * self.rack_width

    def most_nodes(self, room: float) -> int:
        """The largest node count that shapes into racks and costs at most ``room`` (0: none)."""
        nodes = int(room // self.node_cost) if room > 0 else 0
        if self.rack_width is None or nodes <= self.rack_width:
            return nodes
        return nodes // self.rack_width * self.rack_width


@dataclass(frozen=True)
class Mix:
    """Whole nodes of one or more GPU types.

    Attributes
    ----------
    parts
        ``(type index, node count)`` per type of the mix, by type index.
    """

    parts: tuple[tuple[int, int], ...]

    def key(self, kinds: Sequence[NodeKind]) -> str:
        """``h100:16+h20:16``: each type's name and GPUs, in the types' order."""
        return "+".join(f"{kinds[t].name}:{n * kinds[t].node_gpus}" for t, n in self.parts)

    def gpus(self, kinds: Sequence[NodeKind]) -> int:
        """GPUs of the mix."""
        return sum(n * kinds[t].node_gpus for t, n in self.parts)


def _fits(total: float, budget: float) -> bool:
    return total <= budget * (1 + _SLACK)


def _subset_mixes(kinds: Sequence[NodeKind], subset: tuple[int, ...], budget: float) -> Iterator:
    """Maximal node counts of the types of ``subset`` (each at least one node)."""

    last = len(subset) - 1

    def walk(index: int, spent: float, counts: tuple[int, ...], step: float) -> Iterator:
        kind = kinds[subset[index]]
        if index == last:
            # Only the largest count that fits can be maximal (a smaller one
            # leaves room for its own next count), and its next count does not
            # fit by construction: the other types' growth decides.
            nodes = kind.most_nodes(budget * (1 + _SLACK) - spent)
            if nodes and not _fits(spent + nodes * kind.node_cost + step, budget):
                yield (*counts, nodes)
            return
        nodes = 1
        while _fits(spent + nodes * kind.node_cost, budget):
            grow = (kind.next_count(nodes) - nodes) * kind.node_cost
            yield from walk(
                index + 1, spent + nodes * kind.node_cost, (*counts, nodes), min(step, grow)
            )
            nodes = kind.next_count(nodes)

    yield from walk(0, 0.0, (), float("inf"))


def count_mixes(kinds: Sequence[NodeKind], budget: float, cap: int = COUNT_CAP) -> int:
    """How many mixes :func:`enumerate_mixes` gives, counting no further than ``cap + 1``."""
    found = 0
    for size in range(1, len(kinds) + 1):
        for subset in combinations(range(len(kinds)), size):
            for _ in _subset_mixes(kinds, subset, budget):
                found += 1
                if found > cap:
                    return found
    return found


def enumerate_mixes(kinds: Sequence[NodeKind], budget: float, limit: int, option: str) -> list[Mix]:
    """Every maximal mix within ``budget``: one type first, then two, ... (see the module).

    Within a combination of types, mixes come by node counts, the first type's
    fewest first.

    Parameters
    ----------
    kinds
        The GPU types, in the ``--gpu-types`` file's order.
    budget
        ``B``, in the unit of the node costs.
    limit
        The most mixes allowed.
    option
        The option that set the budget, named by errors.

    Raises
    ------
    InputError
        Naming ``option``: when a type's single node exceeds the budget, or
        when the mixes are more than ``limit`` (with their count).
    """
    for kind in kinds:
        if not _fits(kind.node_cost, budget):
            raise InputError(
                option,
                f"one node of {kind.name} ({kind.node_gpus} GPUs, {kind.node_cost:g}) does not "
                f"fit the budget of {budget:g}",
            )
    count = count_mixes(kinds, budget)
    if count > limit:
        shown = f"more than {COUNT_CAP:,}" if count > COUNT_CAP else f"{count:,}"
        raise InputError(
            option,
            f"{shown} pool mixes are more than the limit of {limit} (--max-mixes); lower the "
            "budget, give fewer GPU types or raise --max-mixes",
        )
    mixes = []
    for size in range(1, len(kinds) + 1):
        for subset in combinations(range(len(kinds)), size):
            for counts in _subset_mixes(kinds, subset, budget):
                mixes.append(Mix(tuple(zip(subset, counts, strict=True))))
    return mixes
