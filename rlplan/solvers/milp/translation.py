"""The formulation's rows as MILP rows: columns, constraint families, warm-start values.

Each constraint family of :class:`MilpModel` writes the backend-neutral rows
of :mod:`rlplan.formulation.rows` (and the formulation's load and area
inequalities) as sparse rows of a :class:`rlplan.solvers.milp.sparse.LinearModel`:
a condition becomes a 0/1 expression that switches its row off by a big-M or
by scaling the lag. Times are in seconds (integer units times the unit).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from rlplan.formulation import Formulation, build_formulation, rows, windows
from rlplan.formulation.framework import ImplicationRow, framework_rows
from rlplan.rpeg.evaluation.period import cycle_offsets
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.common import Deadline
from rlplan.solvers.milp.pyomo_export import write_model
from rlplan.solvers.milp.sparse import Expr, LinearModel

GB = 1e9


class MilpVariables:
    """The decision variables of the MILP; warm starts go through :meth:`warm_start`."""

    def __init__(self, model: LinearModel, formulation: Formulation) -> None:
        f = formulation
        self.model, self.formulation = model, f
        self.unit = f.unit
        self.horizon = f.horizon * f.unit
        self.choose = model.variables(
            "choose",
            [(v, a) for v in range(f.num_vertices) for a in range(len(f.assignments[v]))],
            0,
            1,
            binary=True,
        )
        # Block indicators: on_block[v, b] = Σ choose[v, a] over assignments on b
        # (set by ``_select_one_candidate``); they keep every block-level sum short.
        self.on_block = model.variables(
            "on_block", [(v, b) for v in range(f.num_vertices) for b in f.blocks_of(v)], 0, 1
        )
        self.staleness = model.variables(
            "staleness_is",
            [(m, s) for m, choices in f.staleness_choices.items() for s in choices],
            0,
            1,
            binary=True,
        )
        self.run_start = model.variables("run_start", range(f.num_runs), 0, self.horizon)
        # Chosen duration per vertex (= Σ duration·x, set by ``_select_one_candidate``),
        # so every precedence and ordering row holds one term instead of the whole sum.
        self.duration = model.variables("duration", range(f.num_vertices), 0, self.horizon)
        # Steady state: the period T (s), at most the start plan's (rounded up).
        self.period_bound = (math.ceil(f.upper_bound / f.unit) + 1) * f.unit
        self.makespan = model.variables(
            "makespan", [None], 0, self.period_bound if f.steady else self.horizon
        )
        self.pairs = [] if f.steady else f.conflict_pairs()
        # before[i] = 1 when the first run of ordering pair i goes first.
        self.before = model.variables("before", range(len(self.pairs)), 0, 1, binary=True)
        # Steady state: per turn row, shares[i] and one offset turn[i, q].
        self.turns = list(rows.turn_rows(f)) if f.steady else []
        if f.steady:
            self.shares = model.variables("shares", range(len(self.turns)), 0, 1, binary=True)
            self.turn = model.variables(
                "turn",
                [(i, q) for i, row in enumerate(self.turns) for q in row.offsets],
                0,
                1,
                binary=True,
            )
        template = f.problem.directory.template
        self.models = sorted({vertex.model for vertex in template.vertices})
        self.units = f.maximal_units()
        capacity = f.memory_capacity / GB
        self.resident = model.variables(
            "resident",
            [(name, u) for name in self.models for u in range(len(self.units))],
            0,
            capacity,
        )
        self.transient = model.variables("transient", range(len(self.units)), 0, capacity)
        # Colocation of each rollout engine and the seconds it adds to its duration.
        self.colocated = model.variables("colocated", f.engines, 0, 1, binary=True)
        self.colocation = model.variables("colocation", f.engines, 0, self.horizon)
        # Host memory per node (GB): per model, and per sleeping engine.
        self.host_rows = list(rows.host_memory_rows(f))
        host_capacity = f.host_capacity / GB
        self.host = model.variables(
            "host",
            [(name, row.node) for row in self.host_rows for name in row.models],
            0,
            host_capacity,
        )
        self.engine_host = model.variables(
            "engine_host",
            [(t.vertex, row.node) for row in self.host_rows for t in row.vertices if t.engine],
            0,
            host_capacity,
        )

    # -- expressions -------------------------------------------------------------------

    def duration_of_choice(self, vertex: int) -> Expr:
        """``duration[vertex]`` (s): Σ duration·x, plus ``colocation`` for an engine."""
        f = self.formulation
        total = Expr.total(
            (self.choose.col((vertex, i)), a.duration * f.unit)
            for i, a in enumerate(f.assignments[vertex])
        )
        if vertex in f.engines:
            total = total + self.colocation[vertex]
        return total

    def end(self, run: int) -> Expr:
        """End of ``run`` (s)."""
        return self.run_start[run] + self.duration[run % self.formulation.num_vertices]

    def chosen_sum(self, vertex: int, indices: Iterable[int]) -> Expr:
        """Sum of the assignment binaries ``indices`` of ``vertex`` (0/1: one is chosen)."""
        return Expr.total((self.choose.col((vertex, i)), 1.0) for i in indices)

    def on_blocks(self, vertex: int, blocks: Iterable[int]) -> Expr:
        """1 when ``vertex`` is on one of ``blocks``."""
        return Expr.total((self.on_block.col((vertex, b)), 1.0) for b in blocks)

    def covers(self, vertex: int, unit: tuple[int, int]) -> Expr:
        """1 when ``vertex``'s block covers the GPU unit ``unit``.

        Equal to the sum of the assignment binaries covering ``unit`` (each
        block indicator is the sum of its assignments), in far fewer terms.
        """
        return self.on_blocks(vertex, self.formulation.covering_blocks(vertex, unit))

    # -- warm start ----------------------------------------------------------------------

    def warm_start(
        self, chosen: list[int], staleness: dict[str, int], starts: list[int]
    ) -> np.ndarray:
        """Every column's value in the heuristic plan (as converted by the formulation)."""
        f = self.formulation
        values = np.zeros(self.model.num_columns)
        durations = f.durations(chosen)
        for vertex, items in enumerate(f.assignments):
            values[self.choose.col((vertex, chosen[vertex]))] = 1.0
            values[self.on_block.col((vertex, f.block_index[items[chosen[vertex]].block]))] = 1.0
            values[self.duration.col(vertex)] = durations[vertex] * f.unit
        colocated = f.colocated_of(chosen)
        for engine in f.engines:
            values[self.colocated.col(engine)] = float(colocated[engine])
            switch = f.assignments[engine][chosen[engine]].switch if colocated[engine] else 0
            values[self.colocation.col(engine)] = switch * f.unit
        self._host_start(values, chosen, colocated)
        for m, value in staleness.items():
            if (m, value) in self.staleness.index:
                values[self.staleness.col((m, value))] = 1.0
        for run, start in enumerate(starts[: f.num_runs]):
            values[self.run_start.col(run)] = start * f.unit
        if f.steady:
            values[self.makespan.col()] = starts[-1] * f.unit
            self._turn_start(values, chosen, starts)
        else:
            values[self.makespan.col()] = max(f.run_ends(chosen, starts)) * f.unit
        for index, (r1, r2, _) in enumerate(self.pairs):
            values[self.before.col(index)] = float(starts[r1] <= starts[r2])
        template = f.problem.directory.template
        for u, unit in enumerate(self.units):
            for vertex in range(f.num_vertices):
                if chosen[vertex] not in f.covering(vertex, unit):
                    continue
                item = f.assignments[vertex][chosen[vertex]]
                column = self.resident.col((template.vertices[vertex].model, u))
                values[column] = max(values[column], item.resident / GB)
                column = self.transient.col(u)
                values[column] = max(values[column], item.transient / GB)
        return values

    def _turn_start(self, values: np.ndarray, chosen: list[int], starts: list[int]) -> None:
        """The turn columns of a steady-state warm start: its cyclic order's offsets."""
        f = self.formulation
        blocks = [f.assignments[v][a].block for v, a in enumerate(chosen)]
        cover = [
            [other for other, block in enumerate(blocks) if block.intersects(blocks[vertex])]
            for vertex in range(f.num_vertices)
        ]
        offsets = cycle_offsets(f.cyclic_order(starts), cover)
        for index, row in enumerate(self.turns):
            pair = (row.first, row.second)
            q = offsets.get(pair, offsets.get(pair[::-1]))
            if pair not in offsets and q is not None:
                q = 1 - q  # (v, t) before (u, t + q') is (u, t) before (v, t + 1 - q')
            shared = q is not None
            values[self.shares.col(index)] = float(shared)
            chosen_q = q if shared and q in row.offsets else 0
            values[self.turn.col((index, chosen_q))] = 1.0

    def _host_start(self, values: np.ndarray, chosen: list[int], colocated: tuple) -> None:
        """The host-memory columns of the warm start: the largest chosen terms, in GB."""
        for row in self.host_rows:
            for terms in row.vertices:
                held = dict(terms.terms).get(chosen[terms.vertex], 0) / GB
                if terms.engine:
                    column = self.engine_host.col((terms.vertex, row.node))
                    held = held if colocated[terms.vertex] else 0.0
                else:
                    column = self.host.col((terms.model, row.node))
                values[column] = max(values[column], held)

    def chosen(self, values: np.ndarray) -> tuple[list[int], dict[str, int], list[float]]:
        """Assignment indices, staleness and run starts (units) of a solution vector."""
        f = self.formulation
        chosen = [
            max(range(len(items)), key=lambda i, v=vertex: values[self.choose.col((v, i))])
            for vertex, items in enumerate(f.assignments)
        ]
        staleness = {
            m: max(choices, key=lambda s, m=m: values[self.staleness.col((m, s))])
            for m, choices in f.staleness_choices.items()
        }
        starts = [values[self.run_start.col(r)] / f.unit for r in range(f.num_runs)]
        if f.steady:
            starts.append(values[self.makespan.col()] / f.unit)  # the period, after the offsets
        return chosen, staleness, starts


class MilpModel:
    """Builds the MILP from a formulation, one method per constraint family.

    Parameters
    ----------
    formulation
        The backend-neutral formulation.
    deadline
        When given, building stops with :class:`rlplan.solvers.common.BuildTimeout`
        once it passes.
    """

    #: The constraint families, in build order (the ``ConstraintList`` names on export).
    FAMILIES = (
        "select_one_candidate",
        "gpu_exclusivity",
        "precedence",
        "staleness",
        "engine_colocation",
        "refit",
        "memory_capacity",
        "host_memory",
        "framework_rules",
        "objective_makespan",
        "gpu_load",
        "gpu_area",
        "busy_windows",
    )

    def __init__(self, formulation: Formulation, deadline: Deadline | None = None) -> None:
        self.formulation = formulation
        self.model = LinearModel("rl_step_plan", deadline)
        if deadline is not None:
            deadline.check("variables")
        self.vars = MilpVariables(self.model, formulation)
        self._select_one_candidate()
        self._gpu_exclusivity()
        self._precedence()
        self._staleness()
        self._engine_colocation()
        self._refit()
        self._memory_capacity()
        self._host_memory()
        self._framework_rules()
        self._objective()
        self._gpu_load()
        self._gpu_area()
        self._busy_windows()

    def _select_one_candidate(self) -> None:
        """Exactly one assignment per vertex and one staleness per trained model."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("select_one_candidate")
        for vertex, items in enumerate(f.assignments):
            model.add(v.chosen_sum(vertex, range(len(items))) == 1)
            for block in f.blocks_of(vertex):
                on_block = v.chosen_sum(vertex, f.assignments_on(vertex, block))
                model.add(v.on_block[vertex, block] == on_block)
            model.add(v.duration[vertex] == v.duration_of_choice(vertex))
        for m, choices in f.staleness_choices.items():
            model.add(Expr.total((v.staleness.col((m, s)), 1.0) for s in choices) == 1)

    def _gpu_exclusivity(self) -> None:
        """Two runs sharing a GPU unit go one after the other (big-M = horizon).

        Steady state: two vertices sharing a GPU take turns modulo the period
        (:class:`rlplan.formulation.rows.TurnRow`, :meth:`_turns`).
        """
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("gpu_exclusivity")
        if f.steady:
            self._turns()
            return
        big_m = v.horizon
        for index, (r1, r2, units) in enumerate(v.pairs):
            v1, v2 = r1 % f.num_vertices, r2 % f.num_vertices
            order = v.before[index]
            for unit in units:
                both = v.covers(v1, unit) + v.covers(v2, unit)
                model.add(v.run_start[r2] >= v.end(r1) - big_m * (1 - order) - big_m * (2 - both))
                model.add(v.run_start[r1] >= v.end(r2) - big_m * order - big_m * (2 - both))

    def _turns(self) -> None:
        """``shares >= Σ of a pair of meeting blocks - 1``; one ``turn[i, q]``; when both,
        ``start[v] + q·T >= end[u]`` and ``start[u] + (1 - q)·T >= end[v]`` (big-M: the
        offsets' horizon plus |q| + 2 periods bounds either side)."""
        v, model = self.vars, self.model
        period = v.makespan[None]
        for index, row in enumerate(v.turns):
            shares = v.shares[index]
            for one, other in row.shares:
                model.add(shares >= self._condition(one) + self._condition(other) - 1)
            model.add(Expr.total((v.turn.col((index, q)), 1.0) for q in row.offsets) == 1)
            first, second = row.first, row.second
            for q in row.offsets:
                off = 2 - v.turn[index, q] - shares
                big_m = v.horizon + (abs(q) + 2) * v.period_bound
                model.add(v.run_start[second] + q * period >= v.end(first) - big_m * off)
                model.add(v.run_start[first] + (1 - q) * period >= v.end(second) - big_m * off)

    def _condition(self, condition: rows.Condition) -> Expr:
        """The 0/1 expression of a row condition."""
        v = self.vars
        if isinstance(condition, rows.StalenessIs):
            return v.staleness[condition.model, condition.value]
        if isinstance(condition, rows.OnBlocks):
            return v.on_blocks(condition.vertex, condition.blocks)
        return v.chosen_sum(condition.vertex, condition.indices)

    def _precedence(self) -> None:
        """Chain edges, and data edges with their exact pairwise lags.

        The plain precedence of a data edge always holds, so a lag row needs
        no big-M: ``run_start >= run_end + lag * (Σ conditions - (k - 1))``.
        """
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("precedence")
        for row in itertools.chain(rows.chain_rows(f), rows.data_rows(f)):
            switched = Expr()
            for condition in row.conditions:
                switched = switched + self._condition(condition)
            on = switched - (len(row.conditions) - 1) if row.conditions else 1.0
            model.add(self._start(row) >= v.end(row.before) + row.lag * f.unit * on)

    def _staleness(self) -> None:
        """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

        A synchronous edge (old log-probs) has σ = 0 whatever is chosen. A row
        with k conditions is switched off by ``(big-M + lag) * (k - Σ conditions)``.
        """
        self.model.start_family("staleness")
        for row in rows.pub_rows(self.formulation):
            self._switched_lag_row(row)

    def _start(self, row: rows.LagRow) -> Expr:
        """The left side of a lag row: the later run's start, plus periods·T (steady state)."""
        start = self.vars.run_start[row.after]
        if row.periods:
            start = start + row.periods * self.vars.makespan[None]
        return start

    def _switched_lag_row(self, row: rows.LagRow) -> None:
        """``start >= end + lag``, switched off by ``(big-M + lag) * (k - Σ conditions)``."""
        f, v = self.formulation, self.vars
        lag = row.lag * f.unit
        # Steady state: periods·T on the left, and a period's run length in the big-M.
        start = self._start(row)
        if not row.conditions:
            self.model.add(start >= v.end(row.before) + lag)
            return
        switched = Expr()
        for condition in row.conditions:
            switched = switched + self._condition(condition)
        big_m = v.horizon + lag + (v.period_bound if f.steady else 0.0)
        self.model.add(start >= v.end(row.before) + lag - big_m * (len(row.conditions) - switched))

    def _engine_colocation(self) -> None:
        """A rollout engine sharing a GPU is colocated, and then pays its wake and sleep.

        ``colocated[g] >= Σ conditions - (k - 1)``; ``colocation[g] >=
        switch·unit·(choose[g,a] + colocated[g] - 1)`` per assignment.
        """
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("engine_colocation")
        for row in rows.colocation_rows(f):
            switched = Expr()
            for condition in row.conditions:
                switched = switched + self._condition(condition)
            model.add(v.colocated[row.engine] >= switched - (len(row.conditions) - 1))
        for terms in rows.switch_terms(f):
            engine = terms.engine
            for index, units in terms.terms:
                both = v.choose[engine, index] + v.colocated[engine] - 1
                model.add(v.colocation[engine] >= units * f.unit * both)

    def _refit(self) -> None:
        """Refits of a rollout engine from its trainer on its own block (CUDA IPC)."""
        self.model.start_family("refit")
        for row in rows.refit_rows(self.formulation):
            self._switched_lag_row(row)

    def _host_memory(self) -> None:
        """Per node: Σ over models of the largest host bytes + sleeping engines ≤ capacity (GB)."""
        v, model = self.vars, self.model
        model.start_family("host_memory")
        for row in v.host_rows:
            total = Expr.total((v.host.col((name, row.node)), 1.0) for name in row.models)
            for terms in row.vertices:
                if terms.engine:
                    column = v.engine_host[terms.vertex, row.node]
                    for index, size in terms.terms:
                        both = v.choose[terms.vertex, index] + v.colocated[terms.vertex] - 1
                        model.add(column >= (size / GB) * both)
                    total = total + column
                    continue
                model.add(
                    v.host[terms.model, row.node]
                    >= Expr.total(
                        (v.choose.col((terms.vertex, i)), size / GB) for i, size in terms.terms
                    )
                )
            model.add(total <= row.capacity / GB)

    def _framework_rules(self) -> None:
        """The framework's cross-vertex rules (docs/formulation.md#framework-rules).

        An implication is ``condition <= sum(then)``; an exclusion of k
        conditions is ``sum(conditions) <= k - 1``.
        """
        model = self.model
        model.start_family("framework_rules")
        for row in framework_rows(self.formulation):
            if isinstance(row, ImplicationRow):
                model.add(self._condition(row.condition) - self._condition(row.then) <= 0)
            else:
                total = Expr()
                for condition in row.conditions:
                    total = total + self._condition(condition)
                model.add(total <= len(row.conditions) - 1)

    def _memory_capacity(self) -> None:
        """Per GPU unit: Σ over models of the largest resident + largest transient ≤ capacity."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("memory_capacity")
        unit_index = {unit: u for u, unit in enumerate(v.units)}
        for row in rows.memory_rows(f):
            u = unit_index[row.unit]
            for terms in row.vertices:
                model.add(
                    v.resident[terms.model, u]
                    >= Expr.total(
                        (v.choose.col((terms.vertex, i)), size / GB) for i, size in terms.resident
                    )
                )
                model.add(
                    v.transient[u]
                    >= Expr.total(
                        (v.choose.col((terms.vertex, i)), size / GB) for i, size in terms.transient
                    )
                )
            total = Expr.total((v.resident.col((name, u)), 1.0) for name in sorted(row.models))
            model.add(total + v.transient[u] <= row.capacity / GB)

    def _objective(self) -> None:
        """Minimise the makespan of the k_eval steps."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("objective_makespan")
        for vertex in range(0 if f.steady else f.num_vertices):  # steady state: T alone
            model.add(v.makespan[None] >= v.end(f.run(vertex, f.k_eval - 1)))
        model.minimise(v.makespan.col())

    def _gpu_load(self) -> None:
        """Valid inequality: the makespan covers each GPU unit's total run time, plus
        the first generation when it runs elsewhere (``Formulation.load_rows``).

        Implied by ``_gpu_exclusivity`` and ``_precedence`` for integer
        solutions; it tightens the LP relaxation, which the big-M ordering
        alone leaves weak.
        """
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("gpu_load")
        for _, terms in f.load_rows():
            model.add(
                v.makespan[None]
                >= Expr.total(
                    (v.choose.col((vertex, i)), coefficient * f.unit)
                    for vertex, i, coefficient in terms
                )
            )

    def _gpu_area(self) -> None:
        """Valid inequality: the GPU-seconds of all runs fit in ``num_gpus x makespan``."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("gpu_area")
        gpus = f.problem.directory.cluster.num_gpus
        area = Expr.total(
            (v.choose.col((vertex, i)), coefficient * f.unit)
            for vertex, i, coefficient in rows.area_terms(f)
        )
        model.add(gpus * v.makespan[None] >= area)

    def _busy_windows(self) -> None:
        """Valid inequality: the runs between two runs fit in the GPU-seconds between them
        (:func:`rlplan.formulation.windows.window_rows`)."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("busy_windows")
        for row in windows.window_rows(f):
            start = v.makespan[None] if row.before is None else v.run_start[row.before]
            end = 0.0 if row.after is None else v.end(row.after)
            area = Expr.total(
                (v.choose.col((vertex, i)), coefficient * f.unit)
                for vertex, i, coefficient in row.terms
            )
            model.add(row.gpus * (start - end) >= area)

    def sizes(self) -> dict[str, int]:
        """Model size: binaries, continuous variables, constraints, nonzeros."""
        binaries = sum(self.model.col_binary)
        return {
            "binaries": binaries,
            "continuous": self.model.num_columns - binaries,
            "constraints": self.model.num_rows,
            "nonzeros": self.model.nonzeros,
            "ordering_pairs": len(self.vars.pairs),
        }

    def write(self, path: str, file_format: str, values: np.ndarray | None = None) -> None:
        """Write the model as an MPS or LP file (atomically), through Pyomo's writers."""
        write_model(self.model, path, file_format, values)


@dataclass
class BuiltMilp:
    """A formulation, its MILP and the warm-start column values."""

    formulation: Formulation
    milp: MilpModel
    start_values: np.ndarray | None


def build_model(problem: Problem, start: Plan, deadline: Deadline | None = None) -> BuiltMilp:
    """The formulation and MILP built from a heuristic start plan, with its warm start.

    Raises
    ------
    solvers.common.BuildTimeout
        When ``deadline`` passes while building.
    """
    formulation = build_formulation(problem, problem.simulator.evaluate(start).makespan)
    if deadline is not None:
        deadline.check("formulation")
    built = MilpModel(formulation, deadline)
    if deadline is not None:
        deadline.check("warm start")
    values = built.vars.warm_start(*formulation.warm_start(start))
    return BuiltMilp(formulation, built, values)
