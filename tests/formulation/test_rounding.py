"""The exact formulations round time down, so their optimum is a valid lower bound."""

from __future__ import annotations

import pytest

from rlplan.formulation import build_formulation
from tests.solvers.conftest import load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA


@pytest.mark.parametrize("name", ["tiny_lag_grpo_2gpu.yaml", "tiny_dpo_4gpu.yaml"])
def test_lags_are_rounded_down_to_whole_units(name):
    """Each lag in units is the largest whole number of units not above it in seconds:
    rounded up, a lag on the critical path would lift the bound over the optimum."""
    problem = load_problem(name)
    formulation = build_formulation(problem, KNOWN_OPTIMA[name])
    cost = problem.directory.cost
    seconds = [cost.data_lag(False, "g")] + [
        cost.pub_lag(model, same_block, False, "g", placement_strategy)
        for model in problem.directory.template.trained_models
        for same_block in (False, True)
        for placement_strategy in {
            c.strategy
            for per_shape in problem.directory.options
            for cs in per_shape.values()
            for c in cs
        }
    ]
    fractional = 0
    for lag in seconds:
        units = formulation.to_units(lag)
        assert units * formulation.unit <= lag * (1 + 1e-9)
        assert lag < (units + 1) * formulation.unit
        fractional += units * formulation.unit < lag * (1 - 1e-6)
    assert fractional > 0  # some lag is not a whole number of units: rounding matters
