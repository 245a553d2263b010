"""Exact backends keep the time limit and the warm start (issue 10, item 2).

Time-limit compliance itself is measured by ``python -m benchmarks.limitbench``;
these tests check what a limit too short to solve must still give: the
warm-start plan, with the best bound known, never UNKNOWN.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from rlplan.solvers import cpsat, exact_driver, milp
from rlplan.solvers.common import BuildTimeout, Deadline
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.progress import SilentProgress
from rlplan.solvers.result import Status
from tests.solvers.conftest import ROOT, load_problem
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

MEDIUM = "ppo_8b_1x2x8_h100.yaml"  # 16 GPUs: the MILP takes seconds to build


@pytest.fixture(scope="module")
def medium_start():
    # One solve of the exact driver (no staleness switch): the makespan is the score.
    problem = load_problem(MEDIUM).without_stale_penalty()
    start = warm_start_plan(problem, SolveOptions(time_limit=60), time_limit=60)
    return problem, start


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_a_limit_hit_while_building_returns_the_warm_start(medium_start, backend):
    """A 1 ms limit ends the build: the warm-start plan comes back with the instance's bound."""
    problem, start = medium_start
    solve = milp.solve_with_start if backend == "milp" else cpsat.solve_with_hint
    result = solve(problem, SolveOptions(threads=1), start, 0.001)
    assert result.status is Status.FEASIBLE
    assert result.plan == start
    assert result.makespan == problem.simulator.evaluate(start).makespan
    assert result.bound == problem.bounds.best
    assert result.stats["returned_start"]
    assert "time limit reached while building" in result.message


#: Constraint families of both exact models (CP-SAT names its objective family "objective").
FAMILIES = (*milp.MilpModel.FAMILIES, "objective")


class _InsideFamily(Deadline):
    """A deadline that passes at the first check made inside a constraint family
    (after the family's own opening check), whatever the clock says."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.checks = 0

    def check(self, phase: str = "") -> None:
        self.checks += 1
        if phase:
            self.phase = phase
        elif self.phase in FAMILIES:
            raise BuildTimeout(self.phase)


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
def test_the_build_checks_the_deadline_within_families(medium_start, monkeypatch, backend):
    """A deadline passing inside a constraint family stops the build there: the warm start
    comes back naming that family."""
    problem, start = medium_start
    monkeypatch.setattr(exact_driver, "Deadline", _InsideFamily)
    solve = milp.solve_with_start if backend == "milp" else cpsat.solve_with_hint
    result = solve(problem, SolveOptions(threads=1), start, 600)
    assert result.plan == start
    assert result.stats["returned_start"]
    family = result.message.split("(at ")[1].split(")")[0]
    assert family in FAMILIES


class _Counting(Deadline):
    """A deadline that counts its checks."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.checks = 0

    def check(self, phase: str = "") -> None:
        self.checks += 1
        super().check(phase)


def test_milp_build_checks_the_deadline_every_few_hundred_rows(medium_start):
    """Building the 16-GPU MILP checks its deadline at least once per CHECK_EVERY_ROWS rows."""
    problem, start = medium_start
    deadline = _Counting(600)
    built = milp.build_model(problem, start, deadline)
    rows = built.milp.model.num_rows
    assert rows > 10 * milp.CHECK_EVERY_ROWS
    assert deadline.checks >= rows // milp.CHECK_EVERY_ROWS + len(milp.MilpModel.FAMILIES)


@pytest.mark.parametrize("backend", ["milp", "cpsat"])
@pytest.mark.parametrize("name", sorted(KNOWN_OPTIMA))
def test_exact_backends_never_return_a_plan_slower_than_their_start(backend, name):
    """Flooring can make the model's optimum simulate a hair slower than the warm start;
    the start is then reported: the result never simulates slower than the start.

    One solve of the exact driver, which minimises the makespan: without the
    off-policy penalty that is the score, so the result is OPTIMAL."""
    problem = load_problem(name).without_stale_penalty()
    options = SolveOptions(time_limit=60, threads=2)
    start = warm_start_plan(problem, options, time_limit=60)
    solve = milp.solve_with_start if backend == "milp" else cpsat.solve_with_hint
    result = solve(problem, options, start, 60)
    assert result.makespan <= problem.simulator.evaluate(start).makespan
    assert result.status is Status.OPTIMAL


def test_milp_returns_the_warm_start_when_the_solver_finds_nothing(medium_start, monkeypatch):
    """HiGHS stopping without a plan: the start comes back with HiGHS's bound, not UNKNOWN."""
    problem, start = medium_start
    # Between the plan-independent bound and the start: the bound kept is HiGHS's.
    upper = problem.simulator.evaluate(start).makespan
    highs_bound = (problem.bounds.best + upper) / 2
    assert problem.bounds.best < highs_bound < upper * (1 - 1e-3)

    def nothing(built, options, deadline):
        return milp.MipOutcome(None, False, False, highs_bound, None, "Time limit reached")

    monkeypatch.setattr(milp.engines, "_solve_highs", nothing)
    result = milp.solve_with_start(problem, SolveOptions(threads=1), start, 60)
    assert result.status is Status.FEASIBLE
    assert result.plan == start
    assert result.bound == pytest.approx(highs_bound)
    assert "found no plan" in result.message


def test_milp_with_a_short_limit_still_returns_a_plan():
    """The whole backend with half a second on 16 GPUs: a plan, never UNKNOWN."""
    problem = load_problem(MEDIUM)
    result = milp.solve(problem, SolveOptions(time_limit=0.5, threads=1))
    assert result.status.has_plan
    assert result.plan is not None
    assert problem.simulator.evaluate(result.plan).feasible


def _poor_feasible_plan(problem, seed: int = 7):
    from rlplan.rpeg.search.sampling import random_plan

    rng = random.Random(seed)
    while True:
        plan = random_plan(problem.directory, rng)
        if problem.simulator.evaluate(plan).feasible:
            return plan


class _Recorder(SilentProgress):
    def __init__(self) -> None:
        super().__init__()
        self.reports: list[float] = []

    def update(self, best=None, bound=None, evaluations=None, note=""):
        if best is not None:
            self.reports.append(best)
        super().update(best, bound, evaluations, note)


def test_highs_starts_from_the_warm_start(capsys):
    """HiGHS receives the start (Highs.setSolution): its log accepts it and its first incumbent
    is the start's model makespan, for a random start HiGHS would not find by itself."""
    problem = load_problem("tiny_ppo_2gpu.yaml")
    start = _poor_feasible_plan(problem)
    built = milp.build_model(problem, start)
    start_objective = built.start_values[built.milp.vars.makespan.col()]
    recorder = _Recorder()
    options = SolveOptions(threads=1, progress=recorder, verbose=True)
    outcome = milp._solve_highs(built, options, Deadline(30))
    log = capsys.readouterr().err
    assert "MIP start solution is feasible" in log
    assert recorder.reports[0] == pytest.approx(start_objective, abs=1e-9)
    assert outcome.optimal


def _cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "main.py"), *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def test_highs_log_only_with_verbose(tmp_path):
    """Without --verbose no HiGHS output reaches the terminal; with it, HiGHS's log goes to
    stderr and stdout keeps only the summary."""
    instance = os.path.join(ROOT, "instances", "tiny_ppo_2gpu.yaml")
    quiet = _cli("solve", instance, "--solver", "milp", "--out", str(tmp_path / "a"))
    assert quiet.returncode == 0
    assert "HiGHS" not in quiet.stdout + quiet.stderr
    assert quiet.stderr == ""
    # (a note appears when the on-policy solve hands back its warm start; one versus line
    # per baseline: greedy, concurrent, split)
    assert [line.split()[0] for line in quiet.stdout.splitlines() if line[:4] != "note"] == [
        "status",
        "step",
        "staleness",
        "bound",
        "versus",
        "versus",
        "versus",
        "wrote",
    ]
    verbose = _cli("solve", instance, "--solver", "milp", "--verbose", "--out", str(tmp_path / "b"))
    assert verbose.returncode == 0
    assert "MIP start solution is feasible" in verbose.stderr
    assert "HiGHS" not in verbose.stdout


def test_lp_export_prints_no_pyomo_warning(tmp_path):
    """export --format lp: only the summary line; no Pyomo warning naming a temporary file."""
    instance = os.path.join(ROOT, "instances", "tiny_dpo_2gpu.yaml")
    path = tmp_path / "model.lp"
    completed = _cli("export", instance, "--format", "lp", "--out", str(path))
    assert completed.returncode == 0
    assert completed.stderr == ""
    assert ".tmp-" not in completed.stdout
    assert completed.stdout.startswith(f"wrote {path}:")
    assert "objective" in path.read_text()
