"""Backend ``milp``: the exact formulation as a Pyomo MILP (HiGHS by default).

The same formulation as ``solvers.cpsat`` (every coefficient comes from
``formulation``), with the same constraint-family names:

* ``_select_one_candidate``: one assignment per vertex, one staleness per model;
* ``_gpu_exclusivity``: disjunctive big-M ordering, only for pairs of runs
  that can share a GPU unit and are not already ordered by data or chain
  edges; the big-M is the horizon of the best heuristic plan (every run ends
  by then in an improving solution), the tightest valid value;
* ``_precedence``: chain and data edges, the lags switched on by block
  indicators without any big-M (``S >= E + lag*(y + z - 1)``);
* ``_staleness``: pub edges switched on by the staleness binaries, with the
  exact lag of the destination's assignment and the source's block level;
* ``_memory_capacity``: the static residency rule per GPU unit (in GB);
* ``_objective``: the makespan of ``k_eval`` steps;
* ``_gpu_load``: a valid inequality (the makespan covers each GPU unit's
  total run time) that tightens the LP relaxation of the big-M ordering;
* ``_gpu_area``: a valid inequality (all runs' GPU-seconds fit in the
  cluster's GPU-seconds up to the makespan).

Times are in seconds: the formulation's floored integer units times the unit,
so the optimum is the same as CP-SAT's on the same formulation, and a valid
lower bound on the true optimum. ``milp:NAME`` solves with any MIP solver
Pyomo reaches (gurobi, cplex, cbc, scip, ...).
"""

from __future__ import annotations

import os
import sys
import time

import pyomo.environ as pyo

from formulation import Formulation, build_formulation
from rpeg.context import Problem
from rpeg.errors import InputError
from rpeg.instance import LEVELS
from rpeg.plan import Plan
from solvers.common import plan_result, unplaceable_result
from solvers.options import SolveOptions
from solvers.progress import TerminalProgress
from solvers.result import Result, Status

GB = 1e9

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


class MilpVariables:
    """The decision variables of the MILP; warm starts go through :meth:`warm_start`."""

    def __init__(self, model: pyo.ConcreteModel, formulation: Formulation) -> None:
        f = formulation
        self.model, self.formulation = model, f
        self.unit = f.unit
        self.horizon = f.horizon * f.unit
        model.assignment_index = pyo.Set(
            initialize=[
                (v, a) for v in range(f.num_vertices) for a in range(len(f.assignments[v]))
            ],
            dimen=2,
        )
        model.x = pyo.Var(model.assignment_index, domain=pyo.Binary)
        model.block_index = pyo.Set(
            initialize=[(v, b) for v in range(f.num_vertices) for b in f.blocks_of(v)], dimen=2
        )
        # Block indicators: y[v, b] = Σ x[v, a] over assignments on b (set by
        # ``_select_one_candidate``); they keep every block-level sum short.
        model.y = pyo.Var(model.block_index, bounds=(0, 1))
        model.staleness_index = pyo.Set(
            initialize=[(m, s) for m, choices in f.staleness_choices.items() for s in choices],
            dimen=2,
        )
        model.s = pyo.Var(model.staleness_index, domain=pyo.Binary)
        model.start = pyo.Var(range(f.num_runs), bounds=(0, self.horizon))
        # Chosen duration per vertex (= Σ duration·x, set by ``_select_one_candidate``),
        # so every precedence and ordering row holds one term instead of the whole sum.
        model.duration = pyo.Var(range(f.num_vertices), bounds=(0, self.horizon))
        model.makespan = pyo.Var(bounds=(0, self.horizon))
        self.pairs = f.conflict_pairs()
        model.order = pyo.Var(range(len(self.pairs)), domain=pyo.Binary)
        self.y = model.y
        self.x, self.s, self.start, self.makespan, self.order = (
            model.x,
            model.s,
            model.start,
            model.makespan,
            model.order,
        )

    # -- expressions -------------------------------------------------------------------

    def duration_of_choice(self, vertex: int):
        """Σ duration·x of ``vertex`` (s): what ``duration[vertex]`` equals."""
        f = self.formulation
        return sum(
            a.duration * f.unit * self.x[vertex, i] for i, a in enumerate(f.assignments[vertex])
        )

    def end(self, run: int):
        """End of ``run`` (s)."""
        return self.start[run] + self.model.duration[run % self.formulation.num_vertices]

    def chosen_sum(self, vertex: int, indices) -> object:
        """Sum of the assignment binaries ``indices`` of ``vertex`` (0/1: one is chosen)."""
        return sum(self.x[vertex, i] for i in indices)

    def on_blocks(self, vertex: int, blocks) -> object:
        """1 when ``vertex`` is on one of ``blocks``."""
        return sum(self.y[vertex, b] for b in blocks)

    def covers(self, vertex: int, unit: tuple[int, int]) -> object:
        """1 when ``vertex``'s block covers the GPU unit ``unit``."""
        return self.on_blocks(vertex, self.formulation.covering_blocks(vertex, unit))

    # -- warm start ----------------------------------------------------------------------

    def warm_start(self, chosen: list[int], staleness: dict[str, int], starts: list[int]) -> None:
        """Set every variable to the heuristic plan's values (used by solvers that accept them)."""
        f = self.formulation
        for vertex, items in enumerate(f.assignments):
            for index in range(len(items)):
                self.x[vertex, index].value = int(index == chosen[vertex])
            block = f.block_index[items[chosen[vertex]].block]
            for b in f.blocks_of(vertex):
                self.y[vertex, b].value = int(b == block)
        for m, s in self.s:
            self.s[m, s].value = int(s == staleness[m])
        for vertex, index in enumerate(chosen):
            self.model.duration[vertex].value = f.assignments[vertex][index].duration * f.unit
        ends = []
        for run, start in enumerate(starts):
            self.start[run].value = start * f.unit
            vertex = run % f.num_vertices
            ends.append((start + f.assignments[vertex][chosen[vertex]].duration) * f.unit)
        self.makespan.value = max(ends)
        for index, (r1, r2, _) in enumerate(self.pairs):
            self.order[index].value = int(starts[r1] <= starts[r2])

    def chosen(self) -> tuple[list[int], dict[str, int], list[float]]:
        """Assignment indices, staleness and run starts (units) of the loaded solution."""
        f = self.formulation
        chosen = [
            max(range(len(items)), key=lambda i, v=vertex: pyo.value(self.x[v, i]))
            for vertex, items in enumerate(f.assignments)
        ]
        staleness = {
            m: max(choices, key=lambda s, m=m: pyo.value(self.s[m, s]))
            for m, choices in f.staleness_choices.items()
        }
        starts = [pyo.value(self.start[r]) / f.unit for r in range(f.num_runs)]
        return chosen, staleness, starts


class MilpModel:
    """Builds the Pyomo model from a formulation, one method per constraint family."""

    def __init__(self, formulation: Formulation) -> None:
        self.formulation = formulation
        self.model = pyo.ConcreteModel(name="rl_step_plan")
        self.vars = MilpVariables(self.model, formulation)
        self._select_one_candidate()
        self._gpu_exclusivity()
        self._precedence()
        self._staleness()
        self._memory_capacity()
        self._objective()
        self._gpu_load()
        self._gpu_area()

    def _family(self, name: str) -> pyo.ConstraintList:
        constraints = pyo.ConstraintList()
        self.model.add_component(name, constraints)
        return constraints

    def _select_one_candidate(self) -> None:
        """Exactly one assignment per vertex and one staleness per trained model."""
        f, v = self.formulation, self.vars
        family = self._family("select_one_candidate")
        for vertex, items in enumerate(f.assignments):
            family.add(v.chosen_sum(vertex, range(len(items))) == 1)
            for block in f.blocks_of(vertex):
                family.add(
                    v.y[vertex, block] == v.chosen_sum(vertex, f.assignments_on(vertex, block))
                )
            family.add(self.model.duration[vertex] == v.duration_of_choice(vertex))
        for m, choices in f.staleness_choices.items():
            family.add(sum(v.s[m, s] for s in choices) == 1)

    def _gpu_exclusivity(self) -> None:
        """Two runs sharing a GPU unit go one after the other (big-M = horizon)."""
        f, v = self.formulation, self.vars
        family = self._family("gpu_exclusivity")
        big_m = v.horizon
        for index, (r1, r2, units) in enumerate(v.pairs):
            v1, v2 = r1 % f.num_vertices, r2 % f.num_vertices
            order = v.order[index]
            for unit in units:
                both = v.chosen_sum(v1, f.covering(v1, unit)) + v.chosen_sum(
                    v2, f.covering(v2, unit)
                )
                family.add(v.start[r2] >= v.end(r1) - big_m * (1 - order) - big_m * (2 - both))
                family.add(v.start[r1] >= v.end(r2) - big_m * order - big_m * (2 - both))

    def _precedence(self) -> None:
        """Chain edges, and data edges with their exact pairwise lags."""
        f, v = self.formulation, self.vars
        family = self._family("precedence")
        for step in range(1, f.k_eval):
            for vertex in range(f.num_vertices):
                family.add(v.start[f.run(vertex, step)] >= v.end(f.run(vertex, step - 1)))
        for step in range(f.k_eval):
            for src, dst in f.data_edges:
                before, after = f.run(src, step), f.run(dst, step)
                family.add(v.start[after] >= v.end(before))
                for target in f.blocks_of(dst):
                    here = v.on_blocks(dst, [target])
                    for level in LEVELS:
                        lag = f.data_lag_at(level) * f.unit
                        blocks = f.elsewhere_blocks(src, target, level)
                        if lag > 0 and blocks:
                            family.add(
                                v.start[after]
                                >= v.end(before) + lag * (here + v.on_blocks(src, blocks) - 1)
                            )

    def _staleness(self) -> None:
        """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

        A synchronous edge (old log-probs) has σ = 0 whatever is chosen.
        """
        f, v = self.formulation, self.vars
        family = self._family("staleness")
        big_m = v.horizon
        for src, dst, name, key in f.pub_edges:
            for sigma in f.staleness_options(key):
                chosen = v.s[key, sigma] if key is not None else 1
                for step in range(f.k_eval):
                    source_step = f.pub_source_step(step, sigma)
                    if source_step < 0:
                        continue
                    before, after = f.run(src, source_step), f.run(dst, step)
                    if key is None:
                        family.add(v.start[after] >= v.end(before))
                    else:
                        family.add(v.start[after] >= v.end(before) - big_m * (1 - chosen))
                    for index, target in enumerate(f.assignments[dst]):
                        block = f.block_index[target.block]
                        x = v.x[dst, index]
                        conditions = []
                        for level in LEVELS:
                            blocks = f.elsewhere_blocks(src, block, level)
                            if blocks:
                                conditions.append(
                                    (f.pub_lag_at(name, level, target), v.on_blocks(src, blocks))
                                )
                        others = f.other_layout_assignments(src, block, target.layout)
                        if others:
                            conditions.append(
                                (f.reshard_lag(name, target), v.chosen_sum(src, others))
                            )
                        for lag_units, where in conditions:
                            lag = lag_units * f.unit
                            if lag > 0:
                                family.add(
                                    v.start[after]
                                    >= v.end(before)
                                    + lag
                                    - (big_m + lag) * (3 - chosen - x - where)
                                )

    def _memory_capacity(self) -> None:
        """Per GPU unit: Σ over models of the largest resident + largest transient ≤ capacity."""
        f, v, model = self.formulation, self.vars, self.model
        template = f.problem.directory.template
        family = self._family("memory_capacity")
        capacity = f.memory_capacity / GB
        models = sorted({vertex.model for vertex in template.vertices})
        units = f.maximal_units()
        model.resident = pyo.Var(models, range(len(units)), bounds=(0, capacity))
        model.transient = pyo.Var(range(len(units)), bounds=(0, capacity))
        for unit_index, unit in enumerate(units):
            used = set()
            for vertex in range(f.num_vertices):
                indices = f.covering(vertex, unit)
                if not indices:
                    continue
                name = template.vertices[vertex].model
                used.add(name)
                items = f.assignments[vertex]
                family.add(
                    model.resident[name, unit_index]
                    >= sum(items[i].resident / GB * v.x[vertex, i] for i in indices)
                )
                family.add(
                    model.transient[unit_index]
                    >= sum(items[i].transient / GB * v.x[vertex, i] for i in indices)
                )
            if used:
                family.add(
                    sum(model.resident[name, unit_index] for name in sorted(used))
                    + model.transient[unit_index]
                    <= capacity
                )

    def _objective(self) -> None:
        """Minimise the makespan of the k_eval steps."""
        f, v, model = self.formulation, self.vars, self.model
        family = self._family("objective_makespan")
        for vertex in range(f.num_vertices):
            family.add(v.makespan >= v.end(f.run(vertex, f.k_eval - 1)))
        model.objective = pyo.Objective(expr=v.makespan, sense=pyo.minimize)

    def _gpu_load(self) -> None:
        """Valid inequality: the makespan covers each GPU unit's total run time, plus
        the first generation when it runs elsewhere (``Formulation.load_rows``).

        Implied by ``_gpu_exclusivity`` and ``_precedence`` for integer
        solutions; it tightens the LP relaxation, which the big-M ordering
        alone leaves weak.
        """
        f, v = self.formulation, self.vars
        family = self._family("gpu_load")
        for _, terms in f.load_rows():
            family.add(
                v.makespan
                >= sum(coefficient * f.unit * v.x[vertex, i] for vertex, i, coefficient in terms)
            )

    def _gpu_area(self) -> None:
        """Valid inequality: the GPU-seconds of all runs fit in ``num_gpus x makespan``."""
        f, v = self.formulation, self.vars
        family = self._family("gpu_area")
        gpus = f.problem.directory.cluster.num_gpus
        area = sum(
            f.k_eval * a.block.size * a.duration * f.unit * v.x[vertex, i]
            for vertex in range(f.num_vertices)
            for i, a in enumerate(f.assignments[vertex])
        )
        family.add(gpus * v.makespan >= area)

    def sizes(self) -> dict[str, int]:
        """Model size: binaries, continuous variables, constraints."""
        variables = list(self.model.component_data_objects(pyo.Var, active=True))
        binaries = sum(1 for var in variables if var.is_binary())
        constraints = sum(1 for _ in self.model.component_data_objects(pyo.Constraint, active=True))
        return {
            "binaries": binaries,
            "continuous": len(variables) - binaries,
            "constraints": constraints,
            "ordering_pairs": len(self.vars.pairs),
        }

    def write(self, path: str, file_format: str) -> None:
        """Write the model as an MPS or LP file (atomically)."""
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".tmp-{os.getpid()}-export.{file_format}")
        try:
            self.model.write(
                temporary, format=file_format, io_options={"symbolic_solver_labels": True}
            )
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


def build_model(problem: Problem, start: Plan) -> tuple[Formulation, MilpModel]:
    """The formulation and MILP built from a heuristic start plan (warm-started with it)."""
    formulation = build_formulation(problem, problem.simulator.evaluate(start).makespan)
    built = MilpModel(formulation)
    built.vars.warm_start(*formulation.warm_start(start))
    return formulation, built


def check_engine(engine: str) -> None:
    """Refuse, naming how to install it, a MIP solver Pyomo cannot reach."""
    if engine == "highs":
        from pyomo.contrib.solver.solvers.highs import Highs

        if not Highs().available():
            raise InputError(
                "--solver",
                f"milp:highs is not available; install it with: {INSTALL_HINTS['highs']}",
            )
        return
    try:
        solver = pyo.SolverFactory(engine)
        available = solver is not None and solver.available(exception_flag=False)
    except Exception:
        available = False
    if not available:
        hint = INSTALL_HINTS.get(engine, "install it so that Pyomo's SolverFactory can find it")
        raise InputError("--solver", f"MIP solver {engine!r} is not available to Pyomo; {hint}")


#: HiGHS fixes its thread pool at the first solve of a process and refuses a
#: different ``threads`` value afterwards; later solves reuse the first value.
_highs_threads: int | None = None


def _solve_highs(built: MilpModel, options: SolveOptions, time_limit: float, tee: bool):
    from pyomo.contrib.solver.common.results import TerminationCondition
    from pyomo.contrib.solver.solvers.highs import Highs

    global _highs_threads
    if _highs_threads is None:
        _highs_threads = options.threads
    results = Highs().solve(
        built.model,
        tee=[sys.stderr] if tee else False,
        time_limit=max(0.1, time_limit),
        threads=_highs_threads,
        rel_gap=options.gap,
        load_solutions=False,
        raise_exception_on_nonoptimal_result=False,
    )
    has_solution = results.incumbent_objective is not None
    if has_solution:
        results.solution_loader.load_vars()
    optimal = results.termination_condition == TerminationCondition.convergenceCriteriaSatisfied
    infeasible = results.termination_condition == TerminationCondition.provenInfeasible
    return (
        has_solution,
        optimal,
        infeasible,
        results.objective_bound,
        results.incumbent_objective,
        str(results.termination_condition),
    )


def _solve_pyomo(
    built: MilpModel, engine: str, options: SolveOptions, time_limit: float, tee: bool
):
    from pyomo.opt import SolverStatus, TerminationCondition

    solver = pyo.SolverFactory(engine)
    names = SOLVER_OPTION_NAMES.get(engine)
    if names is not None:
        for name, value in zip(
            names, (max(1.0, time_limit), options.threads, options.gap), strict=True
        ):
            if name is not None:
                solver.options[name] = value
    kwargs = {"tee": tee, "load_solutions": False}
    if solver.warm_start_capable():
        kwargs["warmstart"] = True
    results = solver.solve(built.model, **kwargs)
    has_solution = len(results.solution) > 0 and results.solver.status in (
        SolverStatus.ok,
        SolverStatus.warning,
    )
    if has_solution:
        built.model.solutions.load_from(results)
    condition = results.solver.termination_condition
    bound = results.problem.lower_bound
    bound = None if bound is None or abs(bound) == float("inf") else float(bound)
    incumbent = pyo.value(built.model.objective) if has_solution else None
    return (
        has_solution,
        condition == TerminationCondition.optimal,
        condition == TerminationCondition.infeasible,
        bound,
        incumbent,
        str(condition),
    )


def solve_with_start(
    problem: Problem, options: SolveOptions, start: Plan, time_limit: float, engine: str = "highs"
) -> Result:
    """Build the MILP from ``start``, solve it with ``engine`` and check the plan by simulation."""
    started = time.perf_counter()
    label = "milp" if engine == "highs" else f"milp:{engine}"
    formulation, built = build_model(problem, start)
    tee = isinstance(options.progress, TerminalProgress)
    if tee:
        options.progress.close()  # the solver's own log shows incumbent, bound and gap
    remaining = time_limit - (time.perf_counter() - started)
    if engine == "highs":
        outcome = _solve_highs(built, options, remaining, tee)
    else:
        outcome = _solve_pyomo(built, engine, options, remaining, tee)
    has_solution, optimal, infeasible, bound, incumbent, condition = outcome
    stats = {
        **built.sizes(),
        **formulation.stats,
        "engine": engine,
        "termination": condition,
        "heuristic_start_makespan": formulation.upper_bound,
        "milp_objective_s": incumbent,
        "milp_bound_s": bound,
    }
    if infeasible:
        return Result(
            Status.ERROR,
            label,
            k_eval=problem.instance.k_eval,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message="the MIP solver reports infeasible although a feasible plan was the start",
        )
    if not has_solution:
        return plan_result(
            problem, label, None, started, bound=bound, stats=stats, message="no plan found in time"
        )
    plan = formulation.plan_from_choice(*built.vars.chosen())
    result = plan_result(
        problem, label, plan, started, bound=bound, proven_optimal=optimal, stats=stats
    )
    tolerance = formulation.rounding_tolerance() + 1e-6 * max(1.0, incumbent)
    if result.makespan is not None and abs(result.makespan - incumbent) > tolerance:
        result.status = Status.ERROR
        result.message = (
            f"MILP objective {incumbent:.6f} s differs from its simulated plan "
            f"{result.makespan:.6f} s by more than the time-unit tolerance {tolerance:.2e} s"
        )
    return result


def solve(problem: Problem, options: SolveOptions, engine: str = "highs") -> Result:
    """The MILP warm-started from the better baseline improved by a short local search."""
    from solvers.local import warm_start_plan

    check_engine(engine)
    label = "milp" if engine == "highs" else f"milp:{engine}"
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, label, started)
    if infeasible is not None:
        return infeasible
    start = warm_start_plan(problem, options)
    if start is None:
        return plan_result(problem, label, None, started, message="no heuristic plan to start from")
    remaining = options.time_limit - (time.perf_counter() - started)
    result = solve_with_start(problem, options, start, remaining, engine)
    result.wall_time = time.perf_counter() - started
    return result
