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
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rlplan.formulation.model import Formulation
from rlplan.rpeg.schema.hardware import LEVELS


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
    """``run_start[after] >= run_end[before] + lag`` whenever every condition holds.

    ``lag`` is in time units (rounded down, so the row is valid); a row with
    no conditions always holds.
    """

    before: int
    after: int
    lag: int
    conditions: tuple[Condition, ...] = ()


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

    @property
    def models(self) -> tuple[str, ...]:
        """Models with a vertex covering the unit, in first-seen order."""
        return tuple(dict.fromkeys(terms.model for terms in self.vertices))


def chain_rows(f: Formulation) -> Iterator[LagRow]:
    """The runs of one vertex go step after step."""
    for step in range(1, f.k_eval):
        for vertex in range(f.num_vertices):
            yield LagRow(f.run(vertex, step - 1), f.run(vertex, step), 0)


def data_rows(f: Formulation) -> Iterator[LagRow]:
    """Data edges of every step: the plain precedence, then one lag row per
    (destination block, level) where the source may sit elsewhere at that level.

    The data-transfer lag depends only on the level the two blocks span, so
    a row is switched on by the destination's block and the source being on
    another block spanning that level with it. An edge's fixed delay (a rule
    reward's stage, :meth:`Formulation.data_delay`) is in every one of its
    rows: the plain one is ``start >= end + delay``, a lag row adds it to
    the transfer.
    """
    delays = [f.data_delay(index) for index in range(len(f.data_edges))]
    plain = [f.to_units(delay) for delay in delays]
    data_lags = [{level: f.data_lag_at(level, delay) for level in LEVELS} for delay in delays]
    for step in range(f.k_eval):
        for index, (src, dst) in enumerate(f.data_edges):
            before, after = f.run(src, step), f.run(dst, step)
            yield LagRow(before, after, plain[index])
            for target in f.blocks_of(dst):
                for level, lag in data_lags[index].items():
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
    for src, dst, model, key in f.pub_edges:
        for sigma in f.staleness_options(key):
            chosen: tuple[Condition, ...] = () if key is None else (StalenessIs(key, sigma),)
            for step in range(f.k_eval):
                source_step = f.pub_source_step(step, sigma)
                if source_step < 0:
                    continue
                before, after = f.run(src, source_step), f.run(dst, step)
                yield LagRow(before, after, 0, chosen)
                for index, target in enumerate(f.assignments[dst]):
                    block = f.block_index[target.block]
                    user = Chooses(dst, (index,))
                    for level in LEVELS:
                        blocks = f.elsewhere_blocks(src, block, level)
                        lag = f.pub_lag_at(model, level, target)
                        if blocks and lag > 0:
                            yield LagRow(before, after, lag, (*chosen, user, OnBlocks(src, blocks)))
                    others = f.other_layout_assignments(src, block, target.layout)
                    lag = f.reshard_lag(model, target)
                    if others and lag > 0:
                        yield LagRow(before, after, lag, (*chosen, user, Chooses(src, others)))


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
            yield MemoryRow(unit, tuple(vertices))


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
