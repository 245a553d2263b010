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

The model is assembled as sparse rows (:class:`LinearModel`). HiGHS receives
them in one call through highspy, with the heuristic plan set as its starting
solution (``Highs.setSolution``), so the solve improves on that plan and
always has it to return. :meth:`LinearModel.to_pyomo` gives the same model in
Pyomo, which writes MPS/LP files (``main.py export``) and reaches any other
MIP solver (``milp:NAME``: gurobi, cplex, cbc, scip, ...).

Times are in seconds: the formulation's floored integer units times the unit,
so the optimum is the same as CP-SAT's on the same formulation, and a valid
lower bound on the true optimum.

The warm start, every build phase and the solver share the solve's one time
limit: building checks the deadline every few hundred rows, and when the
limit is reached before the solver runs, or the solver returns no plan, the
result is the warm-start plan with the best bound known.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import sys
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyomo.environ as pyo

from rlplan.formulation import Formulation, build_formulation, rows
from rlplan.rpeg import interrupts as stop
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.common import (
    BuildTimeout,
    Deadline,
    check_objective,
    infeasible_despite_start,
    plan_result,
    unplaceable_result,
    warm_start_result,
)
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result
from rlplan.solvers.templates import each_template

GB = 1e9

#: Rows added between two deadline checks while building.
CHECK_EVERY_ROWS = 16

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


def _pyomo_format(file_format: str):
    """Pyomo's name of an export format (its CPLEX LP writer for ``lp``)."""
    from pyomo.opt import ProblemFormat

    return {"mps": ProblemFormat.mps, "lp": ProblemFormat.cpxlp}[file_format]


# -- sparse linear model ----------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One constraint ``lower <= sum(coefficient * column) <= upper``."""

    terms: dict[int, float]
    lower: float
    upper: float


class Expr:
    """A linear expression: coefficient per column, plus a constant.

    Supports ``+``, ``-``, multiplication by a number and the comparisons
    ``>=``, ``<=``, ``==``, which give a :class:`Row`.
    """

    __slots__ = ("constant", "terms")

    def __init__(self, terms: dict[int, float] | None = None, constant: float = 0.0) -> None:
        self.terms = {} if terms is None else terms
        self.constant = constant

    @staticmethod
    def total(pairs: Iterable[tuple[int, float]]) -> Expr:
        """The sum of ``coefficient * column`` over ``(column, coefficient)`` pairs."""
        terms: dict[int, float] = {}
        for column, coefficient in pairs:
            terms[column] = terms.get(column, 0.0) + coefficient
        return Expr(terms)

    def _plus(self, other: Expr | float, sign: float) -> Expr:
        terms = dict(self.terms)
        if isinstance(other, Expr):
            for column, coefficient in other.terms.items():
                terms[column] = terms.get(column, 0.0) + sign * coefficient
            return Expr(terms, self.constant + sign * other.constant)
        return Expr(terms, self.constant + sign * other)

    def __add__(self, other: Expr | float) -> Expr:
        return self._plus(other, 1.0)

    __radd__ = __add__

    def __sub__(self, other: Expr | float) -> Expr:
        return self._plus(other, -1.0)

    def __rsub__(self, other: Expr | float) -> Expr:
        return (self * -1.0)._plus(other, 1.0)

    def __mul__(self, factor: float) -> Expr:
        return Expr({c: factor * v for c, v in self.terms.items()}, factor * self.constant)

    __rmul__ = __mul__

    def _row(self, other: Expr | float, lower: float, upper: float) -> Row:
        difference = self - other
        terms = {c: v for c, v in difference.terms.items() if v != 0.0}
        return Row(terms, lower - difference.constant, upper - difference.constant)

    def __ge__(self, other: Expr | float) -> Row:  # type: ignore[override]
        return self._row(other, 0.0, math.inf)

    def __le__(self, other: Expr | float) -> Row:  # type: ignore[override]
        return self._row(other, -math.inf, 0.0)

    def __eq__(self, other: object) -> Row:  # type: ignore[override]
        return self._row(other, 0.0, 0.0)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]


@dataclass
class VarFamily:
    """An indexed family of columns (one Pyomo ``Var`` component when exported)."""

    name: str
    keys: list[Hashable]
    first: int
    lower: float
    upper: float
    binary: bool
    index: dict[Hashable, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.index = {key: self.first + i for i, key in enumerate(self.keys)}

    def col(self, key: Hashable = None) -> int:
        """Column of ``key`` (of the single column of a scalar family by default)."""
        return self.index[key]

    def __getitem__(self, key: Hashable) -> Expr:
        return Expr({self.index[key]: 1.0})

    @property
    def scalar(self) -> bool:
        """Whether the family is one unindexed variable."""
        return self.keys == [None]


class LinearModel:
    """Columns, bounds, integrality and constraint rows, grouped into named families.

    Parameters
    ----------
    name
        Model name.
    deadline
        Checked when a constraint family starts and every
        :data:`CHECK_EVERY_ROWS` rows (raises :class:`rlplan.solvers.common.BuildTimeout`).
    """

    def __init__(self, name: str, deadline: Deadline | None = None) -> None:
        self.name = name
        self.deadline = deadline
        self.variable_families: list[VarFamily] = []
        self.col_lower: list[float] = []
        self.col_upper: list[float] = []
        self.col_binary: list[bool] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.row_start: list[int] = [0]
        self.row_index: list[int] = []
        self.row_value: list[float] = []
        self.row_family: list[int] = []
        self.families: list[str] = []
        self.objective: int | None = None

    def variables(
        self, name: str, keys: Iterable[Hashable], lower: float, upper: float, binary: bool = False
    ) -> VarFamily:
        """Add one column per key (a scalar when ``keys`` is ``[None]``)."""
        keys = list(keys)
        family = VarFamily(name, keys, len(self.col_lower), lower, upper, binary)
        self.variable_families.append(family)
        self.col_lower += [lower] * len(keys)
        self.col_upper += [upper] * len(keys)
        self.col_binary += [binary] * len(keys)
        return family

    def start_family(self, name: str) -> None:
        """Rows added from now on belong to constraint family ``name``."""
        self.families.append(name)
        if self.deadline is not None:
            self.deadline.check(name)

    def add(self, row: Row) -> None:
        """Append a row to the current family."""
        self.row_lower.append(row.lower)
        self.row_upper.append(row.upper)
        self.row_index.extend(row.terms)
        self.row_value.extend(row.terms.values())
        self.row_start.append(len(self.row_index))
        self.row_family.append(len(self.families) - 1)
        if self.deadline is not None and len(self.row_lower) % CHECK_EVERY_ROWS == 0:
            self.deadline.check()

    def minimise(self, column: int) -> None:
        """The objective: minimise one column."""
        self.objective = column

    @property
    def num_columns(self) -> int:
        """Columns (variables)."""
        return len(self.col_lower)

    @property
    def num_rows(self) -> int:
        """Rows (constraints)."""
        return len(self.row_lower)

    @property
    def nonzeros(self) -> int:
        """Nonzero coefficients of the constraint matrix."""
        return len(self.row_index)

    def to_highs(self, highs) -> None:
        """Pass the model to a ``highspy.Highs`` in one go."""
        import highspy

        n = self.num_columns
        highs.addVars(n, np.array(self.col_lower), np.array(self.col_upper))
        binaries = np.flatnonzero(np.array(self.col_binary)).astype(np.int32)
        highs.changeColsIntegrality(
            len(binaries), binaries, np.array([highspy.HighsVarType.kInteger] * len(binaries))
        )
        if self.objective is not None:
            highs.changeColsCost(1, np.array([self.objective], dtype=np.int32), np.array([1.0]))
        highs.addRows(
            self.num_rows,
            np.array(self.row_lower),
            np.array(self.row_upper),
            self.nonzeros,
            np.array(self.row_start[:-1], dtype=np.int32),
            np.array(self.row_index, dtype=np.int32),
            np.array(self.row_value),
        )

    def to_pyomo(self, values: np.ndarray | None = None) -> tuple[pyo.ConcreteModel, list]:
        """The same model in Pyomo, and its variable per column.

        One ``Var`` per variable family and one ``ConstraintList`` per
        constraint family, under the same names; ``values`` (a column vector)
        become the variables' initial values (a warm start for solvers that
        take one).
        """
        model = pyo.ConcreteModel(name=self.name)
        columns: list = [None] * self.num_columns
        for family in self.variable_families:
            domain = pyo.Binary if family.binary else pyo.Reals
            bounds = (family.lower, family.upper)
            if family.scalar:
                var = pyo.Var(domain=domain, bounds=bounds)
                model.add_component(family.name, var)
                columns[family.first] = var
            else:
                var = pyo.Var(family.keys, domain=domain, bounds=bounds)
                model.add_component(family.name, var)
                for offset, key in enumerate(family.keys):
                    columns[family.first + offset] = var[key]
        if values is not None:
            for column, value in zip(columns, values, strict=True):
                column.value = float(value)
        lists = []
        for name in self.families:
            constraints = pyo.ConstraintList()
            model.add_component(name, constraints)
            lists.append(constraints)
        for row in range(self.num_rows):
            if self.deadline is not None and row % CHECK_EVERY_ROWS == 0:
                self.deadline.check("building the Pyomo model")
            begin, end = self.row_start[row], self.row_start[row + 1]
            body = pyo.quicksum(
                value * columns[index]
                for index, value in zip(
                    self.row_index[begin:end], self.row_value[begin:end], strict=True
                )
            )
            lower, upper = self.row_lower[row], self.row_upper[row]
            if lower == upper:
                expression = body == lower
            elif math.isinf(upper):
                expression = body >= lower
            elif math.isinf(lower):
                expression = body <= upper
            else:
                expression = pyo.inequality(lower, body, upper)
            lists[self.row_family[row]].add(expression)
        if self.objective is not None:
            model.objective = pyo.Objective(expr=columns[self.objective], sense=pyo.minimize)
        return model, columns


# -- the MILP of a formulation ----------------------------------------------------------


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
        self.makespan = model.variables("makespan", [None], 0, self.horizon)
        self.pairs = f.conflict_pairs()
        # before[i] = 1 when the first run of ordering pair i goes first.
        self.before = model.variables("before", range(len(self.pairs)), 0, 1, binary=True)
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

    # -- expressions -------------------------------------------------------------------

    def duration_of_choice(self, vertex: int) -> Expr:
        """Σ duration·x of ``vertex`` (s): what ``duration[vertex]`` equals."""
        f = self.formulation
        return Expr.total(
            (self.choose.col((vertex, i)), a.duration * f.unit)
            for i, a in enumerate(f.assignments[vertex])
        )

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
        for vertex, items in enumerate(f.assignments):
            values[self.choose.col((vertex, chosen[vertex]))] = 1.0
            values[self.on_block.col((vertex, f.block_index[items[chosen[vertex]].block]))] = 1.0
            values[self.duration.col(vertex)] = items[chosen[vertex]].duration * f.unit
        for m, value in staleness.items():
            if (m, value) in self.staleness.index:
                values[self.staleness.col((m, value))] = 1.0
        for run, start in enumerate(starts):
            values[self.run_start.col(run)] = start * f.unit
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
        "memory_capacity",
        "objective_makespan",
        "gpu_load",
        "gpu_area",
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
        self._memory_capacity()
        self._objective()
        self._gpu_load()
        self._gpu_area()

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
        """Two runs sharing a GPU unit go one after the other (big-M = horizon)."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("gpu_exclusivity")
        big_m = v.horizon
        for index, (r1, r2, units) in enumerate(v.pairs):
            v1, v2 = r1 % f.num_vertices, r2 % f.num_vertices
            order = v.before[index]
            for unit in units:
                both = v.covers(v1, unit) + v.covers(v2, unit)
                model.add(v.run_start[r2] >= v.end(r1) - big_m * (1 - order) - big_m * (2 - both))
                model.add(v.run_start[r1] >= v.end(r2) - big_m * order - big_m * (2 - both))

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
            model.add(v.run_start[row.after] >= v.end(row.before) + row.lag * f.unit * on)

    def _staleness(self) -> None:
        """Pub edges: a user at step t waits for the train run at t-1-σ, with the pub lag.

        A synchronous edge (old log-probs) has σ = 0 whatever is chosen. A row
        with k conditions is switched off by ``(big-M + lag) * (k - Σ conditions)``.
        """
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("staleness")
        big_m = v.horizon
        for row in rows.pub_rows(f):
            lag = row.lag * f.unit
            if not row.conditions:
                model.add(v.run_start[row.after] >= v.end(row.before) + lag)
                continue
            switched = Expr()
            for condition in row.conditions:
                switched = switched + self._condition(condition)
            model.add(
                v.run_start[row.after]
                >= v.end(row.before) + lag - (big_m + lag) * (len(row.conditions) - switched)
            )

    def _memory_capacity(self) -> None:
        """Per GPU unit: Σ over models of the largest resident + largest transient ≤ capacity."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("memory_capacity")
        capacity = f.memory_capacity / GB
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
            model.add(total + v.transient[u] <= capacity)

    def _objective(self) -> None:
        """Minimise the makespan of the k_eval steps."""
        f, v, model = self.formulation, self.vars, self.model
        model.start_family("objective_makespan")
        for vertex in range(f.num_vertices):
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
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        # Pyomo guesses a format from the name's extension and warns when it
        # differs from the one passed: pass its own name for the format.
        temporary = os.path.join(folder, f".tmp-{os.getpid()}-export.{file_format}")
        pyomo_model, _ = self.model.to_pyomo(values)
        try:
            pyomo_model.write(
                temporary,
                format=_pyomo_format(file_format),
                io_options={"symbolic_solver_labels": True},
            )
            os.replace(temporary, path)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)


@dataclass
class BuiltMilp:
    """A formulation, its MILP and the warm-start column values."""

    formulation: Formulation
    milp: MilpModel
    start_values: np.ndarray


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
    stop.attach_highs(highs)
    if not stop.solve_highs(highs):
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

    model, columns = built.milp.model.to_pyomo(built.start_values)
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


def solve_with_start(
    problem: Problem, options: SolveOptions, start: Plan, time_limit: float, engine: str = "highs"
) -> Result:
    """Build the MILP from ``start``, solve it with ``engine`` and check the plan by simulation.

    The build and the solve share ``time_limit``. The result is never worse
    than ``start``: when the limit passes before the MIP solver runs, or it
    returns no plan (or a worse one), ``start`` is reported with the best
    bound known (FEASIBLE, or OPTIMAL if the bound proves it).
    """
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    label = "milp" if engine == "highs" else f"milp:{engine}"
    start_makespan = problem.simulator.evaluate(start).makespan
    options.progress.update(best=start_makespan, bound=problem.bounds.best)
    stats: dict = {"engine": engine, "heuristic_start_makespan": start_makespan}

    def start_result(bound: float | None, message: str) -> Result:
        return warm_start_result(problem, label, start, started, stats, options.gap, bound, message)

    try:
        built = build_model(problem, start, deadline)
        stats.update(built.milp.sizes())
        stats.update(built.formulation.stats)
        stats["build_s"] = time.perf_counter() - started
        if engine == "highs":
            outcome = _solve_highs(built, options, deadline)
        else:
            outcome = _solve_pyomo(built, engine, options, deadline)
    except BuildTimeout as exc:
        stats["build_s"] = time.perf_counter() - started
        return start_result(
            None,
            f"time limit reached while building the MILP (at {exc.args[0] or 'start'}); "
            "the warm-start plan is reported",
        )
    stats.update(
        termination=outcome.termination,
        milp_objective_s=outcome.incumbent,
        milp_bound_s=outcome.bound,
    )
    if outcome.infeasible:
        return infeasible_despite_start(problem, label, started, stats, options.gap)
    note = "interrupted: best plan so far" if outcome.interrupted else ""
    if outcome.values is None or outcome.incumbent is None:
        return start_result(
            outcome.bound,
            note
            or f"the MIP solver found no plan ({outcome.termination.lower()}); "
            "the warm-start plan is reported",
        )
    f = built.formulation
    plan = f.plan_from_choice(*built.milp.vars.chosen(outcome.values))
    result = plan_result(
        problem,
        label,
        plan,
        started,
        bound=outcome.bound,
        requested_gap=options.gap,
        stats=stats,
        message=note,
    )
    tolerance = f.simulation_tolerance(outcome.incumbent)
    if not check_objective(result, outcome.incumbent, tolerance, "MILP"):
        return result
    stats["solver_plan_makespan_s"] = result.stats["solver_plan_makespan_s"] = result.makespan
    if result.makespan is not None and start_makespan < result.makespan:
        # Flooring lets the model rank plans a rounding error apart either way.
        return start_result(
            outcome.bound,
            note or "the MILP plan simulates slower than the warm start, which is reported",
        )
    return result


@each_template("milp")  # AC-share: solve each template, keep the better
def solve(problem: Problem, options: SolveOptions, engine: str = "highs") -> Result:
    """The MILP warm-started from the better baseline improved by a short local search."""
    from rlplan.solvers.local import warm_start_plan

    check_engine(engine)
    label = "milp" if engine == "highs" else f"milp:{engine}"
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, label, started)
    if infeasible is not None:
        return infeasible
    start = warm_start_plan(problem, options)
    if start is None:
        return plan_result(
            problem,
            label,
            None,
            started,
            requested_gap=options.gap,
            message="no heuristic plan to start from",
        )
    remaining = options.time_limit - (time.perf_counter() - started)
    result = solve_with_start(problem, options, start, remaining, engine)
    result.wall_time = time.perf_counter() - started
    return result
