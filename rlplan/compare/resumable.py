"""Points of ``pareto`` solved against a resumable ``pareto.csv``.

Both forms of ``pareto`` (GPU count x GPU type, :mod:`rlplan.compare.pareto`;
pool mixes at a budget, :mod:`rlplan.compare.pareto_mix`) keep one row per
point in a :class:`~rlplan.compare.csvlog.CsvLog`. A rerun reuses a stored
row whose fingerprint matches the point's shaped instance and whose status is
settled or was reached with at least the time limit asked now; every other
point is solved on the ``compare`` executors and appended as it finishes. An
interrupt keeps what finished.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from rlplan.compare.csvlog import CsvLog
from rlplan.compare.variants import RunSettings, run_variants

#: Statuses that no longer time limit changes: reused on resume whatever the limit.
SETTLED = ("OPTIMAL", "INFEASIBLE")


def reusable(row: dict[str, Any], fingerprint: str, time_limit: float) -> bool:
    """Whether a stored (parsed) row stands for the point of ``fingerprint`` at ``time_limit``."""
    if row["fingerprint"] != fingerprint or row["status"] in ("ERROR", ""):
        return False
    if row["status"] in SETTLED:
        return True
    return (row.get("time_limit_s") or 0.0) >= time_limit


def solve_resumable(
    points: Sequence[Any],
    log: CsvLog,
    run: RunSettings,
    identity: Callable[[Any], Hashable],
    row_identity: Callable[[dict[str, Any]], Hashable],
    parse: Callable[[dict[str, str]], dict[str, Any]],
    build_row: Callable[[Any, dict], dict[str, Any]],
    line: Callable[[dict[str, Any]], str],
) -> tuple[list[dict[str, Any]], bool]:
    """Reuse what ``log`` holds, solve the rest, append each as it finishes.

    Parameters
    ----------
    points
        Every point asked for, in output order; each has ``key`` (its
        variant's key), ``variant`` and ``fingerprint``.
    log
        The open ``pareto.csv``.
    run
        Time limit, executor, workers.
    identity, row_identity
        A point's identity, and a stored row's (they must agree).
    parse
        A text row parsed (numbers, booleans).
    build_row
        A point's row from its solve record.
    line
        The terminal line of a finished point.

    Returns
    -------
    tuple[list[dict[str, Any]], bool]
        The parsed rows of the points asked for that have one, in the order of
        ``points``, and whether the run was interrupted.
    """
    stored = {row_identity(row): row for row in (parse(r) for r in log.rows())}
    wanted = {identity(p) for p in points}
    kept = {
        identity(p): stored[identity(p)]
        for p in points
        if identity(p) in stored and reusable(stored[identity(p)], p.fingerprint, run.time_limit)
    }
    others = len([key for key in stored if key not in wanted])
    if len(kept) != len(stored):
        log.rewrite([kept[key] for key in stored if key in kept])
    todo = [p for p in points if identity(p) not in kept]
    by_key = {p.key: p for p in todo}
    note = f"; {others} stored point(s) not asked for now were set aside" if others else ""
    print(
        f"{len(todo)} point(s) to solve ({len(kept)} already in {log.path}{note}), "
        f"{run.time_limit:g} s each with auto"
    )
    interrupted = False
    try:
        for record in run_variants([p.variant for p in todo], run, "pareto"):
            point = by_key[record["key"]]
            row = build_row(point, record)
            log.append(row)
            kept[identity(point)] = parse(log.rows()[-1])
            print(line(row), flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(
            "interrupted: finished points are kept; rerun the same command to resume",
            file=sys.stderr,
        )
    return [kept[identity(p)] for p in points if identity(p) in kept], interrupted
