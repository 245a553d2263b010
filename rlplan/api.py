"""The Python API: load, solve and simulate instances from code.

Every function takes the instance as a path to a YAML file, a mapping of
the same schema (DESIGN.md section 3), a parsed
:class:`~rlplan.rpeg.schema.instance.Instance` or a
:class:`~rlplan.rpeg.evaluation.problem.Problem`, and
raises :class:`~rlplan.rpeg.errors.InputError` (with the one-line message the
command line prints) for bad input. Plans come back keyed by vertex name, in
the ``plan.json`` form.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import InputError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.model.plan import Plan, plan_from_json, plan_to_json, read_plan
from rlplan.rpeg.schema.instance import Instance, load_instance, parse_instance
from rlplan.rpeg.schema.solver_options import API
from rlplan.solvers.framework_gap import solve_in_framework
from rlplan.solvers.options import solve_request
from rlplan.solvers.progress import make_progress
from rlplan.solvers.result import Result as SolverResult

#: What the API accepts as an instance.
InstanceLike = str | os.PathLike[str] | Mapping[str, Any] | Instance | Problem
#: What the API accepts as a plan.
PlanLike = str | os.PathLike[str] | Mapping[str, Any] | Plan | SolverResult


def _kind(value: Any) -> str:
    return type(value).__name__


def load(instance: InstanceLike, *, name: str | None = None) -> Problem:
    """The :class:`~rlplan.rpeg.evaluation.problem.Problem` of ``instance``: candidates, simulator.

    Parameters
    ----------
    instance
        A path to a YAML instance file; a mapping of the same schema (its
        relative ``hf_config`` paths are relative to the current folder); a
        parsed :class:`~rlplan.rpeg.schema.instance.Instance`; or a ``Problem``, returned
        as it is.
    name
        Name of an instance given as a mapping (default ``"instance"``);
        a file's name is its stem.

    Returns
    -------
    Problem
        Built once; pass it to :func:`solve` and :func:`simulate` to reuse it.

    Raises
    ------
    InputError
        For a file that cannot be read, input that breaks the schema, or a
        value of another type. Warnings about accepted but ignored input
        (e.g. an unknown top-level section) are issued as ``UserWarning``.
    """
    if isinstance(instance, Problem):
        return instance
    if isinstance(instance, Instance):
        parsed = instance
    elif isinstance(instance, Mapping):
        parsed = parse_instance(instance, name=name or "instance", base_dir=os.getcwd())
    elif isinstance(instance, str | os.PathLike):
        parsed = load_instance(instance)
    else:
        raise InputError(
            "instance",
            f"must be a path, a mapping, an Instance or a Problem, got {_kind(instance)}",
        )
    for warning in parsed.warnings:
        warnings.warn(warning.removeprefix("warning: "), UserWarning, stacklevel=3)
    return Problem.from_instance(parsed)


@dataclass
class Result(SolverResult):
    """A solve's :class:`rlplan.solvers.result.Result` with the plan keyed by vertex name.

    Every attribute of the backend's result is kept (``status``, ``solver``,
    ``plan``, ``makespan``, ``step_time``, ``bound``, ``gap``, ``stats``,
    ``message``, ``to_json()``, ...); these are added.

    Attributes
    ----------
    plan_document
        The plan as the ``plan.json`` document (vertex name -> placement,
        staleness, run order, the instance's fingerprint); None without a
        plan. Write it with ``json.dump`` and it is a plan file.
    trace
        The simulator's trace of the plan (step time, samples/s, events,
        per-GPU memory peaks); None without a plan.
    problem
        The problem that was solved, for :func:`simulate` and the like.
    """

    plan_document: dict[str, Any] | None = None
    trace: Trace | None = field(default=None, repr=False)
    problem: Problem | None = field(default=None, repr=False, compare=False)

    @property
    def placements(self) -> dict[str, dict[str, Any]]:
        """Vertex name -> placement (``block``, ``dp``, ``pp``, ``tp``, ...); {} without a plan."""
        if self.plan_document is None:
            return {}
        return self.plan_document["vertices"]

    @property
    def staleness(self) -> dict[str, int]:
        """Trained model -> staleness of the plan; empty without a plan."""
        if self.plan_document is None:
            return {}
        return dict(self.plan_document["staleness"])


def solve(
    instance: InstanceLike,
    solver: str | None = "auto",
    *,
    time_limit: float | None = None,
    threads: int | None = None,
    seed: int | None = None,
    gap: float | None = None,
    progress: bool = False,
    framework: str | None = None,
) -> Result:
    """Find a plan for ``instance``: ``python main.py solve`` from Python.

    Parameters
    ----------
    instance
        A path, a mapping, an ``Instance`` or a ``Problem`` (see :func:`load`).
    solver
        Backend: ``auto`` (the portfolio), ``greedy``, ``concurrent``,
        ``local``, ``exhaustive``, ``cpsat``, ``milp`` or ``milp:ENGINE``;
        None for the instance's ``solver.backend``.
    time_limit
        Wall-clock seconds (default: the instance's ``solver.time_limit``).
    threads
        Worker threads of the exact backends (default ``solver.threads``).
    seed
        Random seed (default ``solver.seed``).
    gap
        Relative gap ``(score - bound) / score`` at which an exact backend may
        stop, 0 to 1 (default ``solver.gap``; 1: the first feasible plan).
    progress
        Show live progress on a terminal (stderr).
    framework
        Plan for what this framework can run (``verl``, ``nemo-rl``,
        ``openrlhf``, ``slime``; default: the instance's ``engine.framework``);
        the full-space optimum is solved beside it, each on half the time
        limit, and ``stats["framework"]`` compares the two
        (docs/solvers.md#framework-plan-spaces).

    Returns
    -------
    Result
        Status, simulated makespan and step time, proven bound and gap, and
        the plan keyed by vertex name (:attr:`Result.placements`,
        :attr:`Result.plan_document`) with its :attr:`Result.trace`. A proven
        infeasible instance returns status ``INFEASIBLE`` with the reason in
        ``message``; it does not raise.

    Raises
    ------
    InputError
        For bad input: the instance (see :func:`load`), an unknown solver, or
        an option outside its rule (the same as the instance file's
        ``solver`` section and the command line apply: a time limit of
        0.001 s to a week, 1 to 1024 threads, a seed of 0 to 2^31 - 1, a gap
        of 0 to 1), naming the argument (``gap``).
    """
    problem = load(instance)
    if framework is not None:
        problem = problem.with_framework(framework, "framework")
    given = {"time_limit": time_limit, "threads": threads, "seed": seed, "gap": gap}
    request = solve_request(problem.instance.solver, {"backend": solver, **given}, API)
    options = request.options
    options.progress = make_progress(
        f"{request.backend} on {problem.instance.name}", problem.instance.k_eval, not progress
    )
    try:
        found = solve_in_framework(request.solve, problem, options)
    finally:
        options.progress.close()
    found.stats.setdefault("incumbent_history", options.progress.history)
    values = {item.name: getattr(found, item.name) for item in dataclasses.fields(SolverResult)}
    plan_document = trace = None
    if found.plan is not None:
        plan_document = plan_to_json(found.plan, problem.directory)
        trace = problem.simulator.simulate(found.plan)
    return Result(**values, plan_document=plan_document, trace=trace, problem=problem)


def simulate(instance: InstanceLike, plan: PlanLike) -> Trace:
    """Simulate ``plan`` on ``instance``: ``python main.py simulate`` from Python.

    Parameters
    ----------
    instance
        A path, a mapping, an ``Instance`` or a ``Problem`` (see :func:`load`).
    plan
        A plan file's path, a plan document (the ``plan.json`` mapping, e.g.
        :attr:`Result.plan_document`), a :class:`~rlplan.rpeg.model.plan.Plan` of this
        instance, or a result carrying a plan.

    Returns
    -------
    Trace
        ``makespan``, ``step_time``, ``samples_per_s``,
        ``generated_tokens_per_s``, ``events``, ``peak_memory_bytes``,
        ``feasible`` and ``to_json()``.

    Raises
    ------
    InputError
        For a bad instance or a plan that does not fit it (a
        :class:`~rlplan.rpeg.errors.PlanError` naming the field).
    """
    problem = load(instance)
    if isinstance(plan, SolverResult):
        if plan.plan is None:
            raise PlanError("plan", f"the result has no plan (status {plan.status.value})")
        plan = plan.plan
    if isinstance(plan, Mapping):
        plan = plan_from_json(dict(plan), problem.directory)
    elif isinstance(plan, str | os.PathLike):
        plan = read_plan(plan, problem.directory)
    elif not isinstance(plan, Plan):
        raise PlanError(
            "plan", f"must be a path, a plan document, a Plan or a Result, got {_kind(plan)}"
        )
    if plan.fused and not problem.instance.ac_share:
        raise PlanError("plan", "fuses actor and critic (AC-share); the instance does not")
    vertices = len(problem.directory.for_plan(plan).template.vertices)
    if len(plan.placements) != vertices:
        raise PlanError(
            "plan",
            f"has {len(plan.placements)} placements, the {problem.instance.algorithm} "
            f"instance {vertices} vertices",
        )
    return problem.simulator.simulate(plan)
