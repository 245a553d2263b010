"""Realism check against published runs: ``python -m rlplan.compare.realism [--csv FILE]``.

Every instance in ``instances/published/`` carries a ``reference`` section
(a measured step time, optionally measured phase times, and the source) and
sits beside ``NAME.plan.json``, the published configuration as a plan. This
module simulates each published plan and prints predicted / measured for
the step and for every measured phase, then solves the instance and prints
the planner's best step time and its speed-up over the published plan.

The model is judged on the published plan, never on the planner's best plan.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rlplan.outputs.files import write_text
from rlplan.paths import INSTANCES
from rlplan.rpeg.errors import InputError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.plan import Plan, read_plan
from rlplan.solvers import SolveOptions, solve

#: Where the published runs live.
PUBLISHED = INSTANCES / "published"
#: Predicted / measured step time the model must hold for every shipped run.
BAND = (0.67, 1.5)
CSV_COLUMNS = ("name", "measured_s", "predicted_s", "ratio", "best_s", "speedup")


@dataclass
class PhaseCheck:
    """One measured phase against the simulated run times of its vertices (one step)."""

    name: str
    measured_s: float
    predicted_s: float

    @property
    def ratio(self) -> float:
        """Predicted / measured."""
        return self.predicted_s / self.measured_s


@dataclass
class RunCheck:
    """A published run: measured, predicted for its published plan, and the planner's best."""

    name: str
    measured_s: float
    predicted_s: float
    phases: list[PhaseCheck] = field(default_factory=list)
    best_s: float | None = None
    best_status: str = ""
    source: str = ""

    @property
    def ratio(self) -> float:
        """Predicted / measured step time."""
        return self.predicted_s / self.measured_s

    @property
    def speedup(self) -> float | None:
        """Published plan's simulated step time over the planner's best."""
        return None if self.best_s is None else self.predicted_s / self.best_s

    @property
    def within_band(self) -> bool:
        """Whether the ratio lies in :data:`BAND`."""
        return BAND[0] <= self.ratio <= BAND[1]


def published_runs(folder: Path = PUBLISHED) -> list[tuple[Path, Path]]:
    """(instance, plan) file pairs of the published runs, sorted by name."""
    pairs = []
    for instance in sorted(folder.glob("*.yaml")):
        plan = instance.with_suffix(".plan.json")
        if plan.is_file():
            pairs.append((instance, plan))
    return pairs


def phase_times(problem: Problem, plan: Plan, trace: Trace) -> dict[str, float]:
    """Seconds of each vertex's run in one step (the mean over the k_eval steps).

    A run counts with its wake and sleep or onload and offload: the
    frameworks' phase timers include them.
    """
    totals: dict[str, float] = {}
    for (vertex, _), (start, end) in trace.run_spans().items():
        totals[vertex] = totals.get(vertex, 0.0) + end - start
    k_eval = problem.instance.k_eval
    return {name: seconds / k_eval for name, seconds in totals.items()}


def check_run(instance_path: Path, plan_path: Path) -> tuple[RunCheck, Problem, Plan]:
    """Simulate a published plan against its instance's reference section."""
    problem = Problem.load(str(instance_path))
    reference = problem.instance.reference
    if reference is None:
        raise InputError(str(instance_path), "a published run needs a reference section")
    plan = read_plan(plan_path, problem.directory)
    trace = problem.simulator.simulate(plan)
    if not trace.feasible:
        raise InputError(
            str(plan_path),
            f"the published plan {trace.overflow_words()} in the model",
        )
    per_vertex = phase_times(problem, plan, trace)
    phases = []
    for name, measured, vertices in reference.phases:
        missing = [v for v in vertices if v not in per_vertex]
        if missing:
            raise InputError(
                f"reference.phases.{name}", f"no vertex {missing[0]!r} in this instance's plan"
            )
        phases.append(PhaseCheck(name, measured, sum(per_vertex[v] for v in vertices)))
    check = RunCheck(
        name=problem.instance.name,
        measured_s=reference.step_time_s,
        predicted_s=trace.step_time,
        phases=phases,
        source=reference.source,
    )
    return check, problem, plan


def solve_best(problem: Problem, time_limit: float, threads: int) -> tuple[float | None, str]:
    """The planner's best simulated step time for the instance (auto portfolio)."""

    result = solve("auto", problem, SolveOptions(time_limit=time_limit, threads=threads))
    return result.step_time, result.status.value


def render_table(checks: list[RunCheck]) -> str:
    """Plain-text table of the checks."""
    lines = [
        f"{'run':44s} {'measured':>9s} {'predicted':>9s} {'ratio':>6s} "
        f"{'best':>9s} {'speed-up':>8s}  status",
    ]
    for check in checks:
        best = "—" if check.best_s is None else f"{check.best_s:9.1f}"
        speedup = "—" if check.speedup is None else f"{check.speedup:7.2f}x"
        flag = "" if check.within_band else f"  OUTSIDE [{BAND[0]}, {BAND[1]}]"
        lines.append(
            f"{check.name:44s} {check.measured_s:9.1f} {check.predicted_s:9.1f} "
            f"{check.ratio:6.2f} {best:>9s} {speedup:>8s}  {check.best_status}{flag}"
        )
        for phase in check.phases:
            lines.append(
                f"  phase {phase.name:36s} {phase.measured_s:9.1f} {phase.predicted_s:9.1f} "
                f"{phase.ratio:6.2f}"
            )
    return "\n".join(lines)


def render_csv(checks: list[RunCheck]) -> str:
    """CSV with columns ``name,measured_s,predicted_s,ratio,best_s,speedup``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for check in checks:
        writer.writerow(
            [
                check.name,
                f"{check.measured_s:.6g}",
                f"{check.predicted_s:.6g}",
                f"{check.ratio:.4f}",
                "" if check.best_s is None else f"{check.best_s:.6g}",
                "" if check.speedup is None else f"{check.speedup:.4f}",
            ]
        )
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    """Run the realism check; returns the exit code (0 when every run is within the band)."""
    parser = argparse.ArgumentParser(prog="python -m rlplan.compare.realism", description=__doc__)
    parser.add_argument("--csv", help="also write the table as CSV to this file")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=30.0,
        help="seconds for the planner's solve of each run (default 30)",
    )
    parser.add_argument("--threads", type=int, default=2, help="solver threads (default 2)")
    parser.add_argument("--no-solve", action="store_true", help="only simulate the published plans")
    parser.add_argument(
        "--folder", default=str(PUBLISHED), help="folder of published runs (default: shipped)"
    )
    args = parser.parse_args(argv)
    if not args.time_limit > 0 or args.threads < 1:
        print("error: --time-limit must be > 0 and --threads >= 1", file=sys.stderr)
        return 2
    if args.csv is not None:
        target = os.path.dirname(os.path.abspath(args.csv))
        if not os.path.isdir(target) or not os.access(target, os.W_OK):
            print(f"error: --csv: cannot write into {target}", file=sys.stderr)
            return 2
    pairs = published_runs(Path(args.folder))
    if not pairs:
        print(f"error: no published runs (NAME.yaml + NAME.plan.json) in {args.folder}")
        return 2
    checks = []
    try:
        for instance_path, plan_path in pairs:
            check, problem, _ = check_run(instance_path, plan_path)
            if not args.no_solve:
                check.best_s, check.best_status = solve_best(problem, args.time_limit, args.threads)
            checks.append(check)
            print(f"checked {check.name}", file=sys.stderr, flush=True)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_table(checks))
    outside = [c.name for c in checks if not c.within_band]
    print(
        f"{len(checks) - len(outside)} of {len(checks)} runs within "
        f"[{BAND[0]}, {BAND[1]}] x measured (the model is judged on the published plans)"
    )
    if args.csv is not None:
        write_text(args.csv, render_csv(checks))
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
