"""Realism check against published runs: ``python -m rlplan.compare.realism [--csv FILE]``.

Every instance in ``instances/published/`` carries a ``reference`` section
(a measured step time, optionally measured phase times, and the source) and
sits beside ``NAME.plan.json``, the published configuration as a plan. This
module simulates each published plan and prints predicted / measured for
the step and for every measured phase, then solves the instance and prints
the planner's best plan's steady step time (measured as the published
plan's is) and its speed-up over the published plan.
Runs that name a ``reference.pair`` (the same setup run synchronously and
asynchronously) are compared as a pair: the measured speed-up of one over the
other against the predicted one.

The model is judged on the published plan, never on the planner's best plan
(docs/cost-model.md#published-runs).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
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
from rlplan.rpeg.schema.instance import Instance
from rlplan.solvers import SolveOptions, solve
from rlplan.solvers.staleness import off_policy

#: Where the published runs live.
PUBLISHED = INSTANCES / "published"
#: Predicted / measured step time the model must hold for every shipped dense run.
BAND = (0.8, 1.25)
#: The same for runs of a mixture-of-experts model: the model has fewer published
#: MoE runs to be judged on, and the target is wider (docs/realism.md).
MOE_BAND = (0.67, 1.5)
#: Dense runs held out of every fit (:mod:`rlplan.compare.calibration` leaves them out),
#: checked on the wider band of runs the model was not fitted to, and why each is held out.
HELD_OUT = {
    "verl_dapo_qwen25_math_7b_16_h20_async": (
        "verl one-step-overlap async DAPO on 2 + 6 GPUs of each node (sliced blocks), "
        "shipped after the fit"
    ),
}
#: The band of a held-out run.
HELD_OUT_BAND = (0.67, 1.5)
#: Predicted / measured time the model must hold for every published phase.
PHASE_BAND = (0.67, 1.5)
#: Largest relative error of a predicted pair speed-up against the measured one.
PAIR_TOLERANCE = 0.15
CSV_COLUMNS = (
    "name",
    "measured_s",
    "predicted_s",
    "ratio",
    "best_s",
    "speedup",
    "period_s",
    "unrolled_s",
)


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
    band: tuple[float, float] = BAND
    #: For an off-policy published plan: makespan(k_eval) / k_eval, the unrolled mean step
    #: that still holds the pipeline's fill, and the steady-state period (both in s).
    unrolled_s: float | None = None
    period_s: float | None = None

    @property
    def ratio(self) -> float:
        """Predicted / measured step time."""
        return self.predicted_s / self.measured_s

    @property
    def step_within_band(self) -> bool:
        """Whether the step ratio lies in the run's band (:data:`BAND` or :data:`MOE_BAND`)."""
        return self.band[0] <= self.ratio <= self.band[1]

    @property
    def speedup(self) -> float | None:
        """Published plan's simulated step time over the planner's best."""
        return None if self.best_s is None else self.predicted_s / self.best_s

    @property
    def within_band(self) -> bool:
        """Whether the step ratio lies in the run's band and every phase in :data:`PHASE_BAND`."""
        phases_in = all(PHASE_BAND[0] <= p.ratio <= PHASE_BAND[1] for p in self.phases)
        return self.step_within_band and phases_in


@dataclass
class PairCheck:
    """Two published runs of one setup, one faster than the other (e.g. sync and async)."""

    first: RunCheck
    second: RunCheck

    @property
    def measured_speedup(self) -> float:
        """Measured step of the first over the second."""
        return self.first.measured_s / self.second.measured_s

    @property
    def predicted_speedup(self) -> float:
        """Predicted step of the first over the second."""
        return self.first.predicted_s / self.second.predicted_s

    @property
    def error(self) -> float:
        """Predicted speed-up / measured speed-up - 1."""
        return self.predicted_speedup / self.measured_speedup - 1

    @property
    def same_order(self) -> bool:
        """Whether the model ranks the two runs as the measurements do."""
        return (self.measured_speedup - 1) * (self.predicted_speedup - 1) > 0

    @property
    def within_tolerance(self) -> bool:
        """Same ranking, and the speed-up within :data:`PAIR_TOLERANCE` of the measured one."""
        return self.same_order and abs(self.error) <= PAIR_TOLERANCE


def pair_checks(checks: list[RunCheck], pairs: dict[str, str]) -> list[PairCheck]:
    """The pairs among ``checks``: ``pairs`` maps a run to the run it names as its pair.

    Each pair is listed once, the slower measured run first.
    """
    by_name = {check.name: check for check in checks}
    found: dict[frozenset[str], PairCheck] = {}
    for name, other in pairs.items():
        if not other:
            continue
        if other not in by_name:
            raise InputError(f"{name}: reference.pair", f"no published run named {other!r}")
        first, second = by_name[name], by_name[other]
        if first.measured_s < second.measured_s:
            first, second = second, first
        found.setdefault(frozenset((name, other)), PairCheck(first, second))
    return sorted(found.values(), key=lambda pair: pair.first.name)


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


def steady_step_time(problem: Problem, plan: Plan, trace: Trace) -> float:
    """The plan's step time once the pipeline is full: makespan(k) - makespan(k - 1).

    A published step time is a mean over steps of a long run, while the first
    of the ``k_eval`` simulated steps of an off-policy plan also pays the
    pipeline's fill (the first rollout, which nothing overlaps). The marginal
    step pays it once, as a run of hundreds of steps does. With ``k_eval`` 1
    the step is the makespan; under the steady-state objective it is the
    trace's step time, the period. (docs/cost-model.md#published-runs)
    """
    k_eval = problem.instance.k_eval
    if problem.instance.steady_state:
        # The trace's step time is the period already (docs/simulator.md).
        return trace.step_time
    if k_eval < 2:
        return trace.makespan
    instance = problem.instance
    shorter = dataclasses.replace(
        instance, optimizer=dataclasses.replace(instance.optimizer, k_eval=k_eval - 1)
    )
    if plan.order is not None:
        # The same run order over the first k - 1 steps (a prefix keeps it topological).
        plan = plan.with_order(tuple((v, step) for v, step in plan.order if step < k_eval - 1))
    previous = Problem.from_instance(shorter).simulator.evaluate(plan).makespan
    return trace.makespan - previous


def check_run(
    instance_path: Path, plan_path: Path, instance: Instance | None = None
) -> tuple[RunCheck, Problem, Plan]:
    """Simulate a published plan against its instance's reference section.

    ``instance`` replaces the file's instance (the calibration varies knobs).
    """
    if instance is None:
        problem = Problem.load(str(instance_path))
    else:
        problem = Problem.from_instance(instance)
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
        predicted_s=steady_step_time(problem, plan, trace),
        phases=phases,
        source=reference.source,
        band=run_band(problem.instance),
    )
    if off_policy(plan):
        check.unrolled_s = trace.makespan / problem.instance.k_eval
        # An order over k_eval unrolled steps is no cyclic order: the period's list schedule.
        unrolled = plan.order is not None and len(plan.order) != len(plan.placements)
        check.period_s = problem.simulator.period(
            Plan(plan.placements, plan.staleness) if unrolled else plan
        )
    return check, problem, plan


def run_band(instance: Instance) -> tuple[float, float]:
    """A run's step band: :data:`MOE_BAND`, :data:`HELD_OUT_BAND` or :data:`BAND`."""
    if instance.has_moe:
        return MOE_BAND
    return HELD_OUT_BAND if instance.name in HELD_OUT else BAND


def solve_best(problem: Problem, time_limit: float, threads: int) -> tuple[float | None, str]:
    """The planner's best plan (auto portfolio): its long-run step time and the solve's status.

    A published step time is the mean of a long run, so the planner's plan is
    measured the same way. Where the instance lets a trainable model run off-policy,
    the solve optimises the steady-state period (``optimizer.objective:
    steady_state``), the long-run mean step itself: a solve of makespan(k_eval)
    would also pay the pipeline's fill and could settle for a plan whose long run
    is slower. On-policy instances keep their objective. Either plan's step is
    measured as the published plan's is (:func:`steady_step_time`).
    (docs/cost-model.md#published-runs)
    """
    problem = long_run_problem(problem)
    result = solve("auto", problem, SolveOptions(time_limit=time_limit, threads=threads))
    if result.plan is None:
        return None, result.status.value
    trace = problem.simulator.simulate(result.plan)
    return steady_step_time(problem, result.plan, trace), result.status.value


def long_run_problem(problem: Problem) -> Problem:
    """``problem`` with the steady-state objective when a trainable model may run off-policy."""
    instance = problem.instance
    off_policy = any(
        max(candidates) > 0 for candidates in instance.optimizer.staleness_candidates.values()
    )
    if instance.steady_state or not off_policy:
        return problem
    optimizer = dataclasses.replace(instance.optimizer, objective="steady_state")
    return Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))


def render_table(checks: list[RunCheck]) -> str:
    """Plain-text table of the checks."""
    lines = [
        f"{'run':44s} {'measured':>9s} {'predicted':>9s} {'ratio':>6s} "
        f"{'best':>9s} {'speed-up':>8s}  status",
    ]
    for check in checks:
        best = "—" if check.best_s is None else f"{check.best_s:9.1f}"
        speedup = "—" if check.speedup is None else f"{check.speedup:7.2f}x"
        low, high = check.band
        flag = "" if check.step_within_band else f"  OUTSIDE [{low}, {high}]"
        lines.append(
            f"{check.name:44s} {check.measured_s:9.1f} {check.predicted_s:9.1f} "
            f"{check.ratio:6.2f} {best:>9s} {speedup:>8s}  {check.best_status}{flag}"
        )
        if check.period_s is not None:
            lines.append(
                f"  {'steady-state period':42s} {'':9s} {check.period_s:9.1f} "
                f"{check.period_s / check.measured_s:6.2f}"
            )
            lines.append(
                f"  {'unrolled mean (makespan(k) / k)':42s} {'':9s} {check.unrolled_s:9.1f} "
                f"{check.unrolled_s / check.measured_s:6.2f}"
            )
        for phase in check.phases:
            outside = not PHASE_BAND[0] <= phase.ratio <= PHASE_BAND[1]
            flag = f"  OUTSIDE [{PHASE_BAND[0]}, {PHASE_BAND[1]}]" if outside else ""
            lines.append(
                f"  phase {phase.name:36s} {phase.measured_s:9.1f} {phase.predicted_s:9.1f} "
                f"{phase.ratio:6.2f}{flag}"
            )
    return "\n".join(lines)


def render_pairs(pairs: list[PairCheck]) -> str:
    """Plain-text table of the pairs: measured and predicted speed-up of one run over the other."""
    lines = [
        f"{'pair (slower / faster measured)':76s} {'measured':>8s} {'predicted':>9s} {'error':>7s}"
    ]
    for pair in pairs:
        flag = (
            ""
            if pair.within_tolerance
            else (
                "  RANKED BACKWARDS" if not pair.same_order else f"  OUTSIDE ±{PAIR_TOLERANCE:.0%}"
            )
        )
        lines.append(
            f"{pair.first.name + ' / ' + pair.second.name:76s} {pair.measured_speedup:7.2f}x "
            f"{pair.predicted_speedup:8.2f}x {pair.error:+7.1%}{flag}"
        )
    return "\n".join(lines)


def render_csv(checks: list[RunCheck]) -> str:
    """CSV with the columns :data:`CSV_COLUMNS` (period and unrolled mean: off-policy plans)."""
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
                "" if check.period_s is None else f"{check.period_s:.6g}",
                "" if check.unrolled_s is None else f"{check.unrolled_s:.6g}",
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
    checks, named = [], {}
    try:
        for instance_path, plan_path in pairs:
            check, problem, _ = check_run(instance_path, plan_path)
            named[check.name] = problem.instance.reference.pair
            if not args.no_solve:
                check.best_s, check.best_status = solve_best(problem, args.time_limit, args.threads)
            checks.append(check)
            print(f"checked {check.name}", file=sys.stderr, flush=True)
        sibling_checks = pair_checks(checks, named)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_table(checks))
    outside = [c.name for c in checks if not c.within_band]
    print(
        f"{len(checks) - len(outside)} of {len(checks)} runs within "
        f"[{BAND[0]}, {BAND[1]}] x measured ([{MOE_BAND[0]}, {MOE_BAND[1]}] for "
        f"mixtures of experts and [{HELD_OUT_BAND[0]}, {HELD_OUT_BAND[1]}] for held-out "
        "runs), every phase within "
        f"[{PHASE_BAND[0]}, {PHASE_BAND[1]}] (the model is judged on the published plans)"
    )
    if sibling_checks:
        print()
        print(render_pairs(sibling_checks))
        wrong = [p for p in sibling_checks if not p.within_tolerance]
        print(
            f"{len(sibling_checks) - len(wrong)} of {len(sibling_checks)} pairs ranked the "
            f"measured way round with the speed-up within ±{PAIR_TOLERANCE:.0%}"
        )
        outside += [p.first.name for p in wrong]
    if args.csv is not None:
        write_text(args.csv, render_csv(checks))
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
