"""Command line: plan RL-for-LLM training steps on GPU clusters.

Subcommands: check, baseline, simulate, solve, export, export-config, compare, pareto,
sweep. Bad input
prints one line naming the problem and exits with code 2. ``python main.py`` and the ``rlplan``
console script (:mod:`rlplan.cli`) both run :func:`main`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Callable

from rlplan.outputs.files import OutputBundle, check_output_file, check_output_folder, write_json
from rlplan.outputs.gantt import write_gantt
from rlplan.outputs.perfetto import perfetto_trace
from rlplan.outputs.vocabulary import framework_view
from rlplan.rpeg import interrupts as stop
from rlplan.rpeg.errors import InputError, cap
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.cost import parameter_count
from rlplan.rpeg.model.plan import plan_to_json, read_plan
from rlplan.rpeg.schema.limits import MAX_SEED, MAX_THREADS, MAX_TIME_LIMIT
from rlplan.rpeg.search.baselines import concurrent_plan, greedy_plan
from rlplan.solvers import BACKENDS
from rlplan.solvers.common import best_over_templates
from rlplan.version import __version__

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_NO_PLAN = 0, 1, 2, 3


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"


def check_option(
    value: float | None, option: str, low: float, high: float, what: str = "a number"
) -> None:
    """Refuse, before any work, an option value that is not finite or not in ``[low, high]``.

    Parameters
    ----------
    value
        The value given (None: not given, nothing to check).
    option
        The option's name, for the error line.
    low, high
        The accepted range (inclusive).
    what
        What the value is, in words (``"a number of seconds"``).
    """
    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        span = " to ".join(str(int(x)) if float(x).is_integer() else f"{x:g}" for x in (low, high))
        raise InputError(option, f"must be {what} from {span}, got {value}")


def check_time_limit(value: float | None, option: str = "--time-limit") -> None:
    """Refuse a time limit that is not a positive, finite number of seconds (at most a week)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise InputError(option, f"must be a positive number of seconds, got {value}")
    check_option(value, option, 0, MAX_TIME_LIMIT, "a number of seconds")


def _load(path: str) -> Problem:
    problem = Problem.load(path)
    for warning in problem.instance.warnings:
        print(warning, file=sys.stderr)
    return problem


def _report_unplaceable(problem: Problem) -> bool:
    missing = problem.unplaceable()
    for name, shortfall in missing:
        print(f"INFEASIBLE: {problem.unplaceable_reason(name, shortfall)}")
    return bool(missing)


def command_check(args: argparse.Namespace) -> int:
    """Print what the instance implies: sizes, fastest candidates, bounds."""
    problem = _load(args.instance)
    instance, directory = problem.instance, problem.directory
    hardware, cluster = instance.hardware, directory.cluster
    print(f"instance     {instance.name}: {instance.algorithm}, k_eval {instance.k_eval}")
    print(
        f"cluster      {hardware.racks} x {hardware.nodes_per_rack} x {hardware.gpus_per_node}"
        f" = {hardware.num_gpus} GPUs, {_gb(hardware.usable_memory)} usable each"
    )
    print("models")
    for model, spec in instance.models.items():
        params = parameter_count(spec, model)
        shape = f"{spec.layers} layers, d {spec.hidden_dim}"
        print(f"  {model:<10} {params / 1e9:8.3f} B parameters ({shape})")
    print(
        f"plan space   {len(cluster.blocks)} blocks, {len(cluster.shapes)} shapes, "
        f"{directory.size} candidates, "
        f"{directory.assignment_count()} (vertex, block, strategy) assignments"
    )
    print(
        f"             {directory.enumerated} strategies per (vertex, shape) enumerated, "
        f"{directory.fitting} fit in memory, {directory.size} kept after dominance pruning"
    )
    pins = instance.placement.pin
    if pins:
        from rlplan.rpeg.schema.pins import pin_words

        pinned = [f"{name} {pin_words(pin)}" for name, pin in pins.vertices]
        pinned += [f"staleness {model} {steps}" for model, steps in pins.staleness]
        print(f"pins         {'; '.join(pinned)}")
    if instance.ac_share:
        print(
            f"templates    separate actor and critic, or fused actor-critic (ac_share): "
            f"fused score = step time x (1 + lambda_ac) = x {1 + instance.lambda_ac:g}"
        )
    print("fastest candidate per vertex")
    for template in problem.templates:
        variant = problem.variant(template).directory
        shown = variant.template.vertices
        if template != problem.templates[0]:
            # The fused template's own vertices (the shared ones are listed above).
            shown = tuple(v for v in shown if v.name not in directory.template.names)
        for vertex in shown:
            index = variant.template.index(vertex.name)
            candidate = variant.fastest(index)
            if candidate is None:
                print(f"  {vertex.name:<16} none fits in memory")
                continue
            size = candidate.shape[0] * candidate.shape[1] * candidate.shape[2]
            print(
                f"  {vertex.name:<16} {candidate.time:10.4f} s on {size:>4} GPUs "
                f"{candidate.strategy.label():<24} {_gb(candidate.memory)} per GPU"
            )
    if _report_unplaceable(problem):
        return EXIT_INFEASIBLE
    for template in problem.templates:
        variant = problem.variant(template)
        if variant.unplaceable():
            print(f"the {template} template has a vertex that fits nowhere: only the other counts")
            continue
        bounds, factor = variant.bounds, variant.score_factor
        words = "lower bounds on the makespan (step time = makespan / k_eval)"
        if len(problem.templates) > 1:
            words = f"{template}: lower bounds on the makespan" + (
                f"; on the score: x {factor:g}" if factor != 1 else ""
            )
        print(words)
        for label, value in (("compute", bounds.compute), ("critical path", bounds.critical_path)):
            print(f"  {label:<14} {value:10.4f} s  (step {value / instance.k_eval:.4f} s)")
    return EXIT_OK


def print_trace_summary(trace: Trace, problem: Problem) -> None:
    """Print the simulated figures of a plan."""
    print(f"makespan     {trace.makespan:.4f} s over {trace.k_eval} steps")
    print(f"step time    {trace.step_time:.4f} s")
    if problem.instance.ac_share or trace.factor != 1:
        fused = trace.template == "ac_share"
        words = "fused actor-critic" if fused else "separate actor and critic"
        print(f"template     {trace.template} ({words})")
        print(
            f"score        {trace.score_step:.4f} s per step (step time x {trace.factor:g}; "
            "what the solvers minimise)"
        )
    print(f"samples/s    {trace.samples_per_s:.3f}")
    print(f"tokens/s     {trace.generated_tokens_per_s:.1f} generated")
    peak = max(trace.peak_memory_bytes)
    print(f"memory       peak {_gb(peak)} of {_gb(trace.capacity_bytes)} per GPU")
    if not trace.feasible:
        worst = max(range(len(trace.peak_memory_bytes)), key=lambda g: trace.peak_memory_bytes[g])
        print(f"INFEASIBLE: GPU {worst} overflows memory by {_gb(trace.violation_bytes)}")


def _write_plan_outputs(
    out: str,
    problem: Problem,
    plan_document: dict,
    trace: Trace,
    extra: dict[str, Callable[[str], None]] | None = None,
    status: str | None = None,
) -> list[str]:
    with OutputBundle(out, replace=True) as bundle:
        bundle.write_json("plan.json", plan_document)
        bundle.write_json("trace.json", trace.to_json())
        bundle.write_with(
            "gantt.png",
            lambda path: write_gantt(
                trace,
                problem.instance.hardware,
                path,
                instance_name=problem.instance.name,
                status=status,
            ),
        )
        for name, writer in (extra or {}).items():
            bundle.write_with(name, writer)
        return bundle.commit()


def command_baseline(args: argparse.Namespace) -> int:
    """Build a baseline plan, simulate it and write plan, trace, report and Gantt chart."""
    from rlplan.outputs.report_md import render_report
    from rlplan.solvers.common import plan_result

    started = time.perf_counter()
    check_output_folder(args.out, run=True)
    problem = _load(args.instance)
    if _report_unplaceable(problem):
        return EXIT_INFEASIBLE
    build = greedy_plan if args.kind == "greedy" else concurrent_plan
    plan, _ = best_over_templates(problem, build)
    if plan is None:
        print(f"no plan: the {args.kind} baseline found no memory-feasible plan")
        return EXIT_NO_PLAN
    trace = problem.simulator.simulate(plan)
    print(f"{args.kind} baseline for {problem.instance.name}")
    print_trace_summary(trace, problem)
    result = plan_result(problem, args.kind, plan, started)
    report = render_report(problem, result, trace)

    def write_report(path: str) -> None:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(report)

    written = _write_plan_outputs(
        args.out,
        problem,
        plan_to_json(plan, problem.directory),
        trace,
        extra={"report.md": write_report},
        status=f"{result.status.value} ({args.kind} baseline)",
    )
    print("wrote " + ", ".join(written))
    return EXIT_OK


def command_simulate(args: argparse.Namespace) -> int:
    """Simulate a plan file."""
    check_output_file(args.trace, "--trace")
    check_output_file(args.gantt, "--gantt")
    problem = _load(args.instance)
    plan = read_plan(args.plan, problem.directory)
    trace = problem.simulator.simulate(plan)
    print_trace_summary(trace, problem)
    if args.trace:
        write_json(args.trace, trace.to_json())
        print(f"wrote {args.trace}")
    if args.gantt:
        folder = os.path.dirname(os.path.abspath(args.gantt))
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".tmp-{os.path.basename(args.gantt)}")
        write_gantt(
            trace, problem.instance.hardware, temporary, instance_name=problem.instance.name
        )
        os.replace(temporary, args.gantt)
        print(f"wrote {args.gantt}")
    return EXIT_OK if trace.feasible else EXIT_INFEASIBLE


def _default_out(instance_name: str) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{instance_name}-{stamp}")


def command_solve(args: argparse.Namespace) -> int:
    """Solve an instance with a backend; write plan, trace, result, report and Gantt chart."""
    import dataclasses

    from rlplan.solvers import get_solver
    from rlplan.solvers.options import SolveOptions
    from rlplan.solvers.progress import finish_history, make_progress

    check_time_limit(args.time_limit)
    check_option(args.threads, "--threads", 1, MAX_THREADS, "a whole number")
    check_option(args.seed, "--seed", 0, MAX_SEED, "a whole number")
    check_option(args.evaluations, "--evaluations", 1, 1e9, "a whole number")
    if args.out:
        check_output_folder(args.out, run=True)
    problem = _load(args.instance)
    instance = problem.instance
    if args.evaluations is not None:
        optimizer = dataclasses.replace(instance.optimizer, e_max=args.evaluations)
        problem = Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))
        instance = problem.instance
    defaults = instance.solver
    name = args.solver or defaults.backend
    solver = get_solver(name)
    time_limit = defaults.time_limit if args.time_limit is None else args.time_limit
    threads = defaults.threads if args.threads is None else args.threads
    gap = defaults.gap if args.gap is None else args.gap
    if not 0 <= gap < 1:
        raise InputError("--gap", f"must be a relative gap in [0, 1), e.g. 0.01, got {gap}")
    out = args.out or _default_out(instance.name)
    if not args.out:
        check_output_folder(out, run=True)
    label = f"{name} on {instance.name}"
    options = SolveOptions(
        time_limit=time_limit,
        threads=threads,
        seed=defaults.seed if args.seed is None else args.seed,
        gap=gap,
        # The exact solver's own log replaces the progress line with --verbose.
        progress=make_progress(label, instance.k_eval, args.quiet or args.verbose),
        verbose=args.verbose,
    )
    # From here on SIGINT and SIGTERM stop the search, and the best plan so far is written.
    stop.reset()
    with stop.handle_signals(_say_stopping):
        try:
            result = solver(problem, options)
        finally:
            options.progress.close()
        if stop.requested():
            result.stats["interrupted_by"] = stop.reason()
            # The backend's own note may blame the clock ("time limit reached while
            # building"); the signal ended the search, so the message says that
            # and the backend's note is kept beside it.
            if result.message:
                result.stats["solver_message"] = result.message
            result.message = f"interrupted by {stop.reason()}: best plan so far"
        result.stats["incumbent_history"] = finish_history(
            options.progress.history, result.makespan, result.wall_time
        )
        code = _finish_solve(args, problem, result, out)
    if stop.abandoned():
        # A native solver still runs in a daemon thread: leave without waiting for it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _say_stopping(signum: int) -> None:
    """The line a first SIGINT or SIGTERM prints during a solve."""
    import signal

    name = signal.Signals(signum).name
    print(
        f"\n{name}: stopping, writing the best plan so far (again to exit at once)",
        file=sys.stderr,
        flush=True,
    )


def _finish_solve(args: argparse.Namespace, problem: Problem, result, out: str) -> int:
    """Simulate the result's plan, write the run folder, print the summary; the exit code."""
    from rlplan.outputs.report_md import render_report
    from rlplan.solvers.result import Status

    instance = problem.instance
    trace = problem.simulator.simulate(result.plan) if result.plan is not None else None
    with OutputBundle(out, replace=True) as bundle:
        document = result.to_json()
        if result.plan is not None and trace is not None:
            document["framework"] = framework_view(problem, result.plan, trace)
        bundle.write_json("result.json", document)
        bundle.write_text("report.md", render_report(problem, result, trace))
        if result.plan is not None and trace is not None:
            bundle.write_json("plan.json", plan_to_json(result.plan, problem.directory))
            bundle.write_json("trace.json", trace.to_json())
            bundle.write_json(
                "trace.perfetto.json",
                perfetto_trace(trace, instance.hardware, instance_name=instance.name),
            )
            bundle.write_with(
                "gantt.png",
                lambda path: write_gantt(
                    trace,
                    instance.hardware,
                    path,
                    instance_name=instance.name,
                    status=result.status.value,
                    step_time=result.step_time,
                ),
            )
        bundle.write_text("report.html", _html_report(bundle, problem, result, trace))
        with stop.critical():  # a second signal waits for the folder swap (milliseconds)
            written = bundle.commit()
    print(f"status       {result.describe_status()} ({result.solver}, {result.wall_time:.2f} s)")
    if result.message:
        print(f"note         {result.message}")
    if result.step_time is not None:
        print(
            f"step time    {result.step_time:.4f} s (simulated; makespan {result.makespan:.4f} s)"
        )
    template = result.describe_template()
    if template is not None:
        print(f"score        {result.score_step:.4f} s per step (the objective)")
        print(f"template     {template}")
    if result.bound is not None:
        shown = "" if result.gap is None else f", gap {result.gap:.4%}"
        if result.bound_proven_by is not None:
            shown += f"; proven by {result.bound_proven_by}"
        what = "score" if result.lambda_ac is not None else "makespan"
        print(
            f"bound        {result.bound_step:.4f} s per step ({what} {result.bound:.4f} s){shown}"
        )
    print("wrote " + ", ".join(written))
    if result.status.has_plan:
        return EXIT_OK
    if result.status is Status.INFEASIBLE:
        return EXIT_INFEASIBLE
    return EXIT_NO_PLAN


def _html_report(bundle: OutputBundle, problem: Problem, result, trace: Trace | None) -> str:
    """``report.html`` of a solve, with the Gantt chart staged in ``bundle`` if any."""
    from rlplan.outputs.report_html import render_html_report

    gantt = bundle.path("gantt.png")
    png = None
    if os.path.exists(gantt):
        with open(gantt, "rb") as handle:
            png = handle.read()
    return render_html_report(problem, result, trace, png)


def command_export(args: argparse.Namespace) -> int:
    """Write the MILP that ``--solver milp`` solves as an MPS or LP file."""
    from rlplan.solvers import milp
    from rlplan.solvers.local import warm_start_plan
    from rlplan.solvers.options import SolveOptions

    check_option(args.seed, "--seed", 0, MAX_SEED, "a whole number")
    check_output_file(args.out, "--out")
    problem = _load(args.instance)
    if args.template is not None:
        if args.template not in problem.templates:
            raise InputError(
                "--template",
                f"{args.template} is not in the instance's plan space "
                f"({', '.join(problem.templates)})",
            )
        problem = problem.variant(args.template)
    elif len(problem.templates) > 1:
        print(
            "note: the instance allows AC-share; this is the separate template's model "
            "(--template ac_share writes the fused one, whose makespan the objective "
            "multiplies by 1 + lambda_ac)",
            file=sys.stderr,
        )
        problem = problem.variant(problem.templates[0])
    if _report_unplaceable(problem):
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


def command_export_config(args: argparse.Namespace) -> int:
    """Write a plan as the settings of verl, OpenRLHF or NeMo RL."""
    from rlplan.outputs.files import write_text
    from rlplan.outputs.frameworks import FRAMEWORKS, export_config, locate_instance
    from rlplan.rpeg.errors import PlanError

    if args.framework is None:
        raise InputError("--framework", f"missing (one of {', '.join(FRAMEWORKS)})")
    if args.framework not in FRAMEWORKS:
        raise InputError(
            "--framework",
            f"unknown framework {args.framework!r} (allowed: {', '.join(FRAMEWORKS)})",
        )
    check_output_file(args.out, "--out")
    if not os.path.isfile(args.plan):
        raise PlanError(args.plan, "no such file")
    problem = _load(args.instance or locate_instance(args.plan))
    plan = read_plan(args.plan, problem.directory)
    text = export_config(problem, plan, args.framework, os.path.basename(args.plan))
    if args.out:
        write_text(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def command_compare(args: argparse.Namespace) -> int:
    """Benchmark solvers over a suite of instances."""
    from rlplan.compare.runner import BenchmarkSettings, run_benchmark
    from rlplan.compare.suite import DEFAULT_SUITE, load_suite

    if args.instances and args.suite:
        raise InputError("--suite", "give instance files or --suite, not both")
    _check_run_options(args)
    check_option(args.repeats, "--repeats", 1, 10_000, "a whole number")
    instances = list(args.instances) or list(load_suite(args.suite or DEFAULT_SUITE).instances)
    solvers = [name.strip() for name in args.solvers.split(",") if name.strip()]
    if not solvers:
        raise InputError("--solvers", "name at least one solver")
    settings = BenchmarkSettings(
        instances=instances,
        solvers=solvers,
        time_limit=args.time_limit,
        repeats=args.repeats,
        executor=args.executor,
        workers=args.workers if args.workers is not None else max(1, (os.cpu_count() or 1) // 2),
        out=args.out,
        seed=args.seed,
        ray_address=args.ray_address,
        quiet=args.quiet,
    )
    return run_benchmark(settings)


def _check_run_options(args: argparse.Namespace) -> None:
    """Refuse, before any work, a bad time limit, seed, worker count or output folder."""
    check_time_limit(args.time_limit)
    check_option(args.seed, "--seed", 0, MAX_SEED, "a whole number")
    check_option(args.workers, "--workers", 1, MAX_THREADS, "a whole number")
    if args.out:
        check_output_folder(args.out)


def _run_settings(args: argparse.Namespace):
    """Time limit, executor and workers of ``pareto`` and ``sweep``."""
    from rlplan.compare.variants import RunSettings
    from rlplan.rpeg.schema.instance import load_instance

    _check_run_options(args)
    time_limit = args.time_limit
    if time_limit is None:
        time_limit = load_instance(args.instance).solver.time_limit
    return RunSettings(
        time_limit=time_limit,
        executor=args.executor,
        workers=args.workers if args.workers is not None else max(1, (os.cpu_count() or 1) // 2),
        seed=args.seed,
        ray_address=args.ray_address,
        quiet=args.quiet,
    )


def command_pareto(args: argparse.Namespace) -> int:
    """Solve the instance per cluster size and GPU type; write the Pareto frontier."""
    from rlplan.compare.pareto import ParetoSettings, run_pareto
    from rlplan.compare.shapes import parse_counts

    counts = parse_counts(args.gpus)
    if args.gpu_types is not None and not os.path.isfile(args.gpu_types):
        raise InputError("--gpu-types", f"{args.gpu_types}: no such file")
    out = args.out or _default_out("pareto-" + os.path.splitext(os.path.basename(args.instance))[0])
    return run_pareto(
        ParetoSettings(args.instance, counts, args.gpu_types, out, _run_settings(args))
    )


def command_sweep(args: argparse.Namespace) -> int:
    """Re-solve while one field varies; with --tornado rank the hardware fields."""
    from rlplan.compare.sweep import SweepSettings, parse_parameter, run_sweep

    parameter = parse_parameter(args.param) if args.param is not None else None
    if parameter is None and not args.tornado:
        raise InputError("--param", "give --param PATH=v1,v2,... or --tornado")
    fields = None
    if args.fields is not None:
        if not args.tornado:
            raise InputError("--fields", "only with --tornado")
        fields = tuple(f.strip() for f in args.fields.split(",") if f.strip())
        if not fields:
            raise InputError("--fields", "name at least one hardware field")
    out = args.out or _default_out("sweep-" + os.path.splitext(os.path.basename(args.instance))[0])
    return run_sweep(
        SweepSettings(args.instance, parameter, args.tornado, out, _run_settings(args), fields)
    )


def _explore_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("instance")
    parser.add_argument(
        "--time-limit", type=float, help=f"seconds per {what} (default: solver.time_limit)"
    )
    parser.add_argument("--executor", choices=("local", "ray"), default="local")
    parser.add_argument("--workers", type=int, help="local worker processes (default cores/2)")
    parser.add_argument("--ray-address", help="address of an existing Ray cluster")
    parser.add_argument("--seed", type=int, default=0, help="random seed of every solve")
    parser.add_argument("--out", help="output folder (default runs/<command>-<instance>-<time>)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def build_parser(prog: str = "python main.py") -> argparse.ArgumentParser:
    """The argument parser of every subcommand, named ``prog`` in its usage lines."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Plan RL-for-LLM training steps on GPU clusters."
    )
    parser.add_argument("--version", action="version", version=f"rlplan {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate an instance and print its sizes and bounds")
    check.add_argument("instance")
    check.set_defaults(handler=command_check)
    baseline = commands.add_parser("baseline", help="build and simulate a baseline plan")
    baseline.add_argument("instance")
    baseline.add_argument("--kind", choices=("greedy", "concurrent"), default="greedy")
    baseline.add_argument("--out", required=True, help="output folder")
    baseline.set_defaults(handler=command_baseline)
    simulate = commands.add_parser("simulate", help="simulate a plan file")
    simulate.add_argument("instance")
    simulate.add_argument("plan")
    simulate.add_argument("--trace", help="write the trace JSON here")
    simulate.add_argument("--gantt", help="write a Gantt chart PNG here")
    simulate.set_defaults(handler=command_simulate)
    solve = commands.add_parser("solve", help="find a plan with a solver backend")
    solve.add_argument("instance")
    solve.add_argument(
        "--solver",
        metavar="SOLVER",
        help=f"backend: {', '.join(BACKENDS)}, or milp:ENGINE for any Pyomo MIP solver "
        "(e.g. milp:cbc, milp:gurobi); default: the instance's solver.backend",
    )
    solve.add_argument("--time-limit", type=float, help="seconds (default: solver.time_limit)")
    solve.add_argument("--threads", type=int, help="worker threads of exact backends")
    solve.add_argument("--seed", type=int, help="random seed")
    solve.add_argument("--evaluations", type=int, help="override optimizer.e_max")
    solve.add_argument("--out", help="output folder (default runs/<instance>-<time>)")
    solve.add_argument(
        "--gap",
        type=float,
        help="relative gap at which exact backends may stop, e.g. 0.01 (default: solver.gap); "
        "a plan proven within it is reported OPTIMAL_WITHIN_GAP",
    )
    solve.add_argument("--quiet", action="store_true", help="no live progress")
    solve.add_argument(
        "--verbose",
        action="store_true",
        help="show the exact solver's own log (HiGHS, CP-SAT) on stderr instead of the "
        "progress line",
    )
    solve.set_defaults(handler=command_solve)
    export = commands.add_parser("export", help="write the MILP model as an MPS or LP file")
    export.add_argument("instance")
    export.add_argument("--format", choices=("mps", "lp"), default="mps")
    export.add_argument("--out", required=True, help="file to write")
    export.add_argument("--seed", type=int, help="seed of the warm-start search")
    export.add_argument(
        "--template",
        choices=("separate", "ac_share"),
        help="with AC-share: the template whose model to write (default separate)",
    )
    export.set_defaults(handler=command_export)
    export_config = commands.add_parser(
        "export-config", help="write a plan as verl, OpenRLHF or NeMo RL settings"
    )
    export_config.add_argument("plan", help="plan file (plan.json of solve, or a published plan)")
    export_config.add_argument("--framework", metavar="FRAMEWORK", help="verl, openrlhf or nemo-rl")
    export_config.add_argument(
        "--instance",
        help="instance the plan was made for (default: found from the plan's recorded name)",
    )
    export_config.add_argument("--out", help="file to write (default: standard output)")
    export_config.set_defaults(handler=command_export_config)
    compare = commands.add_parser("compare", help="benchmark solvers over an instance suite")
    compare.add_argument("instances", nargs="*", help="instance files (default: the default suite)")
    compare.add_argument("--suite", help="suite file (default instances/suites/default.yaml)")
    compare.add_argument(
        "--solvers",
        default="greedy,concurrent,local,cpsat,milp",
        help=f"comma-separated backends among {', '.join(BACKENDS)} and milp:ENGINE "
        "(default: %(default)s)",
    )
    compare.add_argument("--time-limit", type=float, default=60.0, help="seconds per cell")
    compare.add_argument("--repeats", type=int, default=1)
    compare.add_argument(
        "--seed", type=int, default=0, help="seed of repeat 0 (repeat r uses seed+r)"
    )
    compare.add_argument("--executor", choices=("local", "ray"), default="local")
    compare.add_argument("--workers", type=int, help="local worker processes (default cores/2)")
    compare.add_argument("--ray-address", help="address of an existing Ray cluster")
    compare.add_argument("--out", required=True, help="results folder (rerun to resume)")
    compare.add_argument("--quiet", action="store_true", help="no progress bar")
    compare.set_defaults(handler=command_compare)
    pareto = commands.add_parser(
        "pareto", help="frontier of cluster size, GPU type and cost per step against step time"
    )
    _explore_options(pareto, "point")
    pareto.add_argument("--gpus", required=True, help="comma-separated GPU counts, e.g. 8,16,32,64")
    pareto.add_argument(
        "--gpu-types",
        metavar="FILE",
        help="YAML list of GPU types: name, preset or hardware, price_per_gpu_hour "
        "(default: the instance's hardware, no price)",
    )
    pareto.set_defaults(handler=command_pareto)
    sweep = commands.add_parser(
        "sweep", help="re-solve while one field varies; --tornado ranks hardware fields"
    )
    _explore_options(sweep, "solve")
    sweep.add_argument(
        "--param",
        metavar="PATH=V1,V2,...",
        help="field and values, e.g. hardware.memory_per_gpu=40e9,80e9",
    )
    sweep.add_argument(
        "--tornado",
        action="store_true",
        help="rank the numeric hardware fields by the step-time change at x0.5 and x1.5",
    )
    sweep.add_argument(
        "--fields",
        metavar="F1,F2,...",
        help="with --tornado: only these hardware fields (default: every numeric one)",
    )
    sweep.set_defaults(handler=command_sweep)
    return parser


#: Longest error line printed.
MAX_ERROR_LINE = 300


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM ends a command as Ctrl-C does (staged outputs are dropped, exit 143).

    ``solve`` installs its own handlers (:mod:`rlplan.rpeg.interrupts`) while it searches.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt(signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None, prog: str = "python main.py") -> int:
    """Entry point of ``python main.py`` and ``rlplan``; returns the exit code.

    Parameters
    ----------
    argv
        Arguments after the program name (default: ``sys.argv[1:]``).
    prog
        Program name in usage and error lines.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    try:
        with _sigterm_interrupts():
            return args.handler(args)
    except InputError as exc:
        print(cap(f"error: {exc}", MAX_ERROR_LINE), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        print("interrupted", file=sys.stderr)
        return 128 + (exc.args[0] if exc.args and isinstance(exc.args[0], int) else 2)
    except BrokenPipeError:
        # The reader of our output went away (e.g. piped into `head`).
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
