"""The MILP backend's solve: its model and MIP solver driven by the one exact-solver driver."""

from __future__ import annotations

import dataclasses
import time

from rlplan.formulation import Formulation
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers.common import Deadline, plan_result, unplaceable_result, within_space
from rlplan.solvers.exact_driver import ExactOutcome, Solution, solve_exact
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.milp import engines
from rlplan.solvers.milp.translation import BuiltMilp, MilpModel
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result
from rlplan.solvers.templates import each_template


class MilpBackend:
    """The MILP for :func:`rlplan.solvers.exact_driver.solve_exact`, solved by ``engine``.

    Parameters
    ----------
    engine
        ``highs`` (through highspy) or any MIP solver name Pyomo knows.
    """

    display = "MILP"
    model_name = "the MILP"
    steady_state = True

    def __init__(self, engine: str = "highs") -> None:
        self.engine = engine
        self.label = "milp" if engine == "highs" else f"milp:{engine}"
        self.built: BuiltMilp | None = None

    def build(self, formulation: Formulation, deadline: Deadline) -> dict:
        """Build the MILP; return its sizes."""
        milp = MilpModel(formulation, deadline)
        self.built = BuiltMilp(formulation, milp, None)
        return milp.sizes()

    def warm_start(self, solution: Solution) -> None:
        """The warm start as a value per column (HiGHS's starting solution)."""
        self.built.start_values = self.built.milp.vars.warm_start(*solution)

    def cut(self, makespan: float) -> None:
        """Bound the objective column by ``makespan`` (s over ``k_eval`` steps).

        Steady state: the column is the period T, so the bound is
        ``makespan / k_eval``.
        """
        milp = self.built.milp
        f = self.built.formulation
        value = makespan / f.problem.instance.k_eval if f.steady else makespan
        column = milp.vars.makespan.col()
        milp.model.col_upper[column] = min(milp.model.col_upper[column], value)

    def solve(self, options: SolveOptions, deadline: Deadline) -> ExactOutcome:
        """Run the MIP solver from the warm start (objective and bound in seconds)."""
        built = self.built
        if self.engine == "highs":
            outcome = engines._solve_highs(built, options, deadline)
        else:
            outcome = engines._solve_pyomo(built, self.engine, options, deadline)
        f = built.formulation
        if f.steady:  # the objective is T: k_eval periods are the simulated makespan's scale
            periods = f.problem.instance.k_eval
            outcome = dataclasses.replace(
                outcome,
                incumbent=None if outcome.incumbent is None else periods * outcome.incumbent,
                bound=None if outcome.bound is None else periods * outcome.bound,
            )
        stats = {
            "termination": outcome.termination,
            "milp_objective_s": outcome.incumbent,
            "milp_bound_s": outcome.bound,
        }
        solution = None
        if outcome.values is not None and outcome.incumbent is not None:
            solution = built.milp.vars.chosen(outcome.values)
        return ExactOutcome(
            solution,
            outcome.incumbent,
            outcome.bound,
            infeasible=outcome.infeasible,
            note="interrupted: best plan so far" if outcome.interrupted else "",
            no_plan_message=(
                f"the MIP solver found no plan ({outcome.termination.lower()}); "
                "the warm-start plan is reported"
            ),
            stats=stats,
        )


def solve_with_start(
    problem: Problem, options: SolveOptions, start: Plan, time_limit: float, engine: str = "highs"
) -> Result:
    """Build the MILP from ``start``, solve it with ``engine`` and check the plan by simulation.

    The build and the solve share ``time_limit``; the result is never worse
    than ``start`` (:func:`rlplan.solvers.exact_driver.solve_exact`).
    """
    return solve_exact(
        problem, options, start, time_limit, MilpBackend(engine), stats={"engine": engine}
    )


@each_template("milp")  # AC-share: solve each template, keep the better
def solve(problem: Problem, options: SolveOptions, engine: str = "highs") -> Result:
    """The MILP warm-started from the better baseline improved by a short local search."""
    engines.check_engine(engine)
    label = "milp" if engine == "highs" else f"milp:{engine}"
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, label, started)
    if infeasible is not None:
        return infeasible
    start = warm_start_plan(problem, options)
    if start is None:
        return plan_result(
            problem,
            label,
            None,
            started,
            requested_gap=options.gap,
            message="no heuristic plan to start from" + within_space(problem),
        )
    remaining = options.time_limit - (time.perf_counter() - started)
    result = solve_with_start(problem, options, start, remaining, engine)
    result.wall_time = time.perf_counter() - started
    return result
