"""One solve of an exact model, whatever the backend: build, warm start, solve, judge.

CP-SAT (:mod:`rlplan.solvers.cpsat`) and the MILP (:mod:`rlplan.solvers.milp`)
differ only in how they write the formulation and call their solver; an
:class:`ExactBackend` does those two things, and :func:`solve_exact` does the
rest the same way for both:

* the formulation is built from the warm start's simulated makespan, the
  backend's model from the formulation, and the warm start is handed over;
  a deadline passing on the way returns the warm start;
* a cutoff (``SolveOptions.cutoff``) below the warm start's score cuts the
  model at the makespan it allows; a cut model proven infeasible returns
  the warm start with the cutoff as its bound (docs/solvers.md#cutoffs-between-solves);
* a model called infeasible despite its warm start (and no cut) is an
  ERROR; a solver without a plan returns the warm start with the solver's
  bound;
* the decoded plan is simulated and judged by
  :func:`rlplan.solvers.common.judge_objective` against the backend's
  objective; a plan the simulator finds slower than the warm start gives
  the warm start back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from rlplan.formulation import Formulation, build_formulation
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.common import (
    BuildTimeout,
    Deadline,
    infeasible_despite_start,
    judge_objective,
    plan_result,
    warm_start_result,
)
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result

#: A solution of an exact model: assignment index per vertex, staleness per
#: trained model and start per run (time units).
Solution = tuple[list[int], dict[str, int], list[float]]


@dataclass
class ExactOutcome:
    """What an exact backend's solver returned.

    Attributes
    ----------
    solution
        The best solution found, or None.
    objective
        Its objective value (s), or None.
    bound
        The proven lower bound (s), or None.
    infeasible
        Whether the solver proved its model infeasible.
    note
        A message for the result (e.g. interrupted), or "".
    no_plan_message
        The message when ``solution`` is None.
    stats
        Solver statistics for :attr:`Result.stats`.
    """

    solution: Solution | None
    objective: float | None
    bound: float | None
    infeasible: bool = False
    note: str = ""
    no_plan_message: str = "the solver found no plan; the warm-start plan is reported"
    stats: dict = field(default_factory=dict)


class ExactBackend(Protocol):
    """The part of an exact backend that differs: writing the model and solving it.

    Attributes
    ----------
    label
        The backend's name in results (``cpsat``, ``milp``, ``milp:cbc``).
    display
        Its name in messages (``CP-SAT``, ``MILP``).
    model_name
        Its model in messages (``the CP-SAT model``, ``the MILP``).
    steady_state
        Whether it models the steady-state period; otherwise it hands back its
        warm start under that objective.
    """

    label: str
    display: str
    model_name: str
    #: Whether its model has the steady-state objective (``optimizer.objective``).
    steady_state: bool

    def build(self, formulation: Formulation, deadline: Deadline) -> dict:
        """Build the model of ``formulation``; return its size statistics.

        Raises :class:`rlplan.solvers.common.BuildTimeout` once ``deadline`` passes.
        """
        ...

    def warm_start(self, solution: Solution) -> None:
        """Hand the warm start (as converted by the formulation) to the model."""
        ...

    def cut(self, makespan: float) -> None:
        """Keep only the plans of makespan (s, over ``k_eval`` steps) at most ``makespan``."""
        ...

    def solve(self, options: SolveOptions, deadline: Deadline) -> ExactOutcome:
        """Solve the built model within ``deadline``."""
        ...


def cutoff_makespan(problem: Problem, options: SolveOptions, upper: float) -> float | None:
    """The makespan (s) the exact model is cut at, or None when the cutoff cuts nothing.

    A plan scoring below ``options.cutoff`` has a makespan below
    ``cutoff / problem.score_factor`` (every plan's factor is at least the
    problem's smallest), so cutting there keeps every plan of interest. A
    cutoff at or above the warm start's makespan ``upper`` is no cut.
    """
    if options.cutoff is None:
        return None
    makespan = options.cutoff / problem.score_factor
    return makespan if makespan < upper else None


def solve_exact(
    problem: Problem,
    options: SolveOptions,
    start: Plan,
    time_limit: float,
    backend: ExactBackend,
    stats: dict | None = None,
) -> Result:
    """Build and solve ``backend``'s model warm-started from ``start``; judge it by simulation.

    Parameters
    ----------
    problem
        The instance (one template).
    options
        Threads, seed, gap, progress.
    start
        A feasible heuristic plan: the warm start and the horizon.
    time_limit
        Seconds for the build and the solve together.
    backend
        Writes and solves the model.
    stats
        Statistics to start the result's with (e.g. the MIP engine).

    Returns
    -------
    Result
        Never worse than ``start``: when the limit passes while building,
        or the solver returns no plan (or one the simulator finds slower),
        ``start`` is reported with the best bound known
        (``stats["returned_start"]`` is then true). A plan whose objective
        disagrees with the simulator is an ERROR without the solver's bound
        (:func:`rlplan.solvers.common.judge_objective`).
    """
    started = time.perf_counter()
    deadline = Deadline(time_limit)
    upper = problem.simulator.evaluate(start).makespan
    options.progress.update(best=upper, bound=problem.bounds.best)
    stats = {**(stats or {}), "heuristic_start_makespan": upper}

    def start_result(bound: float | None, message: str) -> Result:
        return warm_start_result(
            problem, backend.label, start, started, stats, options.gap, bound, message
        )

    if problem.instance.steady_state and not backend.steady_state:
        return start_result(
            None,
            f"{backend.display} models the makespan of k_eval steps, not the steady-state "
            "period (optimizer.objective); the warm-start plan is reported",
        )
    cutoff = cutoff_makespan(problem, options, upper)
    try:
        formulation = build_formulation(problem, upper)
        deadline.check("formulation")
        stats.update(backend.build(formulation, deadline))
        stats.update(formulation.stats)
        if cutoff is not None:
            backend.cut(cutoff)
            stats["cutoff_makespan_s"] = cutoff
        deadline.check("warm start")
        backend.warm_start(formulation.warm_start(start))
        deadline.check("solver start")
        stats["build_s"] = time.perf_counter() - started
        outcome = backend.solve(options, deadline)
    except BuildTimeout as exc:
        stats["build_s"] = time.perf_counter() - started
        return start_result(
            None,
            f"time limit reached while building {backend.model_name} "
            f"(at {exc.args[0] or 'start'}); the warm-start plan is reported",
        )
    stats.update(outcome.stats)
    if outcome.infeasible and cutoff is not None:
        # No plan of makespan at most the cutoff: the cutoff is the bound.
        stats["cutoff_proved"] = True
        return start_result(
            cutoff,
            f"no plan of makespan below the cutoff {cutoff:.4f} s "
            "(a plan elsewhere is as good); the warm-start plan is reported",
        )
    if outcome.infeasible:
        return infeasible_despite_start(problem, backend.label, started, stats, options.gap)
    if outcome.solution is None or outcome.objective is None:
        return start_result(outcome.bound, outcome.note or outcome.no_plan_message)
    plan = formulation.plan_from_choice(*outcome.solution)
    result = plan_result(
        problem,
        backend.label,
        plan,
        started,
        bound=outcome.bound,
        requested_gap=options.gap,
        stats=stats,
        message=outcome.note,
    )
    if not judge_objective(
        problem, result, formulation, outcome.solution, outcome.objective, backend.display
    ):
        return result
    stats["solver_plan_makespan_s"] = result.stats["solver_plan_makespan_s"] = result.makespan
    if result.makespan is not None and upper < result.makespan:
        # Flooring lets the model rank plans a rounding error apart either way.
        slower = (
            f"the {backend.display} plan simulates slower than the warm start, which is reported"
        )
        return start_result(outcome.bound, outcome.note or slower)
    return result
