"""Backend-neutral formulation: index sets, coefficients, lags, bounds and warm starts."""

from rlplan.formulation.model import Assignment, Formulation, build_formulation

__all__ = ["Assignment", "Formulation", "build_formulation"]
