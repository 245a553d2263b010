"""Each published run's best plan per framework beside its full-space optimum.

For every instance of ``instances/published/`` (and its subfolders) with its
published plan ``NAME.plan.json``, solves the full plan space and each
framework's plan space (``--framework`` of ``solve``) with the same backend
and time limit, and prints one Markdown table: the published plan's simulated
step, each optimum's step with its status and gap, the speed-up over the
published plan, and what each framework would need to reach the full-space
optimum (docs/plan-space.md#framework-plan-spaces)::

    python -m benchmarks.frameworkbench --time-limit 60 [--only nemo_rl]

Step times are ``makespan / k_eval`` of the simulated plans, the objective
the solvers minimise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from rlplan.compare.realism import PUBLISHED, published_runs
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS
from rlplan.rpeg.model.frameworks.conform import framework_problems
from rlplan.rpeg.model.plan import read_plan
from rlplan.solvers import solve
from rlplan.solvers.framework_gap import comparison
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result


def published_pairs(only: str | None = None) -> list[tuple[str, str]]:
    """(instance, published plan) pairs of ``instances/published`` and its subfolders."""
    folders = [PUBLISHED, *sorted(p for p in PUBLISHED.iterdir() if p.is_dir())]
    pairs = [pair for folder in folders for pair in published_runs(folder)]
    return [(str(i), str(p)) for i, p in pairs if only is None or only in str(i)]


def _step(result: Result) -> str:
    if result.step_time is None:
        return f"— ({result.status.value})"
    gap = "" if result.gap is None else f", gap {result.gap:.2%}"
    return f"{result.step_time:.2f} s ({result.status.value}{gap})"


def bench_run(instance_path: str, plan_path: str, options: SolveOptions, backend: str) -> list[str]:
    """The table rows of one published run: its full space, then each framework."""
    full = Problem.load(instance_path)
    published = read_plan(plan_path, full.directory)
    base = full.simulator.evaluate(published).makespan / full.instance.k_eval
    best = solve(backend, full, options)
    name = os.path.basename(instance_path)[: -len(".yaml")]
    rows = [f"| {name} | full space | {base:.2f} s | {_step(best)} | {_ratio(base, best)} | |"]
    for framework in FRAMEWORKS.values():
        engine = dataclasses.replace(full.instance.engine, framework=framework.name)
        problem = Problem.from_instance(dataclasses.replace(full.instance, engine=engine))
        runnable = "yes" if not framework_problems(problem.directory, published) else "no"
        rule = framework.unsupported(problem.instance)
        if rule is not None:
            rows.append(
                f"| | {framework.display} | runs: {runnable} | cannot run: {rule.name} | | |"
            )
            continue
        result = solve(backend, problem, options)
        facts = comparison(framework, full, result, best)
        needs = "; ".join(facts["needs"]) or "nothing"
        rows.append(
            f"| | {framework.display} | runs: {runnable} | {_step(result)} "
            f"| {_ratio(base, result)} | {needs} |"
        )
    return rows


def _ratio(base: float, result: Result) -> str:
    return "—" if result.step_time is None else f"{base / result.step_time:.2f}x"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    parser.add_argument("--threads", type=int, default=2, help="CP-SAT workers")
    parser.add_argument("--solver", default="auto", help="backend of every solve")
    parser.add_argument("--only", help="only instances whose path contains this text")
    args = parser.parse_args(argv)
    options = SolveOptions(time_limit=args.time_limit, threads=args.threads)
    print(
        "| run | plan space | published plan | best plan (status, gap) "
        "| speed-up over published | to reach the full-space optimum |"
    )
    print("|---|---|---|---|---|---|")
    for instance, plan in published_pairs(args.only):
        for row in bench_run(instance, plan, options, args.solver):
            print(row, flush=True)


if __name__ == "__main__":
    main()
