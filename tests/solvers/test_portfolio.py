"""The exact portfolio of ``auto``: CP-SAT here, the MILP in a forked child (docs/solvers.md).

The combination is tested on results built by hand (which plan, which
bound); the processes on the tiny PPO instance with the penalty off (one
template, no staleness switch), where the greedy start is 0.4 % above the
optimum. Nothing here depends on which backend is faster: where the order
matters, the test fixes it (a child that answers at once, a CP-SAT that
waits for the MILP's proof).
"""

from __future__ import annotations

import os
import time

import pytest

from rlplan.rpeg import interrupts
from rlplan.solvers import cpsat, portfolio
from rlplan.solvers.common import plan_result
from rlplan.solvers.forked import ForkedCall
from rlplan.solvers.local import best_baseline
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import load_problem

LIMIT = 60.0


@pytest.fixture(autouse=True)
def both_on_two_gpus(monkeypatch):
    """The MILP beside CP-SAT on the 2-GPU instance (by default from 32 GPUs on)."""
    monkeypatch.setattr(portfolio, "PORTFOLIO_MIN_GPUS", 1)


@pytest.fixture(scope="module")
def problem():
    return load_problem("tiny_ppo_2gpu.yaml").without_stale_penalty()


@pytest.fixture(scope="module")
def start(problem):
    plan = best_baseline(problem)
    return plan


@pytest.fixture(scope="module")
def optimum(problem, start):
    """CP-SAT alone, from the greedy start: the proven optimum."""
    result = cpsat.solve_with_hint(problem, SolveOptions(threads=1), start, LIMIT)
    assert result.status is Status.OPTIMAL
    assert result.score < problem.simulator.evaluate(start).score  # the start is not optimal
    return result


class Answered:
    """What :func:`portfolio.combine` reads of a child: its value or its error."""

    def __init__(self, value=None, error=None) -> None:
        self.value, self.error = value, error


def between(problem, plan, share: float) -> float:
    """A makespan bound ``share`` of the way from the problem's own bound to ``plan``'s score."""
    low, high = problem.score_bound, problem.simulator.evaluate(plan).score
    return low + share * (high - low)


def made(problem, solver, plan, bound, status=None):
    result = plan_result(problem, solver, plan, time.perf_counter(), bound=bound)
    if status is not None:
        result.status = status
    return result


def test_the_better_plan_and_the_larger_bound_are_kept(problem, start, optimum):
    """Break tried: the MILP's bound dropped (max over CP-SAT's alone) fails here."""
    cp = made(problem, "cpsat", start, between(problem, optimum.plan, 0.3))
    milp = made(problem, "milp", optimum.plan, between(problem, optimum.plan, 0.6))
    combined = portfolio.combine(problem, 0.0, time.perf_counter(), cp, 1.0, Answered(milp), 2.0)
    assert combined.plan == optimum.plan
    assert combined.bound == pytest.approx(milp.bound)
    assert combined.bound_source == "milp"
    assert combined.stats["portfolio"]["bound_from"] == "milp"
    # The other way round: CP-SAT's bound holds and is named.
    cp = made(problem, "cpsat", optimum.plan, between(problem, optimum.plan, 0.9))
    combined = portfolio.combine(problem, 0.0, time.perf_counter(), cp, 1.0, Answered(milp), 2.0)
    assert combined.bound == pytest.approx(cp.bound)
    assert combined.bound_source == "cpsat"


def test_a_milp_error_or_failure_leaves_the_cpsat_result(problem, start, optimum):
    """Break tried: ERROR results not set aside (their better plan and bound taken) fails."""
    cp = made(problem, "cpsat", start, between(problem, start, 0.3))
    wrong = made(problem, "milp", optimum.plan, optimum.score, status=Status.ERROR)
    for child in (Answered(wrong), Answered(None, "RuntimeError: boom")):
        combined = portfolio.combine(problem, 0.0, time.perf_counter(), cp, 1.0, child, 2.0)
        assert combined.plan == start
        assert combined.bound == pytest.approx(cp.bound)
    assert combined.stats["portfolio"]["milp"]["error"] == "RuntimeError: boom"


def test_the_portfolio_proves_the_optimum_cpsat_proves(problem, start, optimum):
    result = portfolio.solve_with_hint(problem, SolveOptions(threads=2), start, LIMIT)
    assert result.status is Status.OPTIMAL
    assert result.score == pytest.approx(optimum.score, rel=1e-4)
    assert result.stats["portfolio"]["proved_by"] in ("cpsat", "milp")


def failing_milp(*args):
    raise RuntimeError("the MIP solver broke")


def dying_milp(*args):
    os._exit(3)


@pytest.mark.parametrize(
    ("milp", "error"),
    [(failing_milp, "RuntimeError: the MIP solver broke"), (dying_milp, "exit code 3")],
)
def test_a_failing_child_never_loses_the_cpsat_plan(
    problem, start, optimum, monkeypatch, milp, error
):
    """Break tried: combine reading the child's value without the None check raises here."""
    monkeypatch.setattr(portfolio, "_solve_milp", milp)
    result = portfolio.solve_with_hint(problem, SolveOptions(threads=2), start, LIMIT)
    assert result.status is Status.OPTIMAL
    assert result.score == pytest.approx(optimum.score, rel=1e-4)
    assert error in result.stats["portfolio"]["milp"]["error"]


def test_the_child_is_gone_after_the_solve(problem, start, monkeypatch):
    """A MILP that never ends: CP-SAT's proof ends it. Break tried: no ``child.end()``."""
    children = []

    class Recorded(ForkedCall):
        def __init__(self, function) -> None:
            super().__init__(function)
            children.append(self)

    monkeypatch.setattr(portfolio, "ForkedCall", Recorded)
    monkeypatch.setattr(portfolio, "_solve_milp", lambda *args: time.sleep(3600))
    result = portfolio.solve_with_hint(problem, SolveOptions(threads=2), start, LIMIT)
    assert result.stats["portfolio"]["proved_by"] == "cpsat"
    (child,) = children
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


def test_a_milp_proof_stops_cpsat(problem, start, monkeypatch):
    """CP-SAT waits for the MILP's (made-up) proof, then its search is stopped at once.

    Break tried: the watch not setting the stop event (CP-SAT is never stopped).
    """
    calls = []
    original_when_set = interrupts.when_set

    def when_set(event, hook, retry):
        return original_when_set(event, lambda: (calls.append(1), hook()), retry)

    original_solve = cpsat.CpSatBackend.solve

    def solve_after_the_milp(self, options, deadline):
        assert self.stop is not None and self.stop.wait(LIMIT)
        return original_solve(self, options, deadline)

    def proven_milp(problem, options, start, ends):
        makespan = problem.simulator.evaluate(start).makespan
        return plan_result(problem, "milp", start, time.perf_counter(), bound=makespan)

    monkeypatch.setattr(interrupts, "when_set", when_set)
    monkeypatch.setattr(cpsat.CpSatBackend, "solve", solve_after_the_milp)
    monkeypatch.setattr(portfolio, "_solve_milp", proven_milp)
    result = portfolio.solve_with_hint(problem, SolveOptions(threads=2), start, LIMIT)
    assert calls
    assert result.stats["portfolio"]["proved_by"] == "milp"


@pytest.mark.parametrize(("threads", "smallest"), [(1, 1), (2, 4)])
def test_cpsat_alone_at_one_thread_or_below_the_cluster_size(
    problem, start, monkeypatch, threads, smallest
):
    """Break tried: the portfolio at one thread, or on any cluster (a child is forked)."""

    def no_fork(function):
        raise AssertionError("no MILP child here")

    monkeypatch.setattr(portfolio, "ForkedCall", no_fork)
    monkeypatch.setattr(portfolio, "PORTFOLIO_MIN_GPUS", smallest)
    result = portfolio.solve_with_hint(problem, SolveOptions(threads=threads), start, LIMIT)
    assert result.status is Status.OPTIMAL
    assert "portfolio" not in result.stats


def test_the_terminal_line_names_who_proved():
    """Break tried: the prover's name dropped from the line."""
    from rlplan.cli.solve import describe_portfolio

    summary = {
        "cpsat": {"status": "FEASIBLE", "wall_s": 65.12},
        "milp": {"status": "OPTIMAL", "wall_s": 41.0},
        "proved_by": "milp",
    }
    assert describe_portfolio(summary) == (
        "CP-SAT FEASIBLE 65.1 s, MILP OPTIMAL 41.0 s: proved by the MILP"
    )
    summary["milp"] = {"status": None, "wall_s": None}
    summary["proved_by"] = None
    assert describe_portfolio(summary) == "CP-SAT FEASIBLE 65.1 s, MILP no result: neither proved"
    assert describe_portfolio(None) is None


def test_a_milp_result_crosses_the_pipe_whole(problem, start):
    """The child sends its Result pickled: plan, bound and statistics come back equal."""
    import pickle

    result = portfolio._solve_milp(
        problem, SolveOptions(threads=1), start, time.perf_counter() + LIMIT
    )
    assert result.status is Status.OPTIMAL
    back = pickle.loads(pickle.dumps(result))
    assert back.plan == result.plan
    assert (back.bound, back.bound_source, back.stats) == (result.bound, "milp", result.stats)


def test_the_cluster_size_counts_every_pool(monkeypatch):
    """tests/data/tiny_two_pools_grpo.yaml has two pools of 2 GPUs: a threshold of 4 GPUs
    holds for the cluster (4), though not for its first pool alone (2)."""
    from rlplan.rpeg.evaluation.problem import Problem
    from tests.solvers.conftest import ROOT

    pooled = Problem.load(os.path.join(ROOT, "tests", "data", "tiny_two_pools_grpo.yaml"))
    monkeypatch.delenv("RLPLAN_PORTFOLIO_MIN_GPUS", raising=False)
    monkeypatch.setattr(portfolio, "PORTFOLIO_MIN_GPUS", 4)
    assert portfolio.runs_both(pooled, SolveOptions(threads=2))
    monkeypatch.setattr(portfolio, "PORTFOLIO_MIN_GPUS", 5)
    assert not portfolio.runs_both(pooled, SolveOptions(threads=2))
