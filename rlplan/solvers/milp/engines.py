"""The MIP solvers behind the MILP: HiGHS through highspy, others through Pyomo."""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo

from rlplan.rpeg import interrupts
from rlplan.rpeg.errors import InputError
from rlplan.solvers.common import Deadline
from rlplan.solvers.milp.pyomo_export import to_pyomo
from rlplan.solvers.milp.translation import BuiltMilp
from rlplan.solvers.options import SolveOptions

#: Seconds kept after the MIP solver stops, to read its plan back and simulate it.
RESERVE_S = 0.2

#: How to install the MIP solvers users most often name.
INSTALL_HINTS = {
    "highs": "pip install highspy",
    "appsi_highs": "pip install highspy",
    "gurobi": "pip install gurobipy (and a Gurobi licence)",
    "gurobi_direct": "pip install gurobipy (and a Gurobi licence)",
    "cplex": "pip install cplex, or install IBM ILOG CPLEX and put `cplex` on PATH",
    "cplex_direct": "pip install cplex",
    "cbc": "apt-get install coinor-cbc (the `cbc` executable must be on PATH)",
    "glpk": "apt-get install glpk-utils (the `glpsol` executable must be on PATH)",
    "scip": "install SCIP (e.g. conda install -c conda-forge scip) so `scip` is on PATH",
}

#: Time-limit, thread and relative-gap option names of common Pyomo solvers.
SOLVER_OPTION_NAMES = {
    "gurobi": ("TimeLimit", "Threads", "MIPGap"),
    "gurobi_direct": ("TimeLimit", "Threads", "MIPGap"),
    "cplex": ("timelimit", "threads", "mipgap"),
    "cplex_direct": ("timelimit", "threads", "mipgap"),
    "cbc": ("seconds", "threads", "ratio"),
    "glpk": ("tmlim", None, "mipgap"),
    "scip": ("limits/time", "parallel/maxnthreads", "limits/gap"),
}


def check_engine(engine: str) -> None:
    """Refuse, naming how to install it, a MIP solver Pyomo cannot reach."""
    if engine == "highs":
        try:
            import highspy  # noqa: F401
        except ImportError:
            raise InputError(
                "--solver",
                f"milp:highs is not available; install it with: {INSTALL_HINTS['highs']}",
            ) from None
        return
    # Pyomo logs a warning and a traceback for an unknown name before returning
    # an unusable solver; the one line below says it all.
    pyomo_log = logging.getLogger("pyomo")
    level = pyomo_log.level
    pyomo_log.setLevel(logging.CRITICAL + 1)
    try:
        solver = pyo.SolverFactory(engine)
        available = solver is not None and solver.available(exception_flag=False)
    except Exception:
        available = False
    finally:
        pyomo_log.setLevel(level)
    if not available:
        hint = INSTALL_HINTS.get(engine, "install it so that Pyomo's SolverFactory can find it")
        raise InputError("--solver", f"MIP solver {engine!r} is not available to Pyomo; {hint}")


#: HiGHS fixes its thread pool at the first solve of a process and refuses a
#: different ``threads`` value afterwards; later solves reuse the first value.
_highs_threads: int | None = None


def new_highs():
    """A ``highspy.Highs`` without its banner on stdout, with its log off the console."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    # The log stays on (the MIP logging callbacks need it) but off the console.
    highs.setOptionValue("output_flag", True)
    highs.setOptionValue("log_to_console", False)
    return highs


@dataclass
class MipOutcome:
    """What a MIP solver returned (objective and bound in seconds)."""

    values: np.ndarray | None
    optimal: bool
    infeasible: bool
    bound: float | None
    incumbent: float | None
    termination: str
    interrupted: bool = False


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _solve_highs(built: BuiltMilp, options: SolveOptions, deadline: Deadline) -> MipOutcome:
    """Solve with HiGHS through highspy, starting from the warm-start solution."""
    import highspy

    global _highs_threads
    if _highs_threads is None:
        _highs_threads = options.threads
    highs = new_highs()
    if options.verbose:
        highs.cbLogging.subscribe(lambda event: sys.stderr.write(event.message))
    highs.setOptionValue("threads", _highs_threads)
    highs.setOptionValue("mip_rel_gap", options.gap)
    highs.setOptionValue("random_seed", options.seed)
    model = built.milp.model
    model.to_highs(highs)
    deadline.check("passing the model to HiGHS")
    columns = model.num_columns
    highs.setSolution(columns, np.arange(columns, dtype=np.int32), built.start_values)
    progress = options.progress

    def improved(event) -> None:
        progress.update(
            best=_finite(event.data_out.objective_function_value),
            bound=_finite(event.data_out.mip_dual_bound),
        )

    def logged(event) -> None:
        progress.update(
            best=_finite(event.data_out.mip_primal_bound),
            bound=_finite(event.data_out.mip_dual_bound),
        )

    highs.cbMipImprovingSolution.subscribe(improved)
    highs.cbMipLogging.subscribe(logged)
    highs.setOptionValue("time_limit", max(0.05, deadline.remaining() - RESERVE_S))
    highs.HandleKeyboardInterrupt = True
    interrupts.attach_highs(highs)
    if not interrupts.solve_highs(highs):
        return MipOutcome(None, False, False, None, None, "interrupted in presolve", True)
    status = highs.getModelStatus()
    info = highs.getInfo()
    feasible = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    values = np.array(highs.getSolution().col_value) if feasible else None
    return MipOutcome(
        values=values,
        optimal=status == highspy.HighsModelStatus.kOptimal,
        infeasible=status == highspy.HighsModelStatus.kInfeasible,
        bound=_finite(info.mip_dual_bound),
        incumbent=_finite(info.objective_function_value) if feasible else None,
        termination=highs.modelStatusToString(status),
        interrupted=status
        in (highspy.HighsModelStatus.kInterrupt, highspy.HighsModelStatus.kHighsInterrupt),
    )


def _solve_pyomo(
    built: BuiltMilp, engine: str, options: SolveOptions, deadline: Deadline
) -> MipOutcome:
    """Solve the Pyomo model with ``engine`` (any MIP solver Pyomo reaches)."""
    from pyomo.opt import SolverStatus, TerminationCondition

    model, columns = to_pyomo(built.milp.model, built.start_values)
    solver = pyo.SolverFactory(engine)
    names = SOLVER_OPTION_NAMES.get(engine)
    remaining = max(1.0, deadline.remaining() - RESERVE_S)
    if names is not None:
        for name, value in zip(names, (remaining, options.threads, options.gap), strict=True):
            if name is not None:
                solver.options[name] = value
    kwargs = {"tee": options.verbose, "load_solutions": False}
    if solver.warm_start_capable():
        kwargs["warmstart"] = True
    results = solver.solve(model, **kwargs)
    has_solution = len(results.solution) > 0 and results.solver.status in (
        SolverStatus.ok,
        SolverStatus.warning,
    )
    values = None
    if has_solution:
        model.solutions.load_from(results)
        values = np.array([pyo.value(column, exception=False) or 0.0 for column in columns])
    condition = results.solver.termination_condition
    bound = results.problem.lower_bound
    bound = None if bound is None or abs(bound) == float("inf") else float(bound)
    return MipOutcome(
        values=values,
        optimal=condition == TerminationCondition.optimal,
        infeasible=condition == TerminationCondition.infeasible,
        bound=bound,
        incumbent=pyo.value(model.objective) if has_solution else None,
        termination=str(condition),
    )
