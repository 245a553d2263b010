"""``compare``, ``pareto`` and ``sweep``: many solves, over a suite, cluster sizes or a field."""

from __future__ import annotations

import argparse
import math
import os

from rlplan.cli.common import check_count, check_solve_flag, default_out, default_workers
from rlplan.cli.run_folder import instance_argument
from rlplan.compare.pareto import ParetoSettings, run_pareto
from rlplan.compare.pareto_mix import MAX_MIXES, MixBudget, MixSettings, run_pareto_mix
from rlplan.compare.runner import BenchmarkSettings, run_benchmark
from rlplan.compare.shapes import parse_counts
from rlplan.compare.suite import DEFAULT_SUITE, load_suite
from rlplan.compare.sweep import SweepSettings, run_sweep
from rlplan.compare.sweep_parameters import parse_parameter
from rlplan.compare.variants import RunSettings
from rlplan.outputs.files import check_output_folder
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.schema.limits import MAX_GPUS, MAX_THREADS


def command_compare(args: argparse.Namespace) -> int:
    """Benchmark solvers over a suite of instances."""
    if args.instances and args.suite:
        raise InputError("--suite", "give instance files or --suite, not both")
    check_run_options(args)
    check_count(args.repeats, "--repeats", 1, 10_000)
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
        workers=default_workers(args.workers),
        out=args.out,
        seed=args.seed,
        ray_address=args.ray_address,
        quiet=args.quiet,
    )
    return run_benchmark(settings)


def check_run_options(args: argparse.Namespace) -> None:
    """Refuse, before any work, a bad time limit, seed, worker count or output folder."""
    check_solve_flag("time_limit", args.time_limit)
    check_solve_flag("seed", args.seed)
    check_count(args.workers, "--workers", 1, MAX_THREADS)
    if args.out:
        check_output_folder(args.out)


def run_settings(args: argparse.Namespace) -> RunSettings:
    """Time limit, executor and workers of ``pareto`` and ``sweep``."""
    check_run_options(args)
    time_limit = args.time_limit
    if time_limit is None:
        time_limit = load_instance(args.instance).solver.time_limit
    return RunSettings(
        time_limit=time_limit,
        executor=args.executor,
        workers=default_workers(args.workers),
        seed=args.seed,
        ray_address=args.ray_address,
        quiet=args.quiet,
    )


def _instance_stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def command_pareto(args: argparse.Namespace) -> int:
    """Solve the instance per cluster size and GPU type, or per pool mix; write the frontier."""
    budget = mix_budget(args)
    counts = parse_counts(args.gpus) if budget is None else None
    args.instance = instance_argument(args.instance)
    if args.gpu_types is not None and not os.path.isfile(args.gpu_types):
        raise InputError("--gpu-types", f"{args.gpu_types}: no such file")
    out = args.out or default_out("pareto-" + _instance_stem(args.instance))
    if budget is not None:
        mix = MixSettings(args.instance, args.gpu_types, budget, out, run_settings(args))
        return run_pareto_mix(mix)
    settings = ParetoSettings(args.instance, counts, args.gpu_types, out, run_settings(args))
    return run_pareto(settings)


def mix_budget(args: argparse.Namespace) -> MixBudget | None:
    """The pool-mix budget of ``pareto``, or None for the GPU-count form.

    Raises
    ------
    InputError
        Naming the option: both or neither of ``--gpus`` and a budget, both
        budgets, a budget that is not a positive number, a total that is not
        a positive whole number, ``--max-mixes`` without a budget or out of
        range, or a budget without ``--gpu-types``.
    """
    per_hour, total = args.budget_per_hour, args.total_gpus
    if per_hour is None and total is None:
        if args.max_mixes is not None:
            raise InputError("--max-mixes", "only with --budget-per-hour or --total-gpus")
        if args.gpus is None:
            raise InputError(
                "--gpus",
                "give --gpus COUNTS, or --budget-per-hour X or --total-gpus N for pool mixes",
            )
        return None
    if per_hour is not None and total is not None:
        raise InputError("--total-gpus", "give --budget-per-hour or --total-gpus, not both")
    option = "--budget-per-hour" if per_hour is not None else "--total-gpus"
    if args.gpus is not None:
        raise InputError("--gpus", f"not with {option}: pool mixes choose their GPU counts")
    if args.gpu_types is None:
        raise InputError("--gpu-types", f"{option} needs a GPU types file with prices")
    max_mixes = MAX_MIXES
    if args.max_mixes is not None:
        max_mixes = _whole(args.max_mixes, "--max-mixes", 10_000)
    if per_hour is not None:
        try:
            value = float(per_hour)
        except ValueError:
            value = float("nan")
        if not (value > 0 and math.isfinite(value)):
            raise InputError(
                "--budget-per-hour",
                f"must be a positive number (currency units per hour), got {per_hour!r}",
            )
        return MixBudget(per_hour=value, max_mixes=max_mixes)
    return MixBudget(total_gpus=_whole(total, "--total-gpus", MAX_GPUS), max_mixes=max_mixes)


def _whole(text: str, option: str, most: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(option, f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= most:
        raise InputError(option, f"must be between 1 and {most}, got {value}")
    return value


def command_sweep(args: argparse.Namespace) -> int:
    """Re-solve while one field varies; with --tornado rank the hardware fields."""
    parameter = parse_parameter(args.param) if args.param is not None else None
    args.instance = instance_argument(args.instance)
    if parameter is None and not args.tornado:
        raise InputError("--param", "give --param PATH=v1,v2,... or --tornado")
    fields = None
    if args.fields is not None:
        if not args.tornado:
            raise InputError("--fields", "only with --tornado")
        fields = tuple(f.strip() for f in args.fields.split(",") if f.strip())
        if not fields:
            raise InputError("--fields", "name at least one hardware field")
    out = args.out or default_out("sweep-" + _instance_stem(args.instance))
    return run_sweep(
        SweepSettings(args.instance, parameter, args.tornado, out, run_settings(args), fields)
    )
