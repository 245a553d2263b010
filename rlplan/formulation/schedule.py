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
    lags: dict[tuple[int, int], int] = {}
    for family in (rows.chain_rows, rows.data_rows, rows.pub_rows, rows.refit_rows):
        for row in family(f):
            if all(_holds(f, condition, chosen, staleness) for condition in row.conditions):
                key = (row.before, row.after)
                if row.lag > lags.get(key, -1):
                    lags[key] = row.lag
    return lags


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
