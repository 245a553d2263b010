"""The argument parser: one function per subcommand adds its arguments.

Each subcommand names its handler as ``(module, function)`` under
``rlplan.cli`` (:func:`handler_of`): a command imports only what it runs
(``check`` loads no solver library, ``solve`` no benchmark runner).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

from rlplan.solvers import BACKENDS
from rlplan.version import __version__

#: What a handler is: the parsed arguments in, the exit code out.
Handler = Callable[[argparse.Namespace], int]

#: Help of the INSTANCE argument of the commands that read one.
INSTANCE_HELP = "instance file (YAML, docs/instance.md)"
#: Help of ``--out`` of ``solve`` and ``baseline``.
RUN_FOLDER_HELP = (
    "run folder to write, replaced whole; it gets a copy of the instance "
    "(default runs/<instance>-<time>)"
)
#: Help of ``--executor``.
EXECUTOR_HELP = "where the solves run: local processes or a Ray cluster (default: %(default)s)"


def _handled_by(parser: argparse.ArgumentParser, module: str, function: str) -> None:
    """Make ``rlplan.cli.<module>.<function>`` the handler of ``parser``'s subcommand."""
    parser.set_defaults(handler=(f"rlplan.cli.{module}", function))


def handler_of(args: argparse.Namespace) -> Handler:
    """The function that runs the parsed subcommand."""
    module, function = args.handler
    return getattr(importlib.import_module(module), function)


def build_parser(prog: str = "python main.py") -> argparse.ArgumentParser:
    """The argument parser of every subcommand, named ``prog`` in its usage lines."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Plan RL-for-LLM training steps on GPU clusters."
    )
    parser.add_argument("--version", action="version", version=f"rlplan {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, help="what to do (COMMAND -h explains a command)"
    )
    for add in (
        add_check,
        add_baseline,
        add_simulate,
        add_solve,
        add_export,
        add_export_config,
        add_compare,
        add_pareto,
        add_sweep,
        add_schema,
    ):
        add(commands)
    return parser


def add_check(commands: argparse._SubParsersAction) -> None:
    """``check INSTANCE``."""
    check = commands.add_parser("check", help="validate an instance and print its sizes and bounds")
    check.add_argument("instance", help=INSTANCE_HELP)
    _handled_by(check, "evaluate", "command_check")


def add_baseline(commands: argparse._SubParsersAction) -> None:
    """``baseline INSTANCE [--kind KIND] [--out FOLDER]``."""
    baseline = commands.add_parser("baseline", help="build and simulate a baseline plan")
    baseline.add_argument("instance", help=INSTANCE_HELP)
    baseline.add_argument(
        "--kind",
        choices=("greedy", "concurrent", "split"),
        default="greedy",
        help="greedy: the fastest strategy per vertex on the whole cluster; concurrent: the "
        "cluster partitioned among vertices of equal depth in the step's graph; split: "
        "generation and the rest on disjoint blocks sized by their work "
        "(default: %(default)s)",
    )
    baseline.add_argument("--out", help=RUN_FOLDER_HELP)
    _handled_by(baseline, "evaluate", "command_baseline")


def add_simulate(commands: argparse._SubParsersAction) -> None:
    """``simulate [INSTANCE] PLAN``."""
    simulate = commands.add_parser("simulate", help="simulate a plan file")
    simulate.add_argument(
        "instance",
        nargs="?",
        help="instance file the plan was made for (default: the one the plan records, "
        "e.g. the copy in its run folder)",
    )
    simulate.add_argument("plan", help="plan file (plan.json of solve or baseline)")
    simulate.add_argument("--trace", help="write the trace JSON here")
    simulate.add_argument("--gantt", help="write a Gantt chart PNG here")
    _handled_by(simulate, "evaluate", "command_simulate")


def add_solve(commands: argparse._SubParsersAction) -> None:
    """``solve INSTANCE`` and the solve options (rules: ``rpeg.schema.solver_options``)."""
    solve = commands.add_parser("solve", help="find a plan with a solver backend")
    solve.add_argument("instance", help=INSTANCE_HELP)
    solve.add_argument(
        "--solver",
        metavar="SOLVER",
        help=f"backend: {', '.join(name for name in BACKENDS if name != 'default')}, or "
        "milp:ENGINE for any Pyomo MIP solver (e.g. milp:cbc, milp:gurobi), or "
        "default:FRAMEWORK for a framework's default plan (verl, nemo-rl, openrlhf, slime); "
        "default: the instance's solver.backend",
    )
    solve.add_argument("--time-limit", type=float, help="seconds (default: solver.time_limit)")
    solve.add_argument("--threads", type=int, help="worker threads of exact backends")
    solve.add_argument("--seed", type=int, help="random seed (default: solver.seed)")
    solve.add_argument(
        "--evaluations",
        type=int,
        help="evaluation budget of the local search (overrides optimizer.e_max)",
    )
    solve.add_argument("--out", help=RUN_FOLDER_HELP)
    solve.add_argument(
        "--gap",
        type=float,
        help="relative gap at which exact backends may stop, from 0 to 1, e.g. 0.01 "
        "(default: solver.gap); a plan proven within it is reported OPTIMAL_WITHIN_GAP",
    )
    solve.add_argument("--quiet", action="store_true", help="no live progress")
    solve.add_argument(
        "--against",
        metavar="PLAN",
        help="a plan file to set the best plan against (simulated on the instance); default: "
        "a published run's plan next to its instance (NAME.plan.json beside NAME.yaml with a "
        "reference: section)",
    )
    solve.add_argument(
        "--framework",
        metavar="FRAMEWORK",
        help="plan for what this framework can run (verl, nemo-rl, openrlhf, slime; "
        "default: the instance's engine.framework); the full-space optimum is solved beside it, "
        "each on half the time limit",
    )
    solve.add_argument(
        "--verbose",
        action="store_true",
        help="show the exact solver's own log (HiGHS, CP-SAT) on stderr instead of the "
        "progress line",
    )
    _handled_by(solve, "solve", "command_solve")


def add_export(commands: argparse._SubParsersAction) -> None:
    """``export INSTANCE --out FILE``."""
    export = commands.add_parser("export", help="write the MILP model as an MPS or LP file")
    export.add_argument("instance", help=INSTANCE_HELP)
    export.add_argument(
        "--format", choices=("mps", "lp"), default="mps", help="file format (default: %(default)s)"
    )
    export.add_argument("--out", required=True, help="file to write")
    export.add_argument("--seed", type=int, help="seed of the warm-start search")
    export.add_argument(
        "--template",
        choices=("separate", "ac_share"),
        help="with AC-share: the template whose model to write (default separate)",
    )
    _handled_by(export, "export", "command_export")


def add_export_config(commands: argparse._SubParsersAction) -> None:
    """``export-config PLAN --framework FRAMEWORK``."""
    export_config = commands.add_parser(
        "export-config", help="write a plan as verl, OpenRLHF, NeMo RL or slime settings"
    )
    export_config.add_argument("plan", help="plan file (plan.json of solve, or a published plan)")
    export_config.add_argument(
        "--framework", metavar="FRAMEWORK", help="verl, openrlhf, nemo-rl or slime"
    )
    export_config.add_argument(
        "--instance",
        help="instance the plan was made for (default: found from the plan's recorded name)",
    )
    export_config.add_argument("--out", help="file to write (default: standard output)")
    _handled_by(export_config, "export", "command_export_config")


def add_compare(commands: argparse._SubParsersAction) -> None:
    """``compare [INSTANCE ...] --out FOLDER``."""
    compare = commands.add_parser("compare", help="benchmark solvers over an instance suite")
    compare.add_argument("instances", nargs="*", help="instance files (default: the default suite)")
    compare.add_argument("--suite", help="suite file (default instances/suites/default.yaml)")
    compare.add_argument(
        "--solvers",
        default="greedy,concurrent,split,local,cpsat,milp",
        help=f"comma-separated backends among {', '.join(BACKENDS)} and milp:ENGINE "
        "(default: %(default)s)",
    )
    compare.add_argument(
        "--time-limit", type=float, default=60.0, help="seconds per cell (default: %(default)g)"
    )
    compare.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="solves per (instance, solver), each with its own seed (default: %(default)s)",
    )
    compare.add_argument(
        "--seed", type=int, default=0, help="seed of repeat 0 (repeat r uses seed+r)"
    )
    compare.add_argument(
        "--executor", choices=("local", "ray"), default="local", help=EXECUTOR_HELP
    )
    compare.add_argument("--workers", type=int, help="local worker processes (default cores/2)")
    compare.add_argument("--ray-address", help="address of an existing Ray cluster")
    compare.add_argument("--out", required=True, help="results folder (rerun to resume)")
    compare.add_argument("--quiet", action="store_true", help="no progress bar")
    _handled_by(compare, "explore", "command_compare")


def _explore_options(parser: argparse.ArgumentParser, what: str) -> None:
    """The arguments ``pareto`` and ``sweep`` share."""
    parser.add_argument(
        "instance",
        help="instance file, or a run folder or its plan.json (the instance copied into it)",
    )
    parser.add_argument(
        "--time-limit", type=float, help=f"seconds per {what} (default: solver.time_limit)"
    )
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help=EXECUTOR_HELP)
    parser.add_argument("--workers", type=int, help="local worker processes (default cores/2)")
    parser.add_argument("--ray-address", help="address of an existing Ray cluster")
    parser.add_argument("--seed", type=int, default=0, help="random seed of every solve")
    parser.add_argument("--out", help="output folder (default runs/<command>-<instance>-<time>)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def add_pareto(commands: argparse._SubParsersAction) -> None:
    """``pareto INSTANCE --gpus COUNTS`` or ``--budget-per-hour X`` / ``--total-gpus N``."""
    pareto = commands.add_parser(
        "pareto", help="frontier of cluster size, GPU type and cost per step against step time"
    )
    _explore_options(pareto, "point")
    pareto.add_argument(
        "--gpus",
        help="comma-separated GPU counts, e.g. 8,16,32,64 (or --budget-per-hour / --total-gpus)",
    )
    pareto.add_argument(
        "--gpu-types",
        metavar="FILE",
        help="YAML list of GPU types: name, preset or hardware, price_per_gpu_hour "
        "(default: the instance's hardware, no price)",
    )
    pareto.add_argument(
        "--budget-per-hour",
        metavar="X",
        help="pool mixes of the --gpu-types types whose hourly price is at most X "
        "(currency units of the prices)",
    )
    pareto.add_argument(
        "--total-gpus",
        metavar="N",
        help="pool mixes of the --gpu-types types of at most N GPUs",
    )
    pareto.add_argument(
        "--max-mixes",
        metavar="N",
        help="the most pool mixes to solve (default 100)",
    )
    _handled_by(pareto, "explore", "command_pareto")


def add_sweep(commands: argparse._SubParsersAction) -> None:
    """``sweep INSTANCE --param PATH=V1,V2,...`` or ``--tornado``."""
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
    _handled_by(sweep, "explore", "command_sweep")


def add_schema(commands: argparse._SubParsersAction) -> None:
    """``schema``: the instance format as a JSON Schema, for editors' completion and checks."""
    schema = commands.add_parser(
        "schema", help="print the JSON Schema of the instance format (draft 2020-12)"
    )
    schema.add_argument("--out", help="write the schema to this file instead of printing it")
    _handled_by(schema, "evaluate", "command_schema")
