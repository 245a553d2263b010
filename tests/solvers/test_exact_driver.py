"""The exact-solver driver judges a backend's plan by the model's earliest schedule of it.

A backend's feasible solution may leave idle time before some runs; the
simulator starts every run as early as the plan's order allows, so the plan
simulates faster than the backend's objective by the idle time. That is no
disagreement between the formulation and the simulator (the 70B PPO instance
had CP-SAT plans rejected for 0.09 s of it); a formulation pricing a plan
otherwise than the simulator is one, and its bound is then not used.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from rlplan.formulation import build_formulation
from rlplan.formulation.schedule import earliest_ends
from rlplan.solvers import auto, cpsat
from rlplan.solvers.common import judge_objective, plan_result
from rlplan.solvers.cpsat import CpSatBackend
from rlplan.solvers.exact_driver import solve_exact
from rlplan.solvers.local import best_baseline
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status
from tests.solvers.conftest import load_problem

INSTANCE = "tiny_ppo_2gpu.yaml"
#: Idle time put before the second step's runs, relative to the makespan:
#: a hundred times the time-unit tolerance (1e-4 of the makespan).
IDLE = 0.01


def _idle_solution(problem):
    """A warm start whose second step starts ``IDLE`` x makespan late, and its formulation."""
    start = best_baseline(problem)
    formulation = build_formulation(problem, problem.simulator.evaluate(start).makespan)
    chosen, staleness, starts = formulation.warm_start(start)
    delay = round(IDLE * formulation.upper_bound / formulation.unit)
    delayed = [s + delay if run >= formulation.num_vertices else s for run, s in enumerate(starts)]
    return formulation, (chosen, staleness, delayed), delay


def test_idle_time_in_a_solution_is_not_a_disagreement():
    """Idle time makes the objective exceed the simulation beyond the rounding tolerance;
    the earliest schedule of the same plan agrees with the simulation, so the plan stands."""
    problem = load_problem(INSTANCE)
    formulation, solution, delay = _idle_solution(problem)
    objective = max(formulation.run_ends(solution[0], solution[2])) * formulation.unit
    plan = formulation.plan_from_choice(*solution)
    result = plan_result(problem, "cpsat", plan, time.perf_counter(), bound=0.5 * objective)
    # What the objective check compared before: it is off by the idle time.
    assert objective - result.makespan > formulation.simulation_tolerance(objective)
    earliest = max(earliest_ends(formulation, *solution)) * formulation.unit
    assert abs(earliest - result.makespan) <= formulation.rounding_tolerance()
    assert judge_objective(problem, result, formulation, solution, objective, "CP-SAT")
    assert result.status is not Status.ERROR
    idle = result.stats["solver_idle_s"]
    assert formulation.simulation_tolerance(objective) < idle <= delay * formulation.unit


def test_a_formulation_pricing_a_plan_otherwise_is_an_error_without_its_bound():
    """Durations the simulator does not charge: ERROR, and the backend's bound is dropped."""
    problem = load_problem(INSTANCE)
    formulation, solution, _ = _idle_solution(problem)
    chosen = solution[0]
    vertex = 0
    slow = dataclasses.replace(
        formulation.assignments[vertex][chosen[vertex]],
        duration=2 * formulation.assignments[vertex][chosen[vertex]].duration,
    )
    formulation.assignments[vertex][chosen[vertex]] = slow
    objective = max(earliest_ends(formulation, *solution)) * formulation.unit
    plan = formulation.plan_from_choice(*solution)
    proven = 0.999 * problem.simulator.evaluate(plan).makespan
    result = plan_result(problem, "cpsat", plan, time.perf_counter(), bound=proven)
    assert result.bound == pytest.approx(proven)
    assert not judge_objective(problem, result, formulation, solution, objective, "CP-SAT")
    assert result.status is Status.ERROR
    assert result.stats["objective_mismatch"]
    assert result.bound == problem.score_bound
    assert result.bound_source == problem.score_bound_source
    assert "differs from its simulated plan" in result.message


class _IdleCpSat(CpSatBackend):
    """CP-SAT whose run starts are pinned to a schedule with idle time."""

    def __init__(self, starts: list[int]) -> None:
        super().__init__()
        self.starts = starts

    def warm_start(self, solution) -> None:
        super().warm_start(solution)
        for variable, start in zip(self.built.vars.run_start, self.starts, strict=True):
            self.built.model.add(variable == start)


def test_cpsat_plan_with_idle_time_passes_the_driver():
    """Through the whole driver: CP-SAT's solution has idle time, its plan is not rejected.

    The warm start is the baseline (it sets the horizon); the run starts are
    pinned to a faster plan's schedule with everything from its second step's
    first run on delayed by half the difference, so the idle schedule still
    fits the horizon.
    """
    problem = load_problem(INSTANCE)
    start = best_baseline(problem)
    upper = problem.simulator.evaluate(start).makespan
    faster = cpsat.solve(problem, SolveOptions(time_limit=20, threads=1)).plan
    formulation = build_formulation(problem, upper)
    _, _, starts = formulation.warm_start(faster)
    delay = round((upper - problem.simulator.evaluate(faster).makespan) / 2 / formulation.unit)
    assert delay * formulation.unit > 2 * formulation.simulation_tolerance(upper)
    # Every run from the first of step 1 on (in time: with staleness 1 a step-0 run may
    # follow it) moves later by the delay, so the schedule stays valid.
    cut = min(starts[formulation.num_vertices :])
    delayed = [s + delay if s >= cut else s for s in starts]
    result = solve_exact(problem, SolveOptions(threads=1), start, 30, _IdleCpSat(delayed))
    assert result.status is not Status.ERROR, result.message
    objective = result.stats["cp_objective_s"]
    assert objective - result.makespan > formulation.simulation_tolerance(objective)
    assert result.stats["solver_idle_s"] > formulation.simulation_tolerance(objective)


def test_auto_keeps_a_rejected_cpsat_plan_that_simulates_faster(monkeypatch):
    """A CP-SAT result rejected as ERROR still offers its plan by its simulated score;
    its bound (untrustworthy) is not used."""
    problem = load_problem(INSTANCE)
    baseline = best_baseline(problem)
    faster = cpsat.solve(problem, SolveOptions(time_limit=20, threads=1)).plan
    assert problem.simulator.evaluate(faster).score < problem.simulator.evaluate(baseline).score
    bogus_bound = problem.simulator.evaluate(faster).makespan

    def rejected(problem_, options, hint, time_limit):
        return Result(
            Status.ERROR,
            "cpsat",
            plan=faster,
            makespan=problem.simulator.evaluate(faster).makespan,
            k_eval=problem.instance.k_eval,
            bound=bogus_bound,
            message="CP-SAT objective differs from its simulated plan",
        )

    def no_improvement(problem_, plan, *args, **kwargs):
        return plan, {"interrupted": False}

    monkeypatch.setattr(auto, "_exact", rejected)
    monkeypatch.setattr(auto, "improve", no_improvement)
    result = auto.solve(problem, SolveOptions(time_limit=5, threads=1))
    assert result.plan == faster
    assert result.bound == problem.score_bound < bogus_bound
    assert "judged by simulation alone, is kept" in result.message
    assert result.stats["cpsat_status"] == "ERROR"
