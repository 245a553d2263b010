"""Options shared by every backend, and the one function that builds them from their sources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.instance import SolverConfig
from rlplan.rpeg.schema.solver_options import INSTANCE, OPTION_RULES, Source
from rlplan.solvers.progress import SilentProgress

if TYPE_CHECKING:
    from rlplan.rpeg.evaluation.problem import Problem
    from rlplan.solvers.result import Result


@dataclass
class SolveOptions:
    """Limits and settings of one solve.

    Attributes
    ----------
    time_limit
        Wall-clock seconds for the whole solve.
    threads
        Worker threads an exact backend may use.
    seed
        Random seed (local search, CP-SAT).
    gap
        Relative gap at which an exact backend may stop and claim optimality
        within that tolerance (0 = exact, 1 = the first feasible plan).
    progress
        Where live progress goes.
    verbose
        Show the exact solver's own log (HiGHS, CP-SAT) on stderr.
    cutoff
        A score (s over ``k_eval`` steps) no plan of interest reaches: the
        caller already holds a plan of that score elsewhere (another
        template or staleness space). An exact backend searches only the
        plans of makespan at most ``cutoff / score_factor``; finding none
        proves that bound (docs/solvers.md#cutoffs-between-solves). None:
        no cutoff.
    """

    time_limit: float = OPTION_RULES["time_limit"].default
    threads: int = OPTION_RULES["threads"].default
    seed: int = OPTION_RULES["seed"].default
    gap: float = OPTION_RULES["gap"].default
    progress: SilentProgress = field(default_factory=SilentProgress)
    verbose: bool = False
    cutoff: float | None = None

    def with_cutoff(self, score: float | None) -> SolveOptions:
        """These options with the cutoff lowered to ``score`` (None leaves it as is)."""
        if score is None or (self.cutoff is not None and self.cutoff <= score):
            return self
        return replace(self, cutoff=score)


@dataclass
class SolveRequest:
    """A backend and the options to run it with.

    Attributes
    ----------
    backend
        The backend's name (``auto``, ``cpsat``, ``milp:cbc``, ...).
    solve
        Its ``solve(problem, options)`` function.
    options
        Time limit, threads, seed and gap (progress and verbosity as built:
        silent and quiet until the caller sets them).
    """

    backend: str
    solve: Callable[[Problem, SolveOptions], Result]
    options: SolveOptions


def solve_request(defaults: SolverConfig, given: Mapping[str, Any], source: Source) -> SolveRequest:
    """Merge the options ``source`` gives over the instance's ``solver`` section.

    Every option follows its rule in
    :data:`~rlplan.rpeg.schema.solver_options.OPTION_RULES`, whichever source
    it comes from; a bad value is refused naming the option as its source
    names it.

    Parameters
    ----------
    defaults
        The instance's ``solver`` section (already checked by the same rules).
    given
        Option name (``backend``, ``time_limit``, ``threads``, ``seed``,
        ``gap``) -> value from the API or the command line; None or missing:
        not given, the instance's value applies.
    source
        Where ``given`` came from: ``"api"`` or ``"cli"``.

    Returns
    -------
    SolveRequest
        The backend and its options.

    Raises
    ------
    InputError
        For a value outside its rule or an unknown backend, naming e.g.
        ``--gap``, ``gap`` or ``solver.gap``.
    """
    unknown = set(given) - set(OPTION_RULES)
    if unknown:
        raise ValueError(f"not solve options: {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    origin: dict[str, Source] = {}
    for name, rule in OPTION_RULES.items():
        value = given.get(name)
        if value is None:
            values[name], origin[name] = rule.check(getattr(defaults, name), INSTANCE), INSTANCE
        else:
            values[name], origin[name] = rule.check(value, source), source
    backend = values.pop("backend")
    return SolveRequest(backend, backend_solve(backend, origin["backend"]), SolveOptions(**values))


def backend_solve(name: str, source: Source) -> Callable[[Problem, SolveOptions], Result]:
    """The ``solve`` function of backend ``name``, an unknown one named as ``source`` names it.

    Raises
    ------
    InputError
        For an unknown backend or MIP engine (``--solver``, ``solver`` or
        ``solver.backend``).
    """
    # rlplan.solvers imports this module for SolveOptions: its registry is read at call time.
    from rlplan.solvers import get_solver

    try:
        return get_solver(name)
    except InputError as exc:
        raise OPTION_RULES["backend"].error(source, exc.message) from None
