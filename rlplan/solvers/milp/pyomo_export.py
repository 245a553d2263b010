"""The MILP in Pyomo: MPS/LP export and any MIP solver Pyomo reaches (``milp:NAME``)."""

from __future__ import annotations

import math
import os

import numpy as np
import pyomo.environ as pyo

from rlplan.solvers.milp.sparse import CHECK_EVERY_ROWS, LinearModel


def _pyomo_format(file_format: str):
    """Pyomo's name of an export format (its CPLEX LP writer for ``lp``)."""
    from pyomo.opt import ProblemFormat

    return {"mps": ProblemFormat.mps, "lp": ProblemFormat.cpxlp}[file_format]


def to_pyomo(
    linear: LinearModel, values: np.ndarray | None = None
) -> tuple[pyo.ConcreteModel, list]:
    """``linear`` in Pyomo, and its variable per column.

    One ``Var`` per variable family and one ``ConstraintList`` per
    constraint family, under the same names; ``values`` (a column vector)
    become the variables' initial values (a warm start for solvers that
    take one).
    """
    model = pyo.ConcreteModel(name=linear.name)
    columns: list = [None] * linear.num_columns
    for family in linear.variable_families:
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
    for name in linear.families:
        constraints = pyo.ConstraintList()
        model.add_component(name, constraints)
        lists.append(constraints)
    for row in range(linear.num_rows):
        if linear.deadline is not None and row % CHECK_EVERY_ROWS == 0:
            linear.deadline.check("building the Pyomo model")
        begin, end = linear.row_start[row], linear.row_start[row + 1]
        body = pyo.quicksum(
            value * columns[index]
            for index, value in zip(
                linear.row_index[begin:end], linear.row_value[begin:end], strict=True
            )
        )
        lower, upper = linear.row_lower[row], linear.row_upper[row]
        if lower == upper:
            expression = body == lower
        elif math.isinf(upper):
            expression = body >= lower
        elif math.isinf(lower):
            expression = body <= upper
        else:
            expression = pyo.inequality(lower, body, upper)
        lists[linear.row_family[row]].add(expression)
    if linear.objective is not None:
        model.objective = pyo.Objective(expr=columns[linear.objective], sense=pyo.minimize)
    return model, columns


def write_model(
    linear: LinearModel, path: str, file_format: str, values: np.ndarray | None = None
) -> None:
    """Write ``linear`` as an MPS or LP file (atomically), through Pyomo's writers."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    # Pyomo guesses a format from the name's extension and warns when it
    # differs from the one passed: pass its own name for the format.
    temporary = os.path.join(folder, f".tmp-{os.getpid()}-export.{file_format}")
    pyomo_model, _ = to_pyomo(linear, values)
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
