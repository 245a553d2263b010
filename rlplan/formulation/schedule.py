"""The formulation's own value of a decoded plan: its earliest schedule in the decoded order.

An exact backend's objective is the makespan of *its* schedule, which need not
be the earliest one: a feasible (not yet optimal) solution may leave idle
time before some runs, and the simulator, which starts every run as early as
the plan's order allows, then finds a shorter makespan for the same plan.
The earliest schedule of the decoded plan under the formulation's own rows
(durations, lags, GPU exclusivity in the decoded order) removes that idle
time; it is the model value the time-unit rounding tolerance compares with
the simulated makespan.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlplan.formulation import rows
from rlplan.formulation.model import Formulation
from rlplan.rpeg.evaluation.period import CycleEdge, cycle_offsets, max_cycle_ratio


def _holds(
    f: Formulation, condition: rows.Condition, chosen: Sequence[int], staleness: dict[str, int]
) -> bool:
    """Whether a row condition holds for the chosen assignments and staleness."""
    if isinstance(condition, rows.StalenessIs):
        return staleness[condition.model] == condition.value
    if isinstance(condition, rows.OnBlocks):
        block = f.assignments[condition.vertex][chosen[condition.vertex]].block
        return f.block_index[block] in condition.blocks
    return chosen[condition.vertex] in condition.indices


def active_lags(
    f: Formulation, chosen: Sequence[int], staleness: dict[str, int]
) -> dict[tuple[int, int], int]:
    """The lag (units) of every precedence ``(before, after)`` switched on for this choice.

    The largest lag of the chain, data, pub and refit rows whose conditions
    all hold: what the formulation charges between the two runs.
    """
    return {key: lag for key, (lag, _) in _active_rows(f, chosen, staleness).items()}


def _active_rows(
    f: Formulation, chosen: Sequence[int], staleness: dict[str, int]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(largest lag, periods) of every precedence switched on (:func:`active_lags`)."""
    lags: dict[tuple[int, int], tuple[int, int]] = {}
    for family in (rows.chain_rows, rows.data_rows, rows.pub_rows, rows.refit_rows):
        for row in family(f):
            if all(_holds(f, condition, chosen, staleness) for condition in row.conditions):
                key = (row.before, row.after)
                if row.lag > lags.get(key, (-1, 0))[0]:
                    lags[key] = (row.lag, row.periods)
    return lags


def earliest_period(
    f: Formulation, chosen: Sequence[int], staleness: dict[str, int], starts: Sequence[float]
) -> float:
    """Period (units) of the decoded steady-state plan under the formulation's rows.

    The largest cycle ratio of the event graph of the switched-on rows (weight
    the source's duration plus the lag, height the periods) and of the turns
    of the decoded cyclic order (:meth:`Formulation.cyclic_order`) on the
    vertices whose blocks meet: the model's own value of the plan, which no
    feasible solution's T lies below.
    """
    durations = f.durations(chosen)
    edges = [
        CycleEdge(before, after, durations[before] + lag, periods)
        for (before, after), (lag, periods) in _active_rows(f, chosen, staleness).items()
    ]
    blocks = [f.assignments[v][a].block for v, a in enumerate(chosen)]
    cover = [
        [other for other, block in enumerate(blocks) if block.intersects(blocks[vertex])]
        for vertex in range(f.num_vertices)
    ]
    offsets = cycle_offsets(f.cyclic_order(starts), cover)
    for (first, second), q in offsets.items():
        edges.append(CycleEdge(first, second, durations[first], q))
        edges.append(CycleEdge(second, first, durations[second], 1 - q))
    return max_cycle_ratio(f.num_vertices, edges)


def earliest_ends(
    f: Formulation, chosen: Sequence[int], staleness: dict[str, int], starts: Sequence[float]
) -> list[int]:
    """End (units) of every run in the earliest schedule of the decoded plan under the rows.

    Runs are taken in the order of their ``starts`` (the order the decoded
    plan carries); each starts at the latest of its switched-on predecessors'
    ends plus their lags and the end of the runs before it whose GPU ranges
    meet its own (the model's GPU exclusivity).

    Parameters
    ----------
    f
        The formulation.
    chosen, staleness, starts
        A backend's solution: assignment index per vertex, staleness per
        trained model, start per run (units).

    Returns
    -------
    list[int]
        End of every run, by run id. Its maximum is never above the
        backend's objective when the solution satisfies its rows.
    """
    predecessors: dict[int, list[tuple[int, int]]] = {}
    for (before, after), lag in active_lags(f, chosen, staleness).items():
        predecessors.setdefault(after, []).append((before, lag))
    pieces = [f.assignments[v][a].block.pieces() for v, a in enumerate(chosen)]
    # With wake and sleep of a colocated engine: the least the rows allow.
    durations = f.durations(chosen)
    free = [0] * f.problem.directory.cluster.num_gpus
    ends = [0] * f.num_runs
    for run in f.decoded_order(starts):
        vertex = run % f.num_vertices
        begin = max(max(free[low:high]) for low, high in pieces[vertex])
        for before, lag in predecessors.get(run, ()):
            begin = max(begin, ends[before] + lag)
        ends[run] = begin + durations[vertex]
        for low, high in pieces[vertex]:
            free[low:high] = [ends[run]] * (high - low)
    return ends
