"""One benchmark cell: (instance, solver, repeat), solved in a worker."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import loads
from rlplan.solvers import get_solver
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.progress import SilentProgress, finish_history


@dataclass(frozen=True)
class Cell:
    """What to run: an instance file (and its text), a solver name, a repeat index.

    The instance travels as text so that a worker on another machine (a Ray
    cluster) needs no access to the driver's files.
    """

    instance: str
    solver: str
    repeat: int
    text: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        """Identity used to skip finished cells on resume."""
        return (instance_name(self.instance), self.solver, self.repeat)


def instance_name(path: str) -> str:
    """An instance's name: its file stem."""
    return os.path.splitext(os.path.basename(path))[0]


def run_cell(cell: Cell, time_limit: float, threads: int, seed: int) -> dict:
    """Solve one cell and return its record (runs in a worker process or Ray task).

    The record holds: status, simulated step time and makespan
    (``step_time_s``, ``makespan_s``), the proven bound on the makespan
    (``bound_makespan_s``), the gap, the wall time, the time to the first plan
    and to within 1% of the final value (from the incumbent history, which
    ends at the reported makespan), and the history itself.
    """

    started = time.perf_counter()
    record = {
        "instance": instance_name(cell.instance),
        "solver": cell.solver,
        "repeat": cell.repeat,
        "seed": seed,
    }
    try:
        name = instance_name(cell.instance)
        problem = Problem.from_instance(parse_instance(loads(cell.text, cell.instance), name))
        solve = get_solver(cell.solver)
        progress = SilentProgress()
        result = solve(
            problem,
            SolveOptions(time_limit=time_limit, threads=threads, seed=seed, progress=progress),
        )
    except InputError as exc:
        record.update(
            status="ERROR", message=str(exc), wall_time_s=time.perf_counter() - started, history=[]
        )
        return record
    wall = time.perf_counter() - started
    history = finish_history(progress.history, result.makespan, wall)
    first = history[0][0] if history else None
    within = None
    if result.makespan is not None:
        within = next(t for t, best in history if best <= result.makespan * 1.01)
    k = problem.instance.k_eval
    record.update(
        status=result.status.value,
        k_eval=k,
        step_time_s=result.step_time,
        makespan_s=result.makespan,
        bound_makespan_s=result.bound,
        gap=result.gap,
        wall_time_s=wall,
        time_to_first_plan_s=first,
        time_to_1pct_s=within,
        message=result.message,
        history=history,
    )
    return record
