"""Sparse linear rows over numbered columns, passed to HiGHS in one call.

A generic layer: :class:`Expr` builds linear expressions over column numbers,
their comparisons give :class:`Row` objects, and :class:`LinearModel` holds
columns (grouped in named :class:`VarFamily` families), bounds, integrality
and rows (grouped in named constraint families) as CSR arrays that
:meth:`LinearModel.to_highs` hands to a ``highspy.Highs``. Nothing here knows
the planning formulation (:mod:`rlplan.solvers.milp.translation` does).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import numpy as np

from rlplan.solvers.common import Deadline

#: Rows added between two deadline checks while building.
CHECK_EVERY_ROWS = 16


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
