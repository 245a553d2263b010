"""Backend-neutral formulation: index sets, coefficients, lags, bounds and warm starts."""

from formulation.model import Assignment, Formulation, build_formulation

__all__ = ["Assignment", "Formulation", "build_formulation"]
