"""Tests that apply to every exact backend (CP-SAT and the MILP)."""

from __future__ import annotations

import random

import highspy
import pytest

from rlplan.cli import app as main
from rlplan.formulation import build_formulation
from rlplan.rpeg.search.sampling import random_plan
from rlplan.solvers import cpsat, milp
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import ROOT, load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA, KNOWN_SCORES

#: Durations and lags are floored to a unit of at most 1e-4 of the heuristic
#: makespan spread over a path, so an exact backend's optimum is within 1e-4
#: (relative) of the true optimum, and its bound below it.
REL = 1e-4

EXACT = {"cpsat": cpsat.solve, "milp": milp.solve}
START = {"cpsat": cpsat.solve_with_hint, "milp": milp.solve_with_start}


@pytest.mark.parametrize("backend", sorted(EXACT))
@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_exact_backend_proves_the_exhaustive_optimum(backend, name):
    """OPTIMAL, simulated makespan equal to the oracle's optimum, bound below its score."""
    problem = load_problem(name)
    result = EXACT[backend](problem, SolveOptions(time_limit=60, threads=2))
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=REL)
    assert result.makespan >= KNOWN_OPTIMA[name] * (1 - 1e-12)
    assert result.bound <= KNOWN_SCORES[name] * (1 + 1e-12)
    assert result.gap <= REL
    # The backend's own bound, before any clipping to the reported makespan: a
    # bound rounded up (or a lag left out) would exceed the oracle's optimum.
    raw = result.stats.get("cp_bound_s", result.stats.get("milp_bound_s"))
    assert raw is not None
    assert raw <= KNOWN_OPTIMA[name] * (1 + 1e-12)
    # Claimed OPTIMAL, the raw bound is the optimum up to the formulation's rounding (each
    # duration and lag floored to the time unit): a lag left out of the model, on the lag
    # instances, puts it lower by far more.
    formulation = build_formulation(problem, result.stats["heuristic_start_makespan"])
    assert raw >= KNOWN_OPTIMA[name] - formulation.rounding_tolerance()


@pytest.mark.parametrize("backend", sorted(EXACT))
@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_exact_schedule_replays_in_the_simulator(backend, name):
    """The plan carries the solver's start order; simulating it gives the solver's objective.

    When flooring let the warm start simulate a hair faster than the solver's
    plan, the warm start is reported (never a slower plan than the start) and
    the solver's plan is known by its recorded simulation.
    """
    problem = load_problem(name)
    result = EXACT[backend](problem, SolveOptions(time_limit=60, threads=2))
    solver_plan = result.stats["solver_plan_makespan_s"]
    if result.stats.get("returned_start"):
        assert result.makespan < solver_plan
        assert result.makespan == result.stats["heuristic_start_makespan"]
    else:
        assert result.plan.order is not None
        assert problem.simulator.simulate(result.plan).makespan == result.makespan == solver_plan
    formulation = build_formulation(problem, result.stats["heuristic_start_makespan"])
    objective = result.stats.get("cp_objective_s", result.stats.get("milp_objective_s"))
    assert abs(solver_plan - objective) <= formulation.rounding_tolerance() + 1e-6 * objective


@pytest.mark.parametrize("backend", sorted(EXACT))
@pytest.mark.parametrize(
    "name", ["tiny_ppo_2gpu.yaml", "tiny_grpo_4gpu.yaml", "tiny_dpo_4gpu.yaml"]
)
def test_exact_bound_never_exceeds_sampled_feasible_plans(backend, name):
    """The proven bound is at most the simulated makespan of random feasible plans."""
    problem = load_problem(name)
    result = EXACT[backend](problem, SolveOptions(time_limit=60, threads=2))
    rng = random.Random(3)
    checked = 0
    for _ in range(2000):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        evaluation = problem.simulator.evaluate(plan)
        if evaluation.feasible:
            checked += 1
            assert result.bound <= evaluation.makespan
    assert checked > 0


@pytest.mark.parametrize("name", ["grpo_7b_1x2x8_h100.yaml", "dpo_8b_1x2x8_a100.yaml"])
def test_cpsat_and_milp_agree_on_16_gpus(name):
    """On the same formulation both prove the same optimum (1e-6 relative), or bracket it.

    The formulation minimises the makespan: without the off-policy penalty the optimum
    makespan is the optimum score, so CP-SAT alone proves it.
    """
    problem = load_problem(name).without_stale_penalty()
    options = SolveOptions(time_limit=120, threads=2)
    start = warm_start_plan(problem, options)
    exact = cpsat.solve_with_hint(problem, options, start, 120)
    mip = milp.solve_with_start(problem, options, start, 120)
    assert exact.status is Status.OPTIMAL
    cp_optimum = exact.stats["cp_objective_s"]
    if mip.status is Status.OPTIMAL:
        assert mip.stats["milp_objective_s"] == pytest.approx(cp_optimum, rel=1e-6)
    else:
        assert mip.stats["milp_bound_s"] <= cp_optimum * (1 + 1e-6)
        assert cp_optimum <= mip.stats["milp_objective_s"] * (1 + 1e-6)


def test_exported_mps_solved_by_highspy_gives_the_milp_optimum(tmp_path, capsys):
    """highspy reads the exported MPS file directly and finds the objective milp proves."""
    instance = f"{ROOT}/instances/tiny_ppo_2gpu.yaml"
    path = tmp_path / "model.mps"
    assert main.main(["export", instance, "--format", "mps", "--out", str(path)]) == 0
    # The file's model is built from export's start plan: the instance's solver defaults,
    # the whole limit for the start search (rlplan/cli/export.py); its time unit follows
    # that plan's makespan. The same model, solved here, minimises the makespan: compare
    # it where that is the score, without the off-policy penalty.
    penalised = load_problem("tiny_ppo_2gpu.yaml")
    defaults = penalised.instance.solver
    exported = SolveOptions(
        time_limit=defaults.time_limit, threads=defaults.threads, seed=defaults.seed
    )
    start = warm_start_plan(penalised, exported, time_limit=exported.time_limit)
    problem = penalised.without_stale_penalty()
    options = SolveOptions(time_limit=60, threads=1)
    result = milp.solve_with_start(problem, options, start, 60)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("mip_rel_gap", 0.0)  # HiGHS stops at 1e-4 by default; prove the optimum
    assert highs.readModel(str(path)) == highspy.HighsStatus.kOk
    highs.run()
    assert highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert result.status is Status.OPTIMAL
    assert highs.getInfo().objective_function_value == pytest.approx(
        result.stats["milp_objective_s"], rel=1e-6
    )


def test_lp_export_is_written(tmp_path, capsys):
    """The LP format is written too, with the objective row."""
    path = tmp_path / "model.lp"
    code = main.main(
        ["export", f"{ROOT}/instances/tiny_dpo_2gpu.yaml", "--format", "lp", "--out", str(path)]
    )
    assert code == 0
    assert "objective" in path.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_unavailable_mip_solver_is_named_with_install_hint(tmp_path, capsys):
    """milp:NAME for a solver Pyomo cannot reach: exit 2, one line naming it and how to install."""
    code = main.main(
        [
            "solve",
            f"{ROOT}/instances/tiny_dpo_2gpu.yaml",
            "--solver",
            "milp:no_such_solver",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "no_such_solver" in err and "install" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_install_hint_for_a_known_solver():
    """A known but missing solver gets its specific install command."""
    try:
        milp.check_engine("cbc")
    except Exception as exc:
        assert "coinor-cbc" in str(exc)
    else:
        pytest.skip("cbc is installed here")


def test_milp_through_pyomo_proves_the_lag_instance_optimum():
    """milp:appsi_highs (the same model solved through Pyomo's interface to HiGHS) reads the
    solution back and proves the oracle's optimum on the lag instance."""
    name = "tiny_lag_grpo_2gpu.yaml"
    problem = load_problem(name)
    result = milp.solve(problem, SolveOptions(time_limit=60, threads=1), engine="appsi_highs")
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(KNOWN_OPTIMA[name], rel=1e-12)
    assert result.stats["milp_bound_s"] <= KNOWN_OPTIMA[name] * (1 + 1e-12)
