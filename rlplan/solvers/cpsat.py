"""Backend ``cpsat``: the exact formulation in OR-Tools CP-SAT.

Variables (owned by :class:`CpSatVariables`): ``choose[v,a]``, one Boolean
per (vertex, block, candidate) assignment with exactly one true per vertex;
``on_block[v,b]`` per (vertex, block); ``staleness_is[m,s]``; per run
``run_start``, ``run_end`` and an interval whose length is the chosen
``duration``; per vertex a GPU-range interval; the ``makespan``.

The lag, memory, load and area rows come from :mod:`rlplan.formulation.rows` and
:meth:`rlplan.formulation.Formulation.load_rows`, shared with the MILP; this module
only writes them in CP-SAT's API.

Constraint families (the same names as in ``rlplan.solvers.milp``):
``_select_one_candidate``, ``_gpu_exclusivity`` (NoOverlap2D over time x GPU
range), ``_precedence`` (data and chain edges with exact pairwise lags),
``_staleness`` (pub edges switched on by the staleness Booleans, with their
exact lags), ``_engine_colocation`` (a rollout engine sharing a GPU wakes and
sleeps), ``_refit`` (CUDA IPC refits on the engine's block),
``_memory_capacity`` (per-GPU static residency rule, linear),
``_host_memory`` (per-node host memory),
``_objective`` (makespan of ``k_eval`` steps), ``_gpu_load`` (redundant:
the makespan covers each GPU unit's total run time) and ``_gpu_area``
(redundant: all runs' GPU-seconds fit in the cluster's).

Durations and lags are rounded down to the time unit of the formulation, so
the proven bound is a valid lower bound on the true optimum. Symmetry
breaking (the generation block starts first among its mirror images when
mirroring GPU indices is a symmetry of the cluster) is part of the formulation
(:func:`rlplan.formulation.model.symmetry_root`).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable

from ortools.sat.python import cp_model

from rlplan.formulation import Formulation, rows, windows
from rlplan.formulation.framework import ImplicationRow, framework_rows
from rlplan.rpeg import interrupts
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.common import Deadline, plan_result, unplaceable_result, within_space
from rlplan.solvers.exact_driver import ExactOutcome, solve_exact
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result
from rlplan.solvers.templates import each_template

#: Inner-loop iterations between two deadline checks while building.
TICKS_PER_CHECK = 32


class CpSatVariables:
    """The decision variables of the CP-SAT model; warm starts go through :meth:`warm_start`.

    Names (as they appear in an exported model): ``choose[v,a]`` one Boolean
    per (vertex, assignment), ``on_block[v,b]`` per (vertex, block),
    ``staleness_is[m,s]`` per trained model and value, ``duration[v]``,
    ``gpu_first[v]`` / ``gpu_count[v]`` / ``gpu_end[v]`` and the interval
    ``gpus[v]`` of each vertex's GPU range, ``run_start[r]`` / ``run_end[r]``
    and the interval ``run[r]`` of each run, ``colocated[g]`` and
    ``colocation[g]`` of each rollout engine, and ``makespan``.
    """

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
        num_gpus = f.problem.directory.cluster.num_gpus
        self.choose = [
            [model.new_bool_var(f"choose[{v},{a}]") for a in range(len(items))]
            for v, items in enumerate(f.assignments)
        ]
        self.on_block: list[dict[int, cp_model.IntVar]] = []
        for vertex, items in enumerate(f.assignments):
            per_block: dict[int, list] = {}
            for literal, assignment in zip(self.choose[vertex], items, strict=True):
                per_block.setdefault(f.block_index[assignment.block], []).append(literal)
            literals = {}
            for block, members in per_block.items():
                tick()
                literal = model.new_bool_var(f"on_block[{vertex},{block}]")
                model.add(literal == cp_model.LinearExpr.sum(members))
                literals[block] = literal
            self.on_block.append(literals)
        self.staleness = {
            m: {value: model.new_bool_var(f"staleness_is[{m},{value}]") for value in choices}
            for m, choices in f.staleness_choices.items()
        }
        # Colocation of each rollout engine and what it adds to its duration
        # (rows in CpSatModel._engine_colocation).
        self.colocated = {
            engine: model.new_bool_var(f"colocated[{engine}]") for engine in f.engines
        }
        self.colocation = {
            engine: model.new_int_var(
                0, max(a.switch for a in f.assignments[engine]), f"colocation[{engine}]"
            )
            for engine in f.engines
        }
        self.duration = []
        self.gpu_first = []
        self.gpu_count = []
        self.gpu_interval = []
        for vertex, items in enumerate(f.assignments):
            tick()
            low = min(a.duration for a in items)
            high = max(a.duration for a in items)
            extra = self.colocation.get(vertex)
            if extra is not None:
                high += max(a.switch for a in items)
            duration = model.new_int_var(low, high, f"duration[{vertex}]")
            chosen = cp_model.LinearExpr.weighted_sum(
                self.choose[vertex], [a.duration for a in items]
            )
            model.add(duration == (chosen if extra is None else chosen + extra))
            first = model.new_int_var(0, num_gpus, f"gpu_first[{vertex}]")
            count = model.new_int_var(1, num_gpus, f"gpu_count[{vertex}]")
            model.add(
                first
                == cp_model.LinearExpr.weighted_sum(
                    self.choose[vertex], [a.block.start for a in items]
                )
            )
            model.add(
                count
                == cp_model.LinearExpr.weighted_sum(
                    self.choose[vertex], [a.block.size for a in items]
                )
            )
            end = model.new_int_var(1, num_gpus, f"gpu_end[{vertex}]")
            self.duration.append(duration)
            self.gpu_first.append(first)
            self.gpu_count.append(count)
            self.gpu_interval.append(model.new_interval_var(first, count, end, f"gpus[{vertex}]"))
        self.run_start, self.run_end, self.run_interval = [], [], []
        for run in range(f.num_runs):
            vertex = run % f.num_vertices
            start = model.new_int_var(0, horizon, f"run_start[{run}]")
            end = model.new_int_var(0, horizon, f"run_end[{run}]")
            self.run_start.append(start)
            self.run_end.append(end)
            self.run_interval.append(
                model.new_interval_var(start, self.duration[vertex], end, f"run[{run}]")
            )
        # Steady state: the period T, the objective (its bound: the start plan's period).
        if f.steady:
            self.makespan = model.new_int_var(0, math.ceil(f.upper_bound / f.unit) + 1, "period")
        else:
            self.makespan = model.new_int_var(0, horizon, "makespan")

    def warm_start(self, chosen: list[int], staleness: dict[str, int], starts: list[int]) -> None:
        """Hint a complete solution (a heuristic plan as converted by the formulation)."""
        model, f = self.model, self.formulation
        for vertex, index in enumerate(chosen):
            for a, literal in enumerate(self.choose[vertex]):
                model.add_hint(literal, a == index)
            block = f.block_index[f.assignments[vertex][index].block]
            for b, literal in self.on_block[vertex].items():
                model.add_hint(literal, b == block)
        for m, literals in self.staleness.items():
            for value, literal in literals.items():
                model.add_hint(literal, value == staleness[m])
        colocated = f.colocated_of(chosen)
        for engine, literal in self.colocated.items():
            model.add_hint(literal, colocated[engine])
            switch = f.assignments[engine][chosen[engine]].switch
            model.add_hint(self.colocation[engine], switch if colocated[engine] else 0)
        ends = f.run_ends(chosen, starts)
        for run, start in enumerate(starts[: f.num_runs]):
            model.add_hint(self.run_start[run], start)
            model.add_hint(self.run_end[run], ends[run])
        model.add_hint(self.makespan, starts[-1] if f.steady else max(ends))

    def chosen(self, solver: cp_model.CpSolver) -> tuple[list[int], dict[str, int], list[int]]:
        """Assignment indices, staleness and run starts of the solver's solution."""
        chosen = [
            next(a for a, x in enumerate(literals) if solver.boolean_value(x))
            for literals in self.choose
        ]
        staleness = {
            m: next(value for value, x in literals.items() if solver.boolean_value(x))
            for m, literals in self.staleness.items()
        }
        starts = [solver.value(s) for s in self.run_start]
        if self.formulation.steady:
            starts.append(solver.value(self.makespan))  # the period, after the offsets
        return chosen, staleness, starts


class CpSatModel:
    """Builds the CP-SAT model from a formulation, one method per constraint family.

    The rows come from :mod:`rlplan.formulation.rows` (the same rows as the MILP's);
    each condition of a row becomes an enforcement literal.

    Parameters
    ----------
    formulation
        The backend-neutral formulation.
    deadline
        When given, checked before each family and inside the long ones:
        building stops with :class:`rlplan.solvers.common.BuildTimeout` once it passes.
    """

    def __init__(self, formulation: Formulation, deadline: Deadline | None = None) -> None:
        self.formulation = formulation
        self.deadline = deadline
        self._ticks = 0
        self.model = cp_model.CpModel()
        self._check("variables")
        self.vars = CpSatVariables(self.model, formulation, self._tick)
        self._condition_literals: dict[rows.Condition, cp_model.IntVar] = {}
        for family in (
            self._select_one_candidate,
            self._gpu_exclusivity,
            self._precedence,
            self._staleness,
            self._engine_colocation,
            self._refit,
            self._memory_capacity,
            self._host_memory,
            self._framework_rules,
            self._objective,
            self._gpu_load,
            self._gpu_area,
            self._busy_windows,
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

    # -- condition literals --------------------------------------------------------------

    def _literal(self, condition: rows.Condition) -> cp_model.IntVar:
        """The literal of a row condition (one per distinct condition)."""
        if isinstance(condition, rows.StalenessIs):
            return self.vars.staleness[condition.model][condition.value]
        if isinstance(condition, rows.OnBlocks) and len(condition.blocks) == 1:
            return self.vars.on_block[condition.vertex][condition.blocks[0]]
        if isinstance(condition, rows.Chooses) and len(condition.indices) == 1:
            return self.vars.choose[condition.vertex][condition.indices[0]]
        literal = self._condition_literals.get(condition)
        if literal is None:
            if isinstance(condition, rows.OnBlocks):
                name = f"source_on[{condition.vertex},{len(self._condition_literals)}]"
                members = [self.vars.on_block[condition.vertex][b] for b in condition.blocks]
            else:
                name = f"source_layout[{condition.vertex},{len(self._condition_literals)}]"
                members = [self.vars.choose[condition.vertex][a] for a in condition.indices]
            literal = self.model.new_bool_var(name)
            self.model.add(literal == cp_model.LinearExpr.sum(members))
            self._condition_literals[condition] = literal
        return literal

    def _lag_row(self, row: rows.LagRow) -> None:
        """``run_start[after] >= run_end[before] + lag``, enforced by the row's conditions."""
        v = self.vars
        start = v.run_start[row.after]
        if row.periods:
            start = start + row.periods * v.makespan  # the period T (steady state)
        constraint = self.model.add(start >= v.run_end[row.before] + row.lag)
        if row.conditions:
            constraint.only_enforce_if([self._literal(c) for c in row.conditions])

    # -- constraint families ----------------------------------------------------------------

    def _select_one_candidate(self) -> None:
        """Exactly one assignment per vertex and one staleness per trained model."""
        for literals in self.vars.choose:
            self.model.add_exactly_one(literals)
        for literals in self.vars.staleness.values():
            self.model.add_exactly_one(literals.values())

    def _gpu_exclusivity(self) -> None:
        """Runs whose GPU ranges intersect do not overlap in time (NoOverlap2D).

        Steady state: two vertices sharing a GPU take turns modulo the period
        (:class:`rlplan.formulation.rows.TurnRow`): ``shares[u,v]`` is forced
        by a pair of blocks that meet, and one offset q holds then.
        """
        f = self.formulation
        if f.steady:
            self._turns()
            return
        if f.sliced:
            self._node_exclusivity()
            return
        self.model.add_no_overlap_2d(
            self.vars.run_interval,
            [self.vars.gpu_interval[run % f.num_vertices] for run in range(f.num_runs)],
        )

    def _node_exclusivity(self) -> None:
        """:meth:`_gpu_exclusivity` with sliced blocks: one GPU interval per vertex and node.

        A sliced block's GPUs are no range, but its GPUs on each node are (so
        are a contiguous block's): ``gpus[v,n]`` is the chosen block's range
        on node ``n``, present when that block has GPUs there, and every run
        is one box per node of its vertex in one NoOverlap2D.
        """
        f, v, model = self.formulation, self.vars, self.model
        cluster = f.problem.directory.cluster
        boxes_time, boxes_gpus = [], []
        for vertex in range(f.num_vertices):
            self._tick()
            for node, terms in f.node_terms(vertex).items():
                literals = [v.choose[vertex][index] for index, _, _ in terms]
                present = model.new_bool_var(f"on_node[{vertex},{node}]")
                model.add(present == sum(literals))
                num_gpus = cluster.num_gpus
                first = model.new_int_var(0, num_gpus, f"gpu_first[{vertex},{node}]")
                count = model.new_int_var(0, num_gpus, f"gpu_count[{vertex},{node}]")
                model.add(
                    first == cp_model.LinearExpr.weighted_sum(literals, [t[1] for t in terms])
                )
                model.add(
                    count == cp_model.LinearExpr.weighted_sum(literals, [t[2] for t in terms])
                )
                end = model.new_int_var(0, num_gpus, f"gpu_end[{vertex},{node}]")
                interval = model.new_optional_interval_var(
                    first, count, end, present, f"gpus[{vertex},{node}]"
                )
                for run in range(vertex, f.num_runs, f.num_vertices):
                    boxes_time.append(v.run_interval[run])
                    boxes_gpus.append(interval)
        model.add_no_overlap_2d(boxes_time, boxes_gpus)

    def _turns(self) -> None:
        """The steady-state GPU exclusivity (:meth:`_gpu_exclusivity`)."""
        v, model = self.vars, self.model
        for row in rows.turn_rows(self.formulation):
            self._tick()
            first, second = row.first, row.second
            shares = model.new_bool_var(f"shares[{first},{second}]")
            for one, other in row.shares:
                model.add_bool_or([shares]).only_enforce_if(
                    [self._literal(one), self._literal(other)]
                )
            offsets = [model.new_bool_var(f"turn[{first},{second},{q}]") for q in row.offsets]
            model.add_exactly_one(offsets)
            for q, literal in zip(row.offsets, offsets, strict=True):
                model.add(v.run_start[second] + q * v.makespan >= v.run_end[first]).only_enforce_if(
                    [literal, shares]
                )
                model.add(
                    v.run_start[first] + (1 - q) * v.makespan >= v.run_end[second]
                ).only_enforce_if([literal, shares])

    def _precedence(self) -> None:
        """Chain edges, and data edges with their exact pairwise lags."""
        for row in rows.chain_rows(self.formulation):
            self._lag_row(row)
        for row in rows.data_rows(self.formulation):
            self._tick()
            self._lag_row(row)

    def _staleness(self) -> None:
        """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

        A synchronous edge (old log-probs) has σ = 0 whatever is chosen.
        """
        for row in rows.pub_rows(self.formulation):
            self._tick()
            self._lag_row(row)

    def _engine_colocation(self) -> None:
        """A rollout engine sharing a GPU is colocated, and then pays its wake and sleep.

        ``colocated[g]`` is enforced true by an engine block and another
        vertex on an overlapping block; ``colocation[g] >= switch`` by the
        chosen assignment and ``colocated[g]``.
        """
        v, model = self.vars, self.model
        for row in rows.colocation_rows(self.formulation):
            self._tick()
            model.add_bool_or([v.colocated[row.engine]]).only_enforce_if(
                [self._literal(c) for c in row.conditions]
            )
        for terms in rows.switch_terms(self.formulation):
            for index, units in terms.terms:
                self._tick()
                model.add(v.colocation[terms.engine] >= units).only_enforce_if(
                    [v.choose[terms.engine][index], v.colocated[terms.engine]]
                )

    def _refit(self) -> None:
        """Refits of a rollout engine from its trainer on its own block (CUDA IPC)."""
        for row in rows.refit_rows(self.formulation):
            self._tick()
            self._lag_row(row)

    def _host_memory(self) -> None:
        """Per node: Σ over models of the largest host bytes + sleeping engines ≤ capacity.

        ``host[m,node] >= Σ bytes·choose`` per vertex of m holding host bytes
        there; ``engine_host[g,node] >= bytes`` enforced by ``choose[g,a]`` and
        ``colocated[g]``.
        """
        f, v, model = self.formulation, self.vars, self.model
        for row in rows.host_memory_rows(f):
            self._check()
            capacity = row.capacity
            held = {
                name: model.new_int_var(0, capacity, f"host[{name},{row.node}]")
                for name in row.models
            }
            total = sum(held.values())
            for terms in row.vertices:
                literals = [v.choose[terms.vertex][i] for i, _ in terms.terms]
                if terms.engine:
                    engine = model.new_int_var(
                        0, capacity, f"engine_host[{terms.vertex},{row.node}]"
                    )
                    for (_, size), literal in zip(terms.terms, literals, strict=True):
                        model.add(engine >= size).only_enforce_if(
                            [literal, v.colocated[terms.vertex]]
                        )
                    total = total + engine
                    continue
                model.add(
                    held[terms.model]
                    >= cp_model.LinearExpr.weighted_sum(literals, [b for _, b in terms.terms])
                )
            model.add(total <= capacity)

    def _framework_rules(self) -> None:
        """The framework's cross-vertex rules (docs/formulation.md#framework-rules).

        An implication is ``sum(then) >= 1`` enforced by the condition's literal
        (the condition forbidden when ``then`` is empty); an exclusion is a
        clause of the conditions' negated literals.
        """
        v, model = self.vars, self.model
        for row in framework_rows(self.formulation):
            self._tick()
            if isinstance(row, ImplicationRow):
                then = row.then
                if isinstance(then, rows.OnBlocks):
                    members = [v.on_block[then.vertex][b] for b in then.blocks]
                else:
                    members = [v.choose[then.vertex][a] for a in then.indices]
                literal = self._literal(row.condition)
                if members:
                    model.add_bool_or(members).only_enforce_if(literal)
                else:
                    model.add(literal == 0)
            else:
                model.add_bool_or([~self._literal(c) for c in row.conditions])

    def _memory_capacity(self) -> None:
        """Per GPU: Σ over models of the largest resident + the largest transient ≤ capacity."""
        f, v, model = self.formulation, self.vars, self.model
        for row in rows.memory_rows(f):
            self._check()
            low, capacity = row.unit[0], row.capacity
            resident = {
                name: model.new_int_var(0, capacity, f"resident[{name},{low}]")
                for name in row.models
            }
            transient = model.new_int_var(0, capacity, f"transient[{low}]")
            for terms in row.vertices:
                self._tick()
                literals = [v.choose[terms.vertex][i] for i, _ in terms.resident]
                model.add(
                    resident[terms.model]
                    >= cp_model.LinearExpr.weighted_sum(literals, [b for _, b in terms.resident])
                )
                model.add(
                    transient
                    >= cp_model.LinearExpr.weighted_sum(literals, [b for _, b in terms.transient])
                )
            model.add(sum(resident.values()) + transient <= capacity)

    def _objective(self) -> None:
        """Minimise the makespan of the k_eval steps (steady state: the period)."""
        f, v, model = self.formulation, self.vars, self.model
        for vertex in range(0 if f.steady else f.num_vertices):
            model.add(v.makespan >= v.run_end[f.run(vertex, f.k_eval - 1)])
        model.minimize(v.makespan)

    def _gpu_load(self) -> None:
        """Redundant constraint: the makespan covers each GPU unit's total run time,
        plus the first generation when it runs elsewhere (``Formulation.load_rows``).

        Implied by ``_gpu_exclusivity`` and ``_precedence``; it gives the search
        a global bound early (the same rows as in the MILP).
        """
        f, v, model = self.formulation, self.vars, self.model
        for _, terms in f.load_rows():
            self._check()
            model.add(
                v.makespan
                >= cp_model.LinearExpr.weighted_sum(
                    [v.choose[vertex][i] for vertex, i, _ in terms],
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
        terms = rows.area_terms(f)
        model.add(
            gpus * v.makespan
            >= cp_model.LinearExpr.weighted_sum(
                [v.choose[vertex][i] for vertex, i, _ in terms], [c for _, _, c in terms]
            )
        )

    def _busy_windows(self) -> None:
        """Redundant constraint: the runs between two runs fit in the GPU-time between them
        (:func:`rlplan.formulation.windows.window_rows`).

        Implied by ``_gpu_exclusivity`` and ``_precedence``; unlike ``_gpu_area``
        it counts the time before a window's first run and after its last.
        """
        v, model = self.vars, self.model
        for row in windows.window_rows(self.formulation):
            self._tick()
            start = v.makespan if row.before is None else v.run_start[row.before]
            end = 0 if row.after is None else v.run_end[row.after]
            model.add(
                row.gpus * (start - end)
                >= cp_model.LinearExpr.weighted_sum(
                    [v.choose[vertex][i] for vertex, i, _ in row.terms],
                    [c for _, _, c in row.terms],
                )
            )

    def sizes(self) -> dict[str, int]:
        """Model size: Booleans, intervals, constraints."""
        proto = self.model.proto
        booleans = sum(1 for var in proto.variables if list(var.domain) == [0, 1])
        f = self.formulation
        intervals = f.num_runs + f.num_vertices
        if f.sliced:  # one GPU interval per vertex and node (_node_exclusivity)
            intervals += sum(len(f.node_terms(vertex)) for vertex in range(f.num_vertices))
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
            best=self.objective_value * self.unit, bound=self.best_objective_bound * self.unit
        )


#: With exactly two workers CP-SAT would run its default worker and a
#: first-solution/LNS helper; the warm start already is a good plan, and what
#: a proof lacks is bound, so the second worker is the one with the strongest
#: LP relaxation instead.
TWO_WORKERS = 2
TWO_WORKER_SUBSOLVERS = ("default_lp", "max_lp")

#: The linearization level of CP-SAT's max-LP worker: the one worker beside the MILP.
MAX_LP_LINEARIZATION = 2

#: Seconds between calls of CP-SAT's ``stop_search`` once a stop is requested.
STOP_RETRY_S = 0.05

#: Seconds kept after CP-SAT stops, to read its plan back and simulate it.
RESERVE_S = 0.2


class CpSatBackend:
    """CP-SAT for :func:`rlplan.solvers.exact_driver.solve_exact`: builds and solves the model."""

    label = "cpsat"
    display = "CP-SAT"
    model_name = "the CP-SAT model"
    steady_state = True

    def __init__(self, stop: threading.Event | None = None, max_lp: bool = False) -> None:
        self.built: CpSatModel | None = None
        #: Set to end the search early with its best plan (the portfolio's MILP proved first).
        self.stop = stop
        #: With one worker, make it the max-LP one (linearization level 2).
        self.max_lp = max_lp

    def build(self, formulation: Formulation, deadline: Deadline) -> dict:
        """Build the CP-SAT model; its sizes are reported once it is solved."""
        self.built = CpSatModel(formulation, deadline)
        return {}

    def warm_start(self, solution: tuple[list[int], dict[str, int], list[int]]) -> None:
        """Hint the warm start."""
        self.built.vars.warm_start(*solution)

    def cut(self, makespan: float) -> None:
        """Bound the objective by ``makespan`` (s over ``k_eval`` steps), rounded down to a unit.

        No plan of model objective at most that many units is then a proof
        that every plan's objective is above it, as CP-SAT's own bounds are.
        """
        built = self.built
        built.model.add(built.vars.makespan <= math.floor(makespan / _objective_unit(built)))

    def _solver(self, options: SolveOptions, deadline: Deadline) -> cp_model.CpSolver:
        """A solver with the time left, at most ``options.threads`` workers, and its settings."""
        solver = cp_model.CpSolver()
        parameters = solver.parameters
        parameters.max_time_in_seconds = max(0.05, deadline.remaining() - RESERVE_S)
        parameters.num_workers = options.threads
        parameters.random_seed = options.seed
        parameters.relative_gap_limit = options.gap
        # Energetic and time-tabling reasoning in NoOverlap2D: on the 16-GPU PPO
        # instance it turns a 6 % gap after 120 s into a proof (compare.exactbench).
        parameters.use_timetabling_in_no_overlap_2d = True
        parameters.use_energetic_reasoning_in_no_overlap_2d = True
        parameters.use_area_energetic_reasoning_in_no_overlap_2d = True
        if options.threads == TWO_WORKERS and os.environ.get("RLPLAN_CPSAT_DEFAULT_WORKERS") != "1":
            parameters.subsolvers.extend(TWO_WORKER_SUBSOLVERS)
        if options.threads == 1 and self.max_lp:
            # Beside the MILP: on 8 H100 one default worker leaves a 2.8 % gap after
            # 90 s, one at linearization level 2 proves (benchmarks/portfoliobench.py).
            parameters.linearization_level = MAX_LP_LINEARIZATION
        if options.verbose:
            parameters.log_search_progress = True
            parameters.log_to_stdout = False
            solver.log_callback = lambda line: print(line, file=sys.stderr)
        # SIGINT and SIGTERM reach rpeg.stop, which stops the search (not CP-SAT's own handler).
        parameters.catch_sigint_signal = False
        return solver

    def solve(self, options: SolveOptions, deadline: Deadline) -> ExactOutcome:
        """Run CP-SAT from the hint; the objective and bound come back in seconds."""
        built = self.built
        unit = _objective_unit(built)
        solver = self._solver(options, deadline)
        callback = _Progress(built.vars, unit, options)
        # Retried: a stop requested before CP-SAT has set its search up is otherwise lost.
        with (
            interrupts.on_stop(solver.stop_search, retry=STOP_RETRY_S),
            interrupts.when_set(self.stop, solver.stop_search, STOP_RETRY_S),
        ):
            status = solver.solve(built.model, callback)
        stats = {
            **built.sizes(),
            "cp_status": solver.status_name(status),
            "cp_wall_time_s": solver.wall_time,
            "branches": solver.num_branches,
            "conflicts": solver.num_conflicts,
            "first_solution_s": callback.first_solution_time,
            "cp_deterministic_time": solver.deterministic_time,
        }
        if status == cp_model.INFEASIBLE:
            return ExactOutcome(None, None, None, infeasible=True, stats=stats)
        bound = solver.best_objective_bound * unit
        stats["cp_bound_s"] = bound
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return ExactOutcome(
                None,
                None,
                bound,
                no_plan_message="CP-SAT found no plan in time; the warm-start plan is reported",
                stats=stats,
            )
        objective = solver.objective_value * unit
        stats["cp_objective_s"] = objective
        return ExactOutcome(built.vars.chosen(solver), objective, bound, stats=stats)


def _objective_unit(built: CpSatModel) -> float:
    """Seconds of simulated makespan per unit of the objective.

    Steady state: the objective is the period T, and k_eval periods are the
    simulated makespan's scale.
    """
    f = built.formulation
    return f.unit * (f.problem.instance.k_eval if f.steady else 1)


def solve_with_hint(
    problem: Problem,
    options: SolveOptions,
    start: Plan,
    time_limit: float,
    stop: threading.Event | None = None,
    max_lp: bool = False,
) -> Result:
    """Build and solve the CP-SAT model warm-started from ``start``, then check it by simulation.

    The build and the search share ``time_limit``; the result is never worse
    than ``start`` (:func:`rlplan.solvers.exact_driver.solve_exact`). Setting
    ``stop`` ends the search early with its best plan; ``max_lp`` makes a
    single worker the max-LP one.
    """
    return solve_exact(problem, options, start, time_limit, CpSatBackend(stop, max_lp))


@each_template("cpsat")  # AC-share: solve each template, keep the better
def solve(problem: Problem, options: SolveOptions) -> Result:
    """CP-SAT warm-started from the better baseline improved by a short local search."""
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
            message="no heuristic plan to start from" + within_space(problem),
        )
    remaining = options.time_limit - (time.perf_counter() - started)
    result = solve_with_hint(problem, options, start, remaining)
    result.wall_time = time.perf_counter() - started
    return result
