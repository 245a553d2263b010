"""Backend ``cpsat``: the exact formulation in OR-Tools CP-SAT.

Variables (owned by :class:`CpSatVariables`): one Boolean per (vertex, block,
candidate) assignment with exactly one true per vertex; a block literal per
(vertex, block); staleness Booleans; per run a start, an end and an interval
whose length is the chosen duration; per vertex a GPU-range interval; the
makespan.

Constraint families (the same names as in ``solvers.milp``):
``_select_one_candidate``, ``_gpu_exclusivity`` (NoOverlap2D over time x GPU
range), ``_precedence`` (data and chain edges with exact pairwise lags),
``_staleness`` (pub edges switched on by the staleness Booleans, with their
exact lags), ``_memory_capacity`` (per-GPU static residency rule, linear),
``_objective`` (makespan of ``k_eval`` steps), ``_gpu_load`` (redundant:
the makespan covers each GPU unit's total run time) and ``_gpu_area``
(redundant: all runs' GPU-seconds fit in the cluster's).

Durations and lags are rounded down to the time unit of the formulation, so
the proven bound is a valid lower bound on the true optimum. No symmetry
breaking is added: blocks of equal shape are not interchangeable in general
(transfer lags depend on positions), so none is proven valid here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from formulation import Formulation, build_formulation
from rpeg import stop
from rpeg.context import Problem
from rpeg.instance import LEVELS
from rpeg.plan import Plan
from solvers.common import BuildTimeout, Deadline, plan_result, unplaceable_result
from solvers.options import SolveOptions
from solvers.result import Result, Status

#: Inner-loop iterations between two deadline checks while building.
TICKS_PER_CHECK = 32


class CpSatVariables:
    """The decision variables of the CP-SAT model; warm starts go through :meth:`hint`."""

    def __init__(
        self,
        model: cp_model.CpModel,
        formulation: Formulation,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        """Create the variables; ``tick`` is called in the loops (a deadline check)."""
        self.model = model
        self.formulation = formulation
        f = formulation
        horizon = f.horizon
        self.assign = [
            [model.NewBoolVar(f"x[{v},{a}]") for a in range(len(items))]
            for v, items in enumerate(f.assignments)
        ]
        self.on_block: list[dict[int, cp_model.IntVar]] = []
        for vertex, items in enumerate(f.assignments):
            per_block: dict[int, list] = {}
            for literal, assignment in zip(self.assign[vertex], items, strict=True):
                per_block.setdefault(f.block_index[assignment.block], []).append(literal)
            literals = {}
            for block, members in per_block.items():
                tick()
                literal = model.NewBoolVar(f"y[{vertex},{block}]")
                model.Add(literal == cp_model.LinearExpr.sum(members))
                literals[block] = literal
            self.on_block.append(literals)
        self.staleness = {
            m: {value: model.NewBoolVar(f"s[{m},{value}]") for value in choices}
            for m, choices in f.staleness_choices.items()
        }
        self.duration = []
        self.gpu_start = []
        self.gpu_size = []
        self.gpu_interval = []
        for vertex, items in enumerate(f.assignments):
            tick()
            low = min(a.duration for a in items)
            high = max(a.duration for a in items)
            duration = model.NewIntVar(low, high, f"d[{vertex}]")
            model.Add(
                duration
                == cp_model.LinearExpr.weighted_sum(
                    self.assign[vertex], [a.duration for a in items]
                )
            )
            start = model.NewIntVar(0, f.problem.directory.cluster.num_gpus, f"g0[{vertex}]")
            size = model.NewIntVar(1, f.problem.directory.cluster.num_gpus, f"gw[{vertex}]")
            model.Add(
                start
                == cp_model.LinearExpr.weighted_sum(
                    self.assign[vertex], [a.block.start for a in items]
                )
            )
            model.Add(
                size
                == cp_model.LinearExpr.weighted_sum(
                    self.assign[vertex], [a.block.size for a in items]
                )
            )
            end = model.NewIntVar(1, f.problem.directory.cluster.num_gpus, f"g1[{vertex}]")
            self.duration.append(duration)
            self.gpu_start.append(start)
            self.gpu_size.append(size)
            self.gpu_interval.append(model.NewIntervalVar(start, size, end, f"gpus[{vertex}]"))
        self.start, self.end, self.interval = [], [], []
        for run in range(f.num_runs):
            vertex = run % f.num_vertices
            start = model.NewIntVar(0, horizon, f"S[{run}]")
            end = model.NewIntVar(0, horizon, f"E[{run}]")
            self.start.append(start)
            self.end.append(end)
            self.interval.append(
                model.NewIntervalVar(start, self.duration[vertex], end, f"run[{run}]")
            )
        self.makespan = model.NewIntVar(0, horizon, "makespan")

    def hint(self, chosen: list[int], staleness: dict[str, int], starts: list[int]) -> None:
        """Hint a complete solution (a heuristic plan as converted by the formulation)."""
        model, f = self.model, self.formulation
        for vertex, index in enumerate(chosen):
            for a, literal in enumerate(self.assign[vertex]):
                model.AddHint(literal, a == index)
            block = f.block_index[f.assignments[vertex][index].block]
            for b, literal in self.on_block[vertex].items():
                model.AddHint(literal, b == block)
        for m, literals in self.staleness.items():
            for value, literal in literals.items():
                model.AddHint(literal, value == staleness[m])
        for run, start in enumerate(starts):
            vertex = run % f.num_vertices
            model.AddHint(self.start[run], start)
            model.AddHint(self.end[run], start + f.assignments[vertex][chosen[vertex]].duration)
        ends = [
            starts[r] + f.assignments[r % f.num_vertices][chosen[r % f.num_vertices]].duration
            for r in range(f.num_runs)
        ]
        model.AddHint(self.makespan, max(ends))

    def chosen(self, solver: cp_model.CpSolver) -> tuple[list[int], dict[str, int], list[int]]:
        """Assignment indices, staleness and run starts of the solver's solution."""
        chosen = [
            next(a for a, x in enumerate(literals) if solver.BooleanValue(x))
            for literals in self.assign
        ]
        staleness = {
            m: next(value for value, x in literals.items() if solver.BooleanValue(x))
            for m, literals in self.staleness.items()
        }
        starts = [solver.Value(s) for s in self.start]
        return chosen, staleness, starts


class CpSatModel:
    """Builds the CP-SAT model from a formulation, one method per constraint family.

    Parameters
    ----------
    formulation
        The backend-neutral formulation.
    deadline
        When given, checked before each family and inside the long ones:
        building stops with :class:`solvers.common.BuildTimeout` once it passes.
    """

    def __init__(self, formulation: Formulation, deadline: Deadline | None = None) -> None:
        self.formulation = formulation
        self.deadline = deadline
        self._ticks = 0
        self.model = cp_model.CpModel()
        self._check("variables")
        self.vars = CpSatVariables(self.model, formulation, self._tick)
        self._level_literals: dict[tuple[int, int, str], cp_model.IntVar | None] = {}
        self._layout_literals: dict[tuple[int, int, tuple[int, int]], cp_model.IntVar | None] = {}
        for family in (
            self._select_one_candidate,
            self._gpu_exclusivity,
            self._precedence,
            self._staleness,
            self._memory_capacity,
            self._objective,
            self._gpu_load,
            self._gpu_area,
        ):
            self._check(family.__name__.lstrip("_"))
            family()

    def _check(self, phase: str = "") -> None:
        """Stop building once the deadline has passed (no deadline: never)."""
        if self.deadline is not None:
            self.deadline.check(phase)

    def _tick(self) -> None:
        """:meth:`_check` every :data:`TICKS_PER_CHECK` calls (cheap inside inner loops)."""
        self._ticks += 1
        if self._ticks % TICKS_PER_CHECK == 0:
            self._check()

    # -- helper literals -----------------------------------------------------------------

    def _sum_literal(self, name: str, members: list):
        """A Boolean equal to the sum of mutually exclusive literals (None if there are none)."""
        if not members:
            return None
        literal = self.model.NewBoolVar(name)
        self.model.Add(literal == cp_model.LinearExpr.sum(members))
        return literal

    def _elsewhere_at_level(self, vertex: int, target: int, level: str):
        """Literal: ``vertex`` is on a block other than ``target`` spanning ``level`` with it."""
        key = (vertex, target, level)
        if key not in self._level_literals:
            blocks = self.formulation.elsewhere_blocks(vertex, target, level)
            members = [self.vars.on_block[vertex][b] for b in blocks]
            self._level_literals[key] = self._sum_literal(f"at[{vertex},{target},{level}]", members)
        return self._level_literals[key]

    def _other_layout_on(self, vertex: int, target: int, layout: tuple[int, int, int]):
        """Literal: ``vertex`` sits on block ``target`` in a weight layout other than ``layout``."""
        key = (vertex, target, layout)
        if key not in self._layout_literals:
            indices = self.formulation.other_layout_assignments(vertex, target, layout)
            members = [self.vars.assign[vertex][a] for a in indices]
            self._layout_literals[key] = self._sum_literal(
                f"lay[{vertex},{target},{layout}]", members
            )
        return self._layout_literals[key]

    # -- constraint families ----------------------------------------------------------------

    def _select_one_candidate(self) -> None:
        """Exactly one assignment per vertex and one staleness per trained model."""
        for literals in self.vars.assign:
            self.model.AddExactlyOne(literals)
        for literals in self.vars.staleness.values():
            self.model.AddExactlyOne(literals.values())

    def _gpu_exclusivity(self) -> None:
        """Runs whose GPU ranges intersect do not overlap in time (NoOverlap2D)."""
        f = self.formulation
        self.model.AddNoOverlap2D(
            self.vars.interval,
            [self.vars.gpu_interval[run % f.num_vertices] for run in range(f.num_runs)],
        )

    def _precedence(self) -> None:
        """Chain edges, and data edges with their exact pairwise lags."""
        f, v, model = self.formulation, self.vars, self.model
        for step in range(1, f.k_eval):
            for vertex in range(f.num_vertices):
                model.Add(v.start[f.run(vertex, step)] >= v.end[f.run(vertex, step - 1)])
        data_lags = {level: f.data_lag_at(level) for level in LEVELS}
        for step in range(f.k_eval):
            for src, dst in f.data_edges:
                self._check()
                before, after = f.run(src, step), f.run(dst, step)
                model.Add(v.start[after] >= v.end[before])
                for target, literal in v.on_block[dst].items():
                    self._tick()
                    for level, lag in data_lags.items():
                        if lag <= 0:
                            continue
                        elsewhere = self._elsewhere_at_level(src, target, level)
                        if elsewhere is not None:
                            model.Add(v.start[after] >= v.end[before] + lag).OnlyEnforceIf(
                                [literal, elsewhere]
                            )

    def _staleness(self) -> None:
        """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

        A synchronous edge (old log-probs) has σ = 0 whatever is chosen.
        """
        f, v, model = self.formulation, self.vars, self.model
        for src, dst, model_name, key in f.pub_edges:
            for sigma in f.staleness_options(key):
                chosen = [v.staleness[key][sigma]] if key is not None else []
                for step in range(f.k_eval):
                    source_step = f.pub_source_step(step, sigma)
                    if source_step < 0:
                        continue
                    self._check()
                    before, after = f.run(src, source_step), f.run(dst, step)
                    model.Add(v.start[after] >= v.end[before]).OnlyEnforceIf(chosen)
                    for x, target in zip(v.assign[dst], f.assignments[dst], strict=True):
                        self._tick()
                        block = f.block_index[target.block]
                        for level in LEVELS:
                            elsewhere = self._elsewhere_at_level(src, block, level)
                            lag = f.pub_lag_at(model_name, level, target)
                            if elsewhere is not None and lag > 0:
                                model.Add(v.start[after] >= v.end[before] + lag).OnlyEnforceIf(
                                    [*chosen, x, elsewhere]
                                )
                        other_layout = self._other_layout_on(src, block, target.layout)
                        lag = f.reshard_lag(model_name, target)
                        if other_layout is not None and lag > 0:
                            model.Add(v.start[after] >= v.end[before] + lag).OnlyEnforceIf(
                                [*chosen, x, other_layout]
                            )

    def _memory_capacity(self) -> None:
        """Per GPU: Σ over models of the largest resident + the largest transient ≤ capacity."""
        f, v, model = self.formulation, self.vars, self.model
        template = f.problem.directory.template
        capacity = f.memory_capacity
        for low, high in f.maximal_units():
            self._check()
            covering = [
                [
                    (f.assignments[vertex][a], v.assign[vertex][a])
                    for a in f.covering(vertex, (low, high))
                ]
                for vertex in range(f.num_vertices)
            ]
            if not any(covering):
                continue
            residents = {}
            transient = model.NewIntVar(0, capacity, f"T[{low}]")
            for vertex, terms in enumerate(covering):
                self._tick()
                if not terms:
                    continue
                name = template.vertices[vertex].model
                if name not in residents:
                    residents[name] = model.NewIntVar(0, capacity, f"R[{name},{low}]")
                literals = [x for _, x in terms]
                model.Add(
                    residents[name]
                    >= cp_model.LinearExpr.weighted_sum(literals, [a.resident for a, _ in terms])
                )
                model.Add(
                    transient
                    >= cp_model.LinearExpr.weighted_sum(literals, [a.transient for a, _ in terms])
                )
            model.Add(sum(residents.values()) + transient <= capacity)

    def _objective(self) -> None:
        """Minimise the makespan of the k_eval steps."""
        f, v, model = self.formulation, self.vars, self.model
        for vertex in range(f.num_vertices):
            model.Add(v.makespan >= v.end[f.run(vertex, f.k_eval - 1)])
        model.Minimize(v.makespan)

    def _gpu_load(self) -> None:
        """Redundant constraint: the makespan covers each GPU unit's total run time,
        plus the first generation when it runs elsewhere (``Formulation.load_rows``).

        Implied by ``_gpu_exclusivity`` and ``_precedence``; it gives the search
        a global bound early (the same rows as in the MILP).
        """
        f, v, model = self.formulation, self.vars, self.model
        for _, terms in f.load_rows():
            self._check()
            model.Add(
                v.makespan
                >= cp_model.LinearExpr.weighted_sum(
                    [v.assign[vertex][i] for vertex, i, _ in terms],
                    [coefficient for _, _, coefficient in terms],
                )
            )

    def _gpu_area(self) -> None:
        """Redundant constraint: all runs' GPU-seconds fit in ``num_gpus x makespan``.

        Implied by ``_gpu_exclusivity``; with GPU-load it bounds plans that
        split vertices over disjoint blocks (the same valid inequality as in
        the MILP).
        """
        f, v, model = self.formulation, self.vars, self.model
        gpus = f.problem.directory.cluster.num_gpus
        model.Add(
            gpus * v.makespan
            >= cp_model.LinearExpr.weighted_sum(
                [x for literals in v.assign for x in literals],
                [f.k_eval * a.block.size * a.duration for items in f.assignments for a in items],
            )
        )

    def sizes(self) -> dict[str, int]:
        """Model size: Booleans, intervals, constraints."""
        proto = self.model.Proto()
        booleans = sum(1 for var in proto.variables if list(var.domain) == [0, 1])
        f = self.formulation
        intervals = f.num_runs + f.num_vertices
        return {
            "variables": len(proto.variables),
            "booleans": booleans,
            "intervals": intervals,
            "constraints": len(proto.constraints) - intervals,
        }


class _Progress(cp_model.CpSolverSolutionCallback):
    def __init__(self, variables: CpSatVariables, unit: float, options: SolveOptions) -> None:
        super().__init__()
        self.variables, self.unit, self.options = variables, unit, options
        self.first_solution_time: float | None = None
        self.started = time.perf_counter()

    def on_solution_callback(self) -> None:
        if self.first_solution_time is None:
            self.first_solution_time = time.perf_counter() - self.started
        self.options.progress.update(
            best=self.ObjectiveValue() * self.unit, bound=self.BestObjectiveBound() * self.unit
        )


#: Seconds kept after CP-SAT stops, to read its plan back and simulate it.
RESERVE_S = 0.2


def solve_with_hint(
    problem: Problem, options: SolveOptions, start: Plan, time_limit: float
) -> Result:
    """Build and solve the CP-SAT model warm-started from ``start``, then check it by simulation.

    The build and the search share ``time_limit``. The result is never worse
    than ``start``: when the limit passes while building, or CP-SAT returns
    no plan (or a worse one), ``start`` is reported with the best bound known
    (``stats["returned_start"]`` is then true).
    """
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    upper = problem.simulator.evaluate(start).makespan
    options.progress.update(best=upper, bound=problem.bounds.best)
    stats: dict = {"heuristic_start_makespan": upper}

    def start_result(bound: float | None, message: str) -> Result:
        stats["returned_start"] = True
        return plan_result(
            problem,
            "cpsat",
            start,
            started,
            bound=bound,
            requested_gap=options.gap,
            stats=stats,
            message=message,
        )

    try:
        formulation = build_formulation(problem, upper)
        built = CpSatModel(formulation, deadline)
        deadline.check("hint")
        built.vars.hint(*formulation.warm_start(start))
        deadline.check("solver start")
    except BuildTimeout as exc:
        stats["build_s"] = time.perf_counter() - started
        return start_result(
            None,
            f"time limit reached while building the CP-SAT model (at {exc.args[0] or 'start'}); "
            "the warm-start plan is reported",
        )
    stats["build_s"] = time.perf_counter() - started
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.05, deadline.remaining() - RESERVE_S)
    solver.parameters.num_workers = options.threads
    solver.parameters.random_seed = options.seed
    solver.parameters.relative_gap_limit = options.gap
    # Energetic and time-tabling reasoning in NoOverlap2D: on the 16-GPU PPO
    # instance it turns a 6 % gap after 120 s into a proof (compare.exactbench).
    solver.parameters.use_timetabling_in_no_overlap_2d = True
    solver.parameters.use_energetic_reasoning_in_no_overlap_2d = True
    solver.parameters.use_area_energetic_reasoning_in_no_overlap_2d = True
    if options.verbose:
        solver.parameters.log_search_progress = True
        solver.parameters.log_to_stdout = False
        solver.log_callback = lambda line: print(line, file=sys.stderr)
    callback = _Progress(built.vars, formulation.unit, options)
    # SIGINT and SIGTERM reach rpeg.stop, which stops the search (not CP-SAT's own handler).
    solver.parameters.catch_sigint_signal = False
    with stop.on_stop(solver.StopSearch):
        status = solver.Solve(built.model, callback)
    stats.update(
        {
            **built.sizes(),
            **formulation.stats,
            "cp_status": solver.StatusName(status),
            "cp_wall_time_s": solver.WallTime(),
            "branches": solver.NumBranches(),
            "conflicts": solver.NumConflicts(),
            "first_solution_s": callback.first_solution_time,
        }
    )
    if status == cp_model.INFEASIBLE:
        # The hinted heuristic plan is feasible, so this can only be a modelling error.
        return Result(
            Status.ERROR,
            "cpsat",
            k_eval=problem.instance.k_eval,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message="CP-SAT reports infeasible although a feasible plan was hinted",
            requested_gap=options.gap,
        )
    bound = solver.BestObjectiveBound() * formulation.unit
    stats["cp_bound_s"] = bound
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return start_result(bound, "CP-SAT found no plan in time; the warm-start plan is reported")
    objective = solver.ObjectiveValue() * formulation.unit
    stats["cp_objective_s"] = objective
    plan = formulation.plan_from_choice(*built.vars.chosen(solver))
    result = plan_result(
        problem, "cpsat", plan, started, bound=bound, requested_gap=options.gap, stats=stats
    )
    tolerance = formulation.rounding_tolerance()
    if result.makespan is not None and abs(result.makespan - objective) > tolerance:
        result.status = Status.ERROR
        result.message = (
            f"CP-SAT objective {objective:.6f} s differs from its simulated plan "
            f"{result.makespan:.6f} s by more than the time-unit tolerance {tolerance:.2e} s"
        )
        return result
    stats["solver_plan_makespan_s"] = result.stats["solver_plan_makespan_s"] = result.makespan
    if result.makespan is not None and upper < result.makespan:
        # Flooring lets the model rank plans a rounding error apart either way.
        return start_result(
            bound, "the CP-SAT plan simulates slower than the warm start, which is reported"
        )
    return result


def solve(problem: Problem, options: SolveOptions) -> Result:
    """CP-SAT warm-started from the better baseline improved by a short local search."""
    from solvers.local import warm_start_plan

    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "cpsat", started)
    if infeasible is not None:
        return infeasible
    start = warm_start_plan(problem, options)
    if start is None:
        return plan_result(
            problem,
            "cpsat",
            None,
            started,
            requested_gap=options.gap,
            message="no heuristic plan to start from",
        )
    remaining = options.time_limit - (time.perf_counter() - started)
    result = solve_with_hint(problem, options, start, remaining)
    result.wall_time = time.perf_counter() - started
    return result
