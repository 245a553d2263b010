"""Backend ``milp``: the exact formulation as a MILP (HiGHS by default).

The same formulation as ``rlplan.solvers.cpsat`` (every coefficient comes from
``formulation``, and the lag, memory, load and area rows from
:mod:`rlplan.formulation.rows`), with the same constraint-family names:

* ``_select_one_candidate``: one assignment per vertex, one staleness per model;
* ``_gpu_exclusivity``: disjunctive big-M ordering, only for pairs of runs
  that can share a GPU unit and are not already ordered by data or chain
  edges; the big-M is the horizon of the best heuristic plan (every run ends
  by then in an improving solution), the tightest valid value; whether a run
  covers a unit is a sum of its block indicators;
* ``_precedence``: chain and data edges, the lags switched on by block
  indicators without any big-M
  (``run_start >= run_end + lag * (on_block[dst] + on_block[src elsewhere] - 1)``);
* ``_staleness``: pub edges switched on by the staleness binaries, with the
  exact lag of the destination's assignment and the source's block level;
* ``_memory_capacity``: the static residency rule per GPU unit (in GB);
* ``_objective``: the makespan of ``k_eval`` steps;
* ``_gpu_load``: a valid inequality (the makespan covers each GPU unit's
  total run time) that tightens the LP relaxation of the big-M ordering;
* ``_gpu_area``: a valid inequality (all runs' GPU-seconds fit in the
  cluster's GPU-seconds up to the makespan).

Columns (as named in an exported MPS/LP file): ``choose[v,a]``,
``on_block[v,b]``, ``staleness_is[m,s]``, ``run_start[r]``,
``duration[v]``, ``makespan``, ``before[i]`` (ordering pair i: its first run
goes first), ``resident[m,u]`` and ``transient[u]`` (GB on GPU unit u).

The model is assembled as sparse rows (:mod:`.sparse`, generic) by the
formulation's translation (:mod:`.translation`). HiGHS receives them in one
call through highspy, with the heuristic plan set as its starting solution
(``Highs.setSolution``), so the solve improves on that plan and always has it
to return (:mod:`.engines`). :func:`.pyomo_export.to_pyomo` gives the same
model in Pyomo, which writes MPS/LP files (``main.py export``) and reaches
any other MIP solver (``milp:NAME``: gurobi, cplex, cbc, scip, ...). The
solve itself (:mod:`.backend`) goes through the one exact-solver driver
(:mod:`rlplan.solvers.exact_driver`), as CP-SAT's does.

Times are in seconds: the formulation's floored integer units times the unit,
so the optimum is the same as CP-SAT's on the same formulation, and a valid
lower bound on the true optimum.

The warm start, every build phase and the solver share the solve's one time
limit: building checks the deadline every few hundred rows, and when the
limit is reached before the solver runs, or the solver returns no plan, the
result is the warm-start plan with the best bound known.
"""

from rlplan.solvers.milp.backend import MilpBackend, solve, solve_with_start
from rlplan.solvers.milp.engines import (
    INSTALL_HINTS,
    RESERVE_S,
    SOLVER_OPTION_NAMES,
    MipOutcome,
    _solve_highs,
    _solve_pyomo,
    check_engine,
    new_highs,
)
from rlplan.solvers.milp.pyomo_export import to_pyomo, write_model
from rlplan.solvers.milp.sparse import CHECK_EVERY_ROWS, Expr, LinearModel, Row, VarFamily
from rlplan.solvers.milp.translation import GB, BuiltMilp, MilpModel, MilpVariables, build_model

__all__ = [
    "CHECK_EVERY_ROWS",
    "GB",
    "INSTALL_HINTS",
    "RESERVE_S",
    "SOLVER_OPTION_NAMES",
    "BuiltMilp",
    "Expr",
    "LinearModel",
    "MilpBackend",
    "MilpModel",
    "MilpVariables",
    "MipOutcome",
    "Row",
    "VarFamily",
    "_solve_highs",
    "_solve_pyomo",
    "build_model",
    "check_engine",
    "new_highs",
    "solve",
    "solve_with_start",
    "to_pyomo",
    "write_model",
]
