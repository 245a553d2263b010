"""The constraint rows both exact backends write, each in its own API.

The rows are backend-neutral: a precedence row says which run waits for which,
by how many time units, and under which conditions; a memory row says which
assignments' bytes add up on a GPU unit. :mod:`rlplan.solvers.cpsat` writes a
condition as a literal (an enforcement literal of the row), :mod:`rlplan.solvers.milp`
as a 0/1 expression (the row switched off by a big-M or by scaling the lag),
so the two models encode the same inequalities from the same coefficients.

Conditions
----------
:class:`OnBlocks`
    a vertex sits on one of the given blocks;
:class:`Chooses`
    a vertex takes one of the given assignments;
:class:`StalenessIs`
    a trained model's staleness takes the given value.

Colocation (docs/formulation.md#colocation) adds a 0/1 ``colocated[g]`` per
rollout engine g, forced to 1 by :func:`colocation_rows`; the engine's
duration gains ``colocation[g]`` >= the wake and sleep of its assignment
(:func:`switch_terms`); :func:`refit_rows` holds the refit lags of engines
on their trainer's block, :func:`host_memory_rows` each node's host memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rlplan.formulation.model import Formulation


@dataclass(frozen=True)
class OnBlocks:
    """Condition: ``vertex`` sits on one of ``blocks`` (block indices)."""

    vertex: int
    blocks: tuple[int, ...]


@dataclass(frozen=True)
class Chooses:
    """Condition: ``vertex`` takes one of the assignments ``indices``."""

    vertex: int
    indices: tuple[int, ...]


@dataclass(frozen=True)
class StalenessIs:
    """Condition: trained model ``model`` runs with staleness ``value``."""

    model: str
    value: int


Condition = OnBlocks | Chooses | StalenessIs


@dataclass(frozen=True)
class LagRow:
    """``run_start[after] + periods * T >= run_end[before] + lag`` whenever every condition holds.

    ``lag`` is in time units (rounded down, so the row is valid); a row with
    no conditions always holds. ``periods`` is 0 but in a steady-state
    formulation (:attr:`Formulation.steady`), whose runs are one period's and
    T its period: a pub edge then spans 1 + σ periods, a chain one.
    """

    before: int
    after: int
    lag: int
    conditions: tuple[Condition, ...] = ()
    periods: int = 0


@dataclass(frozen=True)
class TurnRow:
    """Two vertices whose blocks may share a GPU take it in turn, modulo the period T.

    Steady-state formulations only (docs/simulator.md, "The steady-state
    period"): when one of the ``shares`` pairs of conditions holds, one
    offset q of ``offsets`` is chosen and ``start[second] + q*T >=
    end[first]``, ``start[first] + (1 - q)*T >= end[second]``.
    """

    first: int
    second: int
    shares: tuple[tuple[Condition, Condition], ...]
    offsets: tuple[int, ...]


@dataclass(frozen=True)
class MemoryTerms:
    """One vertex's assignments covering a GPU unit, with their bytes per GPU (rounded up).

    ``resident`` and ``transient`` are ``(index, bytes)`` pairs over the same
    assignments; at most one of them is chosen.
    """

    vertex: int
    model: str
    resident: tuple[tuple[int, int], ...]
    transient: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class MemoryRow:
    """One GPU unit's memory: Σ over models of the largest resident + the largest transient.

    A model's resident term is the largest over its vertices covering the unit
    (``resident[model, unit] >= Σ bytes x choose`` per vertex), the transient
    term the largest over all covering vertices.
    """

    unit: tuple[int, int]
    vertices: tuple[MemoryTerms, ...]
    #: Usable memory per GPU of the unit's pool, bytes rounded down.
    capacity: int = 0

    @property
    def models(self) -> tuple[str, ...]:
        """Models with a vertex covering the unit, in first-seen order."""
        return tuple(dict.fromkeys(terms.model for terms in self.vertices))


@dataclass(frozen=True)
class ColocatedRow:
    """``colocated[engine] = 1`` whenever every condition holds.

    The conditions put the engine on a block and another vertex on a block
    sharing a GPU with it. Nothing forces ``colocated`` to 0: it only adds
    time and host memory, so a solution keeps it at 0 where it may.
    """

    engine: int
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class SwitchTerms:
    """``colocation[engine] >= units`` whenever the engine takes ``index`` and is colocated.

    ``terms`` holds the ``(index, units)`` pairs with positive units
    (:attr:`rlplan.formulation.model.Assignment.switch`).
    """

    engine: int
    terms: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class HostTerms:
    """One vertex's host bytes on a node, ``(index, bytes)`` per assignment holding some.

    An ``engine``'s bytes (a sleeping rollout's weights) count only when it is
    colocated and add apart from its model's.
    """

    vertex: int
    model: str
    engine: bool
    terms: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class HostRow:
    """One node: Σ over models of the largest host bytes + the engines' ≤ host capacity."""

    node: int
    vertices: tuple[HostTerms, ...]
    #: Host memory of the node (its pool's ``host_memory_per_node``), bytes rounded down.
    capacity: int = 0

    @property
    def models(self) -> tuple[str, ...]:
        """Models with a (non-engine) vertex holding host bytes on the node, first seen first."""
        return tuple(dict.fromkeys(t.model for t in self.vertices if not t.engine))


def turn_offsets(staleness_choices: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """The turn offsets q a steady-state model and the oracle try: -Q..Q + 1, Q = 2 + max σ.

    One step's runs lie within 1 + σ periods of one another (each pub edge
    closes the step's path within that many), so a pair of runs sharing a
    GPU is never further apart (rlplan/solvers/steady_orders.py).
    """
    reach = 2 + max((max(values) for values in staleness_choices.values()), default=0)
    return tuple(range(-reach, reach + 2))


def turn_rows(f: Formulation) -> Iterator[TurnRow]:
    """Per pair of vertices that may share a GPU, its blocks that do and the offsets."""
    offsets = turn_offsets(f.staleness_choices)
    for first in range(f.num_vertices):
        for second in range(first + 1, f.num_vertices):
            shares = tuple(
                (OnBlocks(first, (block,)), OnBlocks(second, overlapping))
                for block in f.blocks_of(first)
                if (overlapping := f.overlapping_blocks(second, block))
            )
            if shares:
                yield TurnRow(first, second, shares, offsets)


def chain_rows(f: Formulation) -> Iterator[LagRow]:
    """The runs of one vertex go step after step (steady state: a run lasts at most T)."""
    if f.steady:
        for vertex in range(f.num_vertices):
            yield LagRow(f.run(vertex, 0), f.run(vertex, 0), 0, (), 1)
        return
    for step in range(1, f.k_eval):
        for vertex in range(f.num_vertices):
            yield LagRow(f.run(vertex, step - 1), f.run(vertex, step), 0)


def data_rows(f: Formulation) -> Iterator[LagRow]:
    """Data edges of every step: the plain precedence, then one lag row per
    (destination block, level) where the source may sit elsewhere at that level.

    The data-transfer lag depends only on the level the two blocks span (and
    on the destination's pool, whose links those inside it are), so a row is
    switched on by the destination's block and the source being on another
    block spanning that level with it (level ``x``: a block of another pool).
    An edge's fixed delay (a rule reward's stage, :meth:`Formulation.data_delay`)
    is in every one of its rows: the plain one is ``start >= end + delay``, a
    lag row adds it to the transfer.
    """
    delays = [f.data_delay(index) for index in range(len(f.data_edges))]
    plain = [f.to_units(delay) for delay in delays]
    pools = range(len(f.memory_capacities))
    data_lags = [
        [{level: f.data_lag_at(level, delay, pool) for level in f.levels} for pool in pools]
        for delay in delays
    ]
    for step in range(f.k_eval):
        for index, (src, dst) in enumerate(f.data_edges):
            before, after = f.run(src, step), f.run(dst, step)
            yield LagRow(before, after, plain[index])
            for target in f.blocks_of(dst):
                for level, lag in data_lags[index][f.blocks[target].pool].items():
                    if lag <= plain[index]:
                        continue
                    blocks = f.elsewhere_blocks(src, target, level)
                    if blocks:
                        yield LagRow(
                            before, after, lag, (OnBlocks(dst, (target,)), OnBlocks(src, blocks))
                        )


def pub_rows(f: Formulation) -> Iterator[LagRow]:
    """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

    Per staleness value σ: the plain precedence (switched on by σ; always on
    for a synchronous edge, whose σ is 0), then per destination assignment the
    weight-transfer lag from a source block at each level, and the reshard lag
    when the source sits on the user's block in another weight layout.
    """
    for src, dst, model, chosen, before, after, periods in pub_run_pairs(f):
        yield LagRow(before, after, 0, chosen, periods)
        for index, target in enumerate(f.assignments[dst]):
            block = f.block_index[target.block]
            user = Chooses(dst, (index,))
            for level in f.levels:
                blocks = f.elsewhere_blocks(src, block, level)
                lag = f.pub_lag_at(model, level, target)
                if blocks and lag > 0:
                    yield LagRow(
                        before, after, lag, (*chosen, user, OnBlocks(src, blocks)), periods
                    )
            if dst in f.engines:
                continue  # a refit on the engine's own block: refit_rows
            others = f.other_layout_assignments(src, block, target.layout)
            lag = f.reshard_lag(model, target)
            if others and lag > 0:
                yield LagRow(before, after, lag, (*chosen, user, Chooses(src, others)), periods)


def pub_run_pairs(
    f: Formulation, engines_only: bool = False
) -> Iterator[tuple[int, int, str, tuple[Condition, ...], int, int, int]]:
    """Each pub edge's (source, user, model, staleness condition, source run, user run, periods).

    One entry per staleness value σ and step whose source step t-1-σ exists
    (periods 0); in a steady-state formulation one per σ between the runs of
    one period, 1 + σ periods apart. With ``engines_only`` only the edges
    into a rollout engine.
    """
    for src, dst, model, key in f.pub_edges:
        if engines_only and dst not in f.engines:
            continue
        for sigma in f.staleness_options(key):
            chosen: tuple[Condition, ...] = () if key is None else (StalenessIs(key, sigma),)
            if f.steady:
                yield src, dst, model, chosen, f.run(src, 0), f.run(dst, 0), 1 + sigma
                continue
            for step in range(f.k_eval):
                source_step = f.pub_source_step(step, sigma)
                if source_step >= 0:
                    yield src, dst, model, chosen, f.run(src, source_step), f.run(dst, step), 0


def refit_rows(f: Formulation) -> Iterator[LagRow]:
    """Refits of a rollout engine from its trainer on the engine's own block.

    Per pub edge into an engine, staleness value and step, per engine
    assignment: the CUDA IPC copy when the trainer sits on the same block in
    the engine's layout, and the reshard plus the copy when it sits there in
    another layout. Refits from another block are pub lag rows.
    """
    for src, dst, model, chosen, before, after, periods in pub_run_pairs(f, engines_only=True):
        for index, target in enumerate(f.assignments[dst]):
            block = f.block_index[target.block]
            user = Chooses(dst, (index,))
            others = f.other_layout_assignments(src, block, target.layout)
            same = tuple(i for i in f.assignments_on(src, block) if i not in others)
            lag = f.refit_lag(model, target, True)
            if same and lag > 0:
                yield LagRow(before, after, lag, (*chosen, user, Chooses(src, same)), periods)
            lag = f.refit_lag(model, target, False)
            if others and lag > 0:
                yield LagRow(before, after, lag, (*chosen, user, Chooses(src, others)), periods)


def colocation_rows(f: Formulation) -> Iterator[ColocatedRow]:
    """Per engine, engine block and other vertex: the engine is colocated when the
    vertex sits on a block sharing a GPU with the engine's."""
    for engine in f.engines:
        for block in f.blocks_of(engine):
            for vertex in range(f.num_vertices):
                if vertex == engine:
                    continue
                overlapping = f.overlapping_blocks(vertex, block)
                if overlapping:
                    yield ColocatedRow(
                        engine, (OnBlocks(engine, (block,)), OnBlocks(vertex, overlapping))
                    )


def switch_terms(f: Formulation) -> list[SwitchTerms]:
    """Per engine, the wake and sleep units of each assignment that has some."""
    return [
        SwitchTerms(
            engine,
            tuple((i, a.switch) for i, a in enumerate(f.assignments[engine]) if a.switch > 0),
        )
        for engine in f.engines
    ]


def host_memory_rows(f: Formulation) -> Iterator[HostRow]:
    """One row per node where some plan may hold more host bytes than the node has.

    A node whose largest possible load (Σ over models of their vertices'
    largest terms, plus every engine's largest term) fits is left out, and
    so is a node whose terms equal another's (the row would be the same).
    """
    cluster = f.problem.directory.cluster
    template = f.problem.directory.template
    per_node: dict[int, list[HostTerms]] = {}
    for vertex, items in enumerate(f.assignments):
        on_node: dict[int, list[tuple[int, int]]] = {}
        for index, a in enumerate(items):
            if a.host <= 0:
                continue
            for node in cluster.nodes_of(a.block):
                held = a.host * cluster.gpus_on_node(a.block, node)
                on_node.setdefault(node, []).append((index, held))
        model = template.vertices[vertex].model
        for node, terms in on_node.items():
            per_node.setdefault(node, []).append(
                HostTerms(vertex, model, vertex in f.engines, tuple(terms))
            )
    seen = set()
    for node in sorted(per_node):
        vertices = tuple(per_node[node])
        largest: dict[str, int] = {}
        engines = 0
        for terms in vertices:
            top = max(size for _, size in terms.terms)
            if terms.engine:
                engines += top
            else:
                largest[terms.model] = max(largest.get(terms.model, 0), top)
        signature = tuple((t.vertex, t.terms) for t in vertices)
        capacity = f.node_capacities[node]
        if sum(largest.values()) + engines <= capacity or (signature, capacity) in seen:
            continue
        seen.add((signature, capacity))
        yield HostRow(node, vertices, capacity)


def memory_rows(f: Formulation) -> Iterator[MemoryRow]:
    """One row per maximal GPU unit (the others' rows are implied)."""
    template = f.problem.directory.template
    for unit in f.maximal_units():
        vertices = []
        for vertex in range(f.num_vertices):
            indices = f.covering(vertex, unit)
            if not indices:
                continue
            items = f.assignments[vertex]
            vertices.append(
                MemoryTerms(
                    vertex,
                    template.vertices[vertex].model,
                    tuple((i, items[i].resident) for i in indices),
                    tuple((i, items[i].transient) for i in indices),
                )
            )
        if vertices:
            yield MemoryRow(unit, tuple(vertices), f.capacity_of(unit))


def area_terms(f: Formulation) -> list[tuple[int, int, int]]:
    """``(vertex, index, GPU x time units)`` of every assignment over ``k_eval`` steps.

    The valid inequality ``num_gpus x makespan >= Σ coefficient x choose``:
    all runs' GPU-time fits in the cluster's.
    """
    return [
        (vertex, index, f.k_eval * a.block.size * a.duration)
        for vertex, items in enumerate(f.assignments)
        for index, a in enumerate(items)
    ]
