"""The exhaustive oracle: proven optima of the tiny instances."""

from __future__ import annotations

import random

import pytest

from rpeg.sampling import random_plan
from solvers import exhaustive
from solvers.options import SolveOptions
from solvers.result import Status
from tests.solvers.conftest import load_problem

#: Optimal makespans (k_eval = 2 steps) over the plan space, established by
#: the exhaustive oracle, with the better baseline's makespan for contrast.
#: The 2-GPU PPO instances are the ones where the baselines are not optimal:
#: putting the latency-bound generation on one GPU and overlapping it with
#: training on the other beats sharing both GPUs (19.4260 s vs 19.4902 s).
KNOWN_OPTIMA = {
    "tiny_ppo_2gpu.yaml": 19.426032251943653,
    "tiny_ppo_2gpu_sync.yaml": 19.42604615018365,
    "tiny_grpo_2gpu.yaml": 48.675058083514266,
    "tiny_grpo_4gpu.yaml": 2.6220473248393175,
    "tiny_dpo_2gpu.yaml": 11.355142542393626,
    "tiny_dpo_4gpu.yaml": 12.316123152496239,
}


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_exhaustive_proves_the_known_optimum(name):
    """The oracle completes within 30 s, proves OPTIMAL, and its plan simulates to the optimum."""
    problem = load_problem(name)
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)
    assert result.bound == pytest.approx(result.makespan, rel=1e-12)
    assert problem.simulator.simulate(result.plan).makespan == pytest.approx(
        result.makespan, rel=1e-12
    )


@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_no_sampled_feasible_plan_beats_the_optimum(name):
    """Random feasible plans (with random orders) never simulate below the proven optimum."""
    problem = load_problem(name)
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        evaluation = problem.simulator.evaluate(plan)
        if evaluation.feasible:
            checked += 1
            assert evaluation.makespan >= KNOWN_OPTIMA[name] * (1 - 1e-12)
    assert checked > 0


def test_ppo_2gpu_optimum_beats_both_baselines():
    """On the 2-GPU PPO instance the optimum is strictly better than either baseline."""
    from solvers import concurrent, greedy

    problem = load_problem("tiny_ppo_2gpu.yaml")
    for backend in (greedy, concurrent):
        assert (
            backend.solve(problem, SolveOptions()).makespan
            > KNOWN_OPTIMA["tiny_ppo_2gpu.yaml"] * 1.001
        )


def test_refuses_a_plan_space_too_large_naming_its_size():
    """On the 16-GPU instance the oracle refuses at once, naming the number of placements."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.UNKNOWN
    assert result.plan is None
    placements, _ = exhaustive.plan_space_size(problem)
    assert f"{placements:,} placements" in result.message
    assert result.wall_time < 5


def test_time_limit_gives_feasible_not_optimal():
    """Stopped by its time limit, the oracle does not claim optimality."""
    problem = load_problem("tiny_grpo_4gpu.yaml")
    result = exhaustive.solve(problem, SolveOptions(time_limit=0.05))
    assert result.status in (Status.FEASIBLE, Status.UNKNOWN)
    assert "time limit" in result.message
