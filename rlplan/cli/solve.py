"""``solve``: find a plan with a backend, stop on SIGINT or SIGTERM with the best plan so far,
and write the run folder (plan, trace, result, reports, Gantt chart)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
from collections.abc import Sequence

from rlplan.cli.common import (
    EXIT_INFEASIBLE,
    EXIT_NO_PLAN,
    EXIT_OK,
    check_count,
    default_out,
    gigabytes,
    load_problem,
)
from rlplan.cli.run_folder import InstanceCopy, instance_copy
from rlplan.outputs.cost import cost_lines
from rlplan.outputs.files import OutputBundle, check_output_folder
from rlplan.outputs.gantt import write_gantt
from rlplan.outputs.perfetto import perfetto_trace
from rlplan.outputs.pool_groups import memory_lines, pool_spans
from rlplan.outputs.report_html import render_html_report
from rlplan.outputs.report_md import render_report
from rlplan.outputs.vocabulary import framework_view
from rlplan.rpeg import interrupts
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.plan import Plan, plan_to_json, read_plan
from rlplan.rpeg.schema.solver_options import COMMAND_LINE, check_option
from rlplan.solvers.framework_gap import framework_words, solve_in_framework
from rlplan.solvers.options import solve_request
from rlplan.solvers.progress import finish_history, make_progress
from rlplan.solvers.result import Result, Status
from rlplan.solvers.staleness import describe_staleness
from rlplan.solvers.value import step_of, value_lines, value_stats


def command_solve(args: argparse.Namespace) -> int:
    """Solve an instance with a backend; write plan, trace, result, report and Gantt chart."""
    given = {
        "backend": args.solver,
        "time_limit": args.time_limit,
        "threads": args.threads,
        "seed": args.seed,
        "gap": args.gap,
    }
    # The flags are checked before the instance is read: a bad one costs no loading time.
    for name, value in given.items():
        if value is not None and name != "backend":
            check_option(name, value, COMMAND_LINE)
    check_count(args.evaluations, "--evaluations", 1, 1e9)
    if args.out:
        check_output_folder(args.out, run=True)
    problem = load_problem(args.instance, args.framework)
    copy = instance_copy(args.instance, problem.instance)
    if args.evaluations is not None:
        instance = problem.instance
        optimizer = dataclasses.replace(instance.optimizer, e_max=args.evaluations)
        problem = Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))
    against = against_plan(args.instance, problem, args.against)
    request = solve_request(problem.instance.solver, given, COMMAND_LINE)
    out = args.out or default_out(problem.instance.name)
    if not args.out:
        check_output_folder(out, run=True)
    options = request.options
    # The exact solver's own log replaces the progress line with --verbose.
    label = f"{request.backend} on {problem.instance.name}"
    options.progress = make_progress(label, problem.instance.k_eval, args.quiet or args.verbose)
    options.verbose = args.verbose
    # From here on SIGINT and SIGTERM stop the search, and the best plan so far is written.
    interrupts.reset()
    with interrupts.handle_signals(say_stopping, say_finishing):
        try:
            result = solve_in_framework(request.solve, problem, options)
        finally:
            options.progress.close()
        # A second signal from here on exits once the run folder is complete.
        with interrupts.critical():
            mark_interrupted(result)
            if result.plan is not None and not interrupts.requested():
                entries = [] if against is None else [against_entry(*against)]
                result.stats["value"] = value_stats(problem, result, entries)
            result.stats["incumbent_history"] = finish_history(
                options.progress.history, result.makespan, result.wall_time
            )
            code = finish_solve(problem, result, out, copy)
    if interrupts.abandoned():
        # A native solver still runs in a daemon thread: leave without waiting for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def against_plan(
    instance_path: str, problem: Problem, given: str | None
) -> tuple[str, Problem, Plan] | None:
    """The configuration to set the best plan against: (its name, its problem, its plan).

    ``--against PLAN`` (read in the full plan space; a bad file is an input
    error before the solve), else a published run's plan beside its instance
    (``NAME.plan.json`` next to ``NAME.yaml`` for an instance with a
    ``reference:`` section), else None.
    """
    if given is not None:
        full = problem.with_framework(None)
        return f"plan {os.path.basename(given)}", full, read_plan(given, full.directory)
    beside = os.path.splitext(instance_path)[0] + ".plan.json"
    reference = problem.instance.reference
    if reference is None or not os.path.isfile(beside):
        return None
    full = problem.with_framework(None)
    try:
        plan = read_plan(beside, full.directory)
    except PlanError:
        return None  # a published plan the instance's plan space cannot hold: no line
    name = f"published plan {os.path.basename(beside)} (measured {reference.step_time_s:.4f} s)"
    return name, full, plan


def against_entry(name: str, problem: Problem, plan: Plan) -> dict:
    """The ``result.stats["value"]["against"]`` entry of a plan: its simulated step time."""
    return {"name": name, "step_time": step_of(problem, plan)}


def mark_interrupted(result: Result) -> None:
    """Record in ``result`` that a signal ended the search, if one did."""
    if not interrupts.requested():
        return
    result.stats["interrupted_by"] = interrupts.reason()
    # The backend's own note may blame the clock ("time limit reached while
    # building"); the signal ended the search, so the message says that
    # and the backend's note is kept beside it.
    if result.message:
        result.stats["solver_message"] = result.message
    result.message = f"interrupted by {interrupts.reason()}: best plan so far"


def say_stopping(signum: int) -> None:
    """The line a first SIGINT or SIGTERM prints during a solve."""
    name = signal.Signals(signum).name
    print(
        f"\n{name}: stopping, writing the best plan so far (again to exit at once)",
        file=sys.stderr,
        flush=True,
    )


def say_finishing(signum: int) -> None:
    """The line a second signal prints while the outputs are written."""
    name = signal.Signals(signum).name
    print(
        f"{name}: exiting once the outputs being written are complete",
        file=sys.stderr,
        flush=True,
    )


def finish_solve(
    problem: Problem, result: Result, out: str, copy: InstanceCopy | None = None
) -> int:
    """Simulate the result's plan, write the run folder, print the summary; the exit code."""
    trace = problem.simulator.simulate(result.plan) if result.plan is not None else None
    written = write_run_folder(problem, result, trace, out, copy)
    spans = pool_spans(problem.instance.pools)
    memory = memory_lines(trace, spans, gigabytes) if trace is not None and spans else []
    instance = problem.instance
    cost = cost_lines(instance.pools, result.step_time, instance.workload.sequences)
    print_solve_summary(result, written, [*memory, *cost])
    if result.status.has_plan:
        return EXIT_OK
    if result.status is Status.INFEASIBLE:
        return EXIT_INFEASIBLE
    return EXIT_NO_PLAN


def write_run_folder(
    problem: Problem,
    result: Result,
    trace: Trace | None,
    out: str,
    copy: InstanceCopy | None = None,
) -> list[str]:
    """Stage every output of a solve and swap the folder in whole; the files written.

    With ``copy`` the folder also holds the instance, which plan.json and
    result.json record (:mod:`rlplan.cli.run_folder`).
    """
    instance = problem.instance
    with OutputBundle(out, replace=True) as bundle:
        document = result.to_json()
        if result.plan is not None and trace is not None:
            document["framework"] = framework_view(problem, result.plan, trace)
        if copy is not None:
            bundle.write_text(copy.name, copy.text)
            copy.record(document)
        bundle.write_json("result.json", document)
        bundle.write_text("report.md", render_report(problem, result, trace))
        if result.plan is not None and trace is not None:
            plan = plan_to_json(result.plan, problem.directory)
            bundle.write_json("plan.json", copy.record(plan) if copy is not None else plan)
            bundle.write_json("trace.json", trace.to_json())
            bundle.write_json(
                "trace.perfetto.json",
                perfetto_trace(
                    trace,
                    instance.layout_hardware,
                    instance_name=instance.name,
                    pools=instance.pools,
                ),
            )
            bundle.write_with(
                "gantt.png",
                lambda path: write_gantt(
                    trace,
                    instance.layout_hardware,
                    path,
                    instance_name=instance.name,
                    status=result.status.value,
                    step_time=result.step_time,
                    pools=instance.pools,
                ),
            )
        bundle.write_text("report.html", html_report(bundle, problem, result, trace))
        return bundle.commit()


def print_solve_summary(result: Result, written: list[str], memory: Sequence[str] = ()) -> None:
    """Status, step time, score, bound, ``memory`` (pool and cost lines) and the files written."""
    print(f"status       {result.describe_status()} ({result.solver}, {result.wall_time:.2f} s)")
    if result.message:
        print(f"note         {result.message}")
    unrolled = result.stats.get("unrolled_step_s")
    if result.step_time is not None and unrolled is not None:
        print(
            f"step time    {result.step_time:.4f} s steady-state step (simulated period; "
            f"makespan({result.k_eval})/{result.k_eval} {unrolled:.4f} s with the fill)"
        )
    elif result.step_time is not None:
        print(
            f"step time    {result.step_time:.4f} s (simulated; makespan {result.makespan:.4f} s)"
        )
    template = result.describe_template()
    if template is not None or (result.score_step is not None and result.score_factor != 1):
        print(f"score        {result.score_step:.4f} s per step (the objective)")
    if template is not None:
        print(f"template     {template}")
    for line in framework_words(result.stats):
        print(f"framework    {line}")
    staleness = describe_staleness(result)
    if staleness is not None:
        print(f"staleness    {staleness}")
    if result.bound is not None:
        shown = "" if result.gap is None else f", gap {result.gap:.4%}"
        if result.bound_proven_by is not None:
            shown += f"; proven by {result.bound_proven_by}"
        scored = result.lambda_ac is not None or result.policy is not None
        what = "score" if scored else "makespan"
        print(
            f"bound        {result.bound_step:.4f} s per step ({what} {result.bound:.4f} s){shown}"
        )
    portfolio = describe_portfolio(result.stats.get("portfolio"))
    if portfolio is not None:
        print(f"portfolio    {portfolio}")
    for line in value_lines(result.stats, result.step_time):
        print(f"versus       {line}")
    for line in memory:
        print(line)
    print("wrote " + ", ".join(written))


def describe_portfolio(summary: dict | None) -> str | None:
    """The exact portfolio in words: each backend's status and time, and which proved.

    ``summary`` is ``stats["portfolio"]`` (:mod:`rlplan.solvers.portfolio`);
    None when the MILP did not run beside CP-SAT.
    """
    if not summary:
        return None
    parts = []
    for name, words in (("cpsat", "CP-SAT"), ("milp", "MILP")):
        line = summary.get(name) or {}
        status = line.get("status") or "no result"
        wall = line.get("wall_s")
        parts.append(f"{words} {status}" + ("" if wall is None else f" {wall:.1f} s"))
    prover = {"cpsat": "CP-SAT", "milp": "the MILP"}.get(summary.get("proved_by") or "")
    return ", ".join(parts) + (f": proved by {prover}" if prover else ": neither proved")


def html_report(bundle: OutputBundle, problem: Problem, result: Result, trace: Trace | None) -> str:
    """``report.html`` of a solve, with the Gantt chart staged in ``bundle`` if any."""
    gantt = bundle.path("gantt.png")
    png = None
    if os.path.exists(gantt):
        with open(gantt, "rb") as handle:
            png = handle.read()
    return render_html_report(problem, result, trace, png)
