"""``export`` and ``export-config``: the MILP as an MPS or LP file, a plan as framework settings."""

from __future__ import annotations

import argparse
import os
import sys

from rlplan.cli.common import (
    EXIT_INFEASIBLE,
    EXIT_NO_PLAN,
    EXIT_OK,
    check_solve_flag,
    load_problem,
    report_unplaceable,
)
from rlplan.outputs.files import check_output_file, write_text
from rlplan.outputs.frameworks import FRAMEWORKS, export_config, locate_instance
from rlplan.rpeg.errors import InputError, PlanError, did_you_mean
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import read_plan
from rlplan.solvers import milp
from rlplan.solvers.local import warm_start_plan
from rlplan.solvers.options import SolveOptions


def command_export(args: argparse.Namespace) -> int:
    """Write the MILP that ``--solver milp`` solves as an MPS or LP file."""
    check_solve_flag("seed", args.seed)
    check_output_file(args.out, "--out")
    problem = export_variant(load_problem(args.instance), args.template)
    if report_unplaceable(problem):
        return EXIT_INFEASIBLE
    defaults = problem.instance.solver
    options = SolveOptions(
        time_limit=defaults.time_limit,
        threads=defaults.threads,
        seed=defaults.seed if args.seed is None else args.seed,
    )
    # The whole limit for the start search: the same model as `solve --solver milp`
    # builds whenever its evaluation budget, not the clock, ends the search.
    start = warm_start_plan(problem, options, time_limit=options.time_limit)
    if start is None:
        print("no plan: no heuristic plan fits in memory to size the model")
        return EXIT_NO_PLAN
    built = milp.build_model(problem, start)
    built.milp.write(args.out, args.format, built.start_values)
    sizes = built.milp.sizes()
    print(
        f"wrote {args.out}: {sizes['binaries']} binaries, {sizes['continuous']} continuous, "
        f"{sizes['constraints']} constraints; objective = makespan in seconds "
        f"(durations floored to {built.formulation.unit:.3e} s)"
    )
    return EXIT_OK


def export_variant(problem: Problem, template: str | None) -> Problem:
    """The problem restricted to the template whose model ``export`` writes."""
    if template is not None:
        if template not in problem.templates:
            raise InputError(
                "--template",
                f"{template} is not in the instance's plan space ({', '.join(problem.templates)})",
            )
        return problem.variant(template)
    if len(problem.templates) > 1:
        print(
            "note: the instance allows AC-share; this is the separate template's model "
            "(--template ac_share writes the fused one, whose makespan the objective "
            "multiplies by 1 + lambda_ac)",
            file=sys.stderr,
        )
        return problem.variant(problem.templates[0])
    return problem


def command_export_config(args: argparse.Namespace) -> int:
    """Write a plan as the settings of verl, OpenRLHF, NeMo RL or slime."""
    if args.framework is None:
        raise InputError("--framework", f"missing (one of {', '.join(FRAMEWORKS)})")
    if args.framework not in FRAMEWORKS:
        allowed = ", ".join(FRAMEWORKS)
        raise InputError(
            "--framework",
            f"unknown framework {args.framework!r} (allowed: {allowed})"
            + did_you_mean(args.framework, FRAMEWORKS),
        )
    check_output_file(args.out, "--out")
    if not os.path.isfile(args.plan):
        raise PlanError(args.plan, "no such file")
    problem = load_problem(args.instance or locate_instance(args.plan))
    plan = read_plan(args.plan, problem.directory)
    text = export_config(problem, plan, args.framework, os.path.basename(args.plan))
    if args.out:
        write_text(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK
