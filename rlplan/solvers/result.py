"""The one result type every backend returns, and the one rule that names its verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rlplan.formulation.model import REL_ROUNDING
from rlplan.rpeg.model.plan import Plan

#: Relative gap ``(makespan - bound) / makespan`` within which a plan is reported
#: OPTIMAL: the rounding tolerance of the exact backends' formulation, which
#: floors durations and lags to a time unit losing at most this fraction of
#: the makespan along any path (``rlplan.formulation.model.REL_ROUNDING``). A proof
#: of the rounded model's optimum therefore leaves a gap within it.
OPTIMALITY_TOLERANCE = REL_ROUNDING
#: Relative slack of :func:`reaches_cutoff`: a bound computed as the cutoff
#: divided and multiplied back by a plan factor differs from it by rounding.
CUTOFF_TOLERANCE = 1e-12


class Status(Enum):
    """Outcome of a solve.

    OPTIMAL: the gap to the proven bound is within :data:`OPTIMALITY_TOLERANCE`
    (see :func:`verdict`). OPTIMAL_WITHIN_GAP: the gap is within the gap the
    user asked for (``--gap``), not within the tolerance. FEASIBLE: a plan, no
    such proof. INFEASIBLE: proven that no plan exists. UNKNOWN: no plan found
    within the limits. ERROR: the backend failed (including a
    solver/simulator disagreement).
    """

    OPTIMAL = "OPTIMAL"
    OPTIMAL_WITHIN_GAP = "OPTIMAL_WITHIN_GAP"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"
    ERROR = "ERROR"

    @property
    def has_plan(self) -> bool:
        """Whether a result with this status carries a usable plan."""
        return self in (Status.OPTIMAL, Status.OPTIMAL_WITHIN_GAP, Status.FEASIBLE)


#: The statuses whose plan is proven (optimal, or within the requested gap).
PROVEN = (Status.OPTIMAL, Status.OPTIMAL_WITHIN_GAP)

#: How reports name the method that proved a bound (``Result.bound_source``).
BOUND_SOURCE_WORDS = {
    "critical_path": "the critical-path bound",
    "area_path": "the area-and-path bound",
    "compute": "the compute bound",
    "cpsat": "CP-SAT",
    "milp": "the MILP",
    "exhaustive": "the exhaustive oracle",
}

#: Why each bound holds, in one clause (docs/cost-model.md#lower-bounds, docs/solvers.md).
BOUND_SOURCE_REASONS = {
    "critical_path": "no plan is faster than the longest chain of runs, each at its "
    "fastest candidate",
    "area_path": "for every choice of one candidate per vertex, the runs' longest chain, "
    "their GPU-seconds over the GPUs, or the runs that must share a window after the "
    "first rollout or before the last training take at least this long",
    "compute": "the steps' FLOPs at every GPU's peak take at least this long",
    "cpsat": "CP-SAT proved no plan of the exact model is below it",
    "milp": "the MILP's branch and bound proved no plan of the exact model is below it",
    "exhaustive": "every plan of the plan space was simulated",
}


def relative_gap(makespan: float | None, bound: float | None) -> float | None:
    """``(makespan - bound) / makespan``, at least 0; None without a plan or a bound."""
    if makespan is None or bound is None or makespan <= 0:
        return None
    return max(0.0, (makespan - bound) / makespan)


def reaches_cutoff(bound: float | None, cutoff: float | None) -> bool:
    """Whether a score ``bound`` proves that no plan scores below ``cutoff``.

    A solve given a cutoff (:attr:`rlplan.solvers.options.SolveOptions.cutoff`)
    that ends with such a bound has done its job: the caller's plan elsewhere
    is at least as good as any of this solve's plan space.
    """
    if bound is None or cutoff is None:
        return False
    return bound >= cutoff * (1.0 - CUTOFF_TOLERANCE)


def verdict(makespan: float, bound: float | None, requested_gap: float = 0.0) -> Status:
    """The status of a plan of simulated ``makespan`` given a proven lower ``bound``.

    The one rule every backend and ``auto`` apply:

    * OPTIMAL iff the relative gap ``(makespan - bound) / makespan`` is at most
      :data:`OPTIMALITY_TOLERANCE` (the formulation's rounding tolerance);
    * otherwise OPTIMAL_WITHIN_GAP iff the user asked for a gap
      (``requested_gap > 0``) and the gap is within it;
    * otherwise FEASIBLE.

    Parameters
    ----------
    makespan
        Simulated makespan of the plan (s).
    bound
        Best proven lower bound on the makespan over the plan space (s), or None.
    requested_gap
        Relative gap at which the user allowed the search to stop (0: exact).

    Returns
    -------
    Status
        OPTIMAL, OPTIMAL_WITHIN_GAP or FEASIBLE.
    """
    gap = relative_gap(makespan, bound)
    if gap is None:
        return Status.FEASIBLE
    # A tiny absolute slack absorbs float noise in equal makespan and bound.
    if gap <= OPTIMALITY_TOLERANCE + 1e-12:
        return Status.OPTIMAL
    if requested_gap > 0 and gap <= requested_gap + 1e-12:
        return Status.OPTIMAL_WITHIN_GAP
    return Status.FEASIBLE


@dataclass
class Result:
    """What a backend returns.

    Attributes
    ----------
    status
        See :class:`Status`; for a plan, :func:`verdict` of its makespan and bound.
    solver
        Backend name.
    plan
        The best plan found (None without one).
    makespan
        The plan's *simulated* makespan of ``k_eval`` steps (s).
    k_eval
        Steps in the makespan.
    bound
        Best proven lower bound on the makespan over the plan space (s).
    wall_time
        Seconds spent.
    stats
        Backend statistics (evaluations, model sizes, ...).
    message
        One line on why the status is what it is (e.g. which vertex fits nowhere).
    requested_gap
        The relative gap the user allowed (``--gap``; 0 = exact).
    score_factor
        The objective factor of the plan: ``1 + lambda_ac`` for a fused
        actor-critic (AC-share) plan, times ``1 + lambda_stale`` for an
        off-policy plan (a trained model at staleness > 0), else 1. The
        *score* (what every solver minimises) is ``makespan * score_factor``;
        ``bound`` and ``gap`` are about the score.
    templates
        For an instance whose plan space has both templates: what the solver
        knows of each (``separate``, ``ac_share``), its best plan's makespan
        and score and its bound, in seconds over ``k_eval`` steps (None
        where unknown); None otherwise. See :meth:`ac_share_summary`.
    lambda_ac
        The instance's AC-share penalty when its plan space has the fused
        template, else None.
    policy
        When the plan's template has on- and off-policy plans: what the
        other kind would give (:func:`rlplan.solvers.staleness.staleness_summary`),
        else None.
    """

    status: Status
    solver: str
    plan: Plan | None = None
    makespan: float | None = None
    k_eval: int = 1
    bound: float | None = None
    wall_time: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    requested_gap: float = 0.0
    score_factor: float = 1.0
    templates: dict[str, dict[str, Any]] | None = None
    lambda_ac: float | None = None
    bound_source: str | None = None
    policy: dict[str, Any] | None = None

    @property
    def bound_proven_by(self) -> str | None:
        """Who proved the reported bound, in words (None without a bound)."""
        if self.bound is None or self.bound_source is None:
            return None
        return BOUND_SOURCE_WORDS.get(self.bound_source, self.bound_source)

    @property
    def bound_reason(self) -> str | None:
        """Why the reported bound holds, in one clause (None without a bound)."""
        if self.bound is None or self.bound_source is None:
            return None
        return BOUND_SOURCE_REASONS.get(self.bound_source)

    @property
    def step_time(self) -> float | None:
        """Simulated makespan per step (s)."""
        return None if self.makespan is None else self.makespan / self.k_eval

    @property
    def score(self) -> float | None:
        """The objective of the plan over ``k_eval`` steps: makespan x ``score_factor`` (s)."""
        return None if self.makespan is None else self.makespan * self.score_factor

    @property
    def score_step(self) -> float | None:
        """The objective per step: the step time x ``score_factor`` (s)."""
        return None if self.score is None else self.score / self.k_eval

    @property
    def template(self) -> str | None:
        """The plan's template (``separate`` or ``ac_share``), None without a plan."""
        return None if self.plan is None else self.plan.template

    @property
    def bound_step(self) -> float | None:
        """Proven lower bound on the score per step (s): the step time unless AC-share is on."""
        return None if self.bound is None else self.bound / self.k_eval

    @property
    def gap(self) -> float | None:
        """Relative gap ``(score - bound) / score`` (see :func:`relative_gap`)."""
        return relative_gap(self.score, self.bound)

    def ac_share_summary(self) -> dict[str, Any] | None:
        """Which template won and by how much, for an instance with AC-share (else None).

        ``winner`` is the plan's template; ``other`` the other template's
        best plan as far as the solver knows it (its makespan and score per
        step, None when it found none) and its bound; ``margin`` the relative
        score advantage ``(other score - winner score) / other score``.
        """
        if self.lambda_ac is None:
            return None
        winner = self.template
        summary: dict[str, Any] = {
            "lambda_ac": self.lambda_ac,
            "winner": winner,
            "step_time_s": self.step_time,
            "score_step_s": self.score_step,
            "other": None,
            "margin": None,
        }
        if winner is None or not self.templates:
            return summary
        other_name = "separate" if winner == "ac_share" else "ac_share"
        other = self.templates.get(other_name)
        if other is None:
            return summary

        def per_step(key: str) -> float | None:
            value = other.get(key)
            return None if value is None else value / self.k_eval

        summary["other"] = {
            "template": other_name,
            "status": other.get("status"),
            "step_time_s": per_step("makespan_s"),
            "score_step_s": per_step("score_s"),
            "bound_step_s": per_step("bound_s"),
        }
        other_score = other.get("score_s")
        if other_score and self.score is not None:
            summary["margin"] = (other_score - self.score) / other_score
        return summary

    def template_rows(self) -> list[tuple[str, str]]:
        """Report rows on the template choice (AC-share instances only; [] otherwise).

        The plan's template, its penalised score beside the raw step time,
        and the other template's best known plan and by how much it lost.
        """
        summary = self.ac_share_summary()
        if summary is None:
            return []
        factor = 1 + summary["lambda_ac"]
        names = {"separate": "separate actor and critic", "ac_share": "fused actor-critic (ac)"}
        winner = summary["winner"]
        rows = [
            ("template", "—" if winner is None else f"{winner} ({names[winner]})"),
            (
                "AC-share penalty lambda_ac",
                f"{summary['lambda_ac']:g} (fused score = step time x {factor:g})",
            ),
        ]
        if summary["score_step_s"] is not None:
            rows.append(("score per step (objective)", f"{summary['score_step_s']:.4f} s"))
        other = summary["other"]
        if other is None:
            rows.append(("other template", "not known to this solver"))
        elif other["score_step_s"] is None:
            status = other.get("status") or "no plan"
            rows.append((f"best {other['template']} plan", f"none found ({status})"))
        else:
            text = (
                f"score {other['score_step_s']:.4f} s/step (step time {other['step_time_s']:.4f} s)"
            )
            if summary["margin"] is not None:
                text += f"; the {winner} plan scores {100 * summary['margin']:.2f}% lower"
            rows.append((f"best {other['template']} plan", text))
        return rows

    def describe_template(self) -> str | None:
        """One line on the template choice (AC-share instances only), e.g. for the terminal.

        E.g. ``ac_share won: score 1.2345 s/step (raw step 1.0735 s x 1.15)
        vs separate 1.3001 s/step, 5.04% lower``.
        """
        summary = self.ac_share_summary()
        if summary is None or summary["winner"] is None:
            return None
        words = f"{summary['winner']} won: score {summary['score_step_s']:.4f} s/step"
        if summary["winner"] == "ac_share":
            words += f" (raw step {summary['step_time_s']:.4f} s x {1 + summary['lambda_ac']:.4g})"
        other = summary["other"]
        if other is None:
            return words + "; the other template's best plan is unknown to this solver"
        if other.get("score_step_s") is None:
            return words + f"; no {other['template']} plan found"
        words += f" vs {other['template']} {other['score_step_s']:.4f} s/step"
        if summary["margin"] is not None:
            words += f", {100 * summary['margin']:.2f}% lower"
        return words

    def describe_status(self) -> str:
        """The status for people: its name, and for OPTIMAL_WITHIN_GAP the gap it is within.

        E.g. ``OPTIMAL_WITHIN_GAP: optimal within the requested 1% gap, not
        proven optimal``.
        """
        if self.status is Status.OPTIMAL_WITHIN_GAP:
            return (
                f"{self.status.value}: optimal within the requested "
                f"{100 * self.requested_gap:.4g}% gap, not proven optimal"
            )
        return self.status.value

    def to_json(self) -> dict[str, Any]:
        """The ``result.json`` document: every time in seconds, named with its unit.

        ``makespan_s`` and ``bound_makespan_s`` cover the ``k_eval`` steps;
        ``step_time_s`` and ``bound_step_s`` are per step. ``makespan_s`` and
        ``step_time_s`` are the raw simulated times; ``score_makespan_s`` and
        ``score_step_s`` the objective (the same unless the plan fuses actor
        and critic, then x (1 + lambda_ac), or is off-policy, then
        x (1 + lambda_stale)); ``template`` the plan's template
        (``separate`` or ``ac_share``). Bounds are proven lower bounds on the
        score over the plan space (null without one); ``gap`` is the relative
        gap ``(score - bound) / score``. An AC-share instance adds
        ``ac_share``: :meth:`ac_share_summary`; a plan space with on- and
        off-policy plans adds ``policy`` (:attr:`policy`).
        """
        extra: dict[str, Any] = {}
        summary = self.ac_share_summary()
        if summary is not None:
            extra["ac_share"] = summary
        if self.policy is not None:
            extra["policy"] = self.policy
        return {
            "status": self.status.value,
            "solver": self.solver,
            "k_eval": self.k_eval,
            "template": self.template,
            "makespan_s": self.makespan,
            "step_time_s": self.step_time,
            "score_makespan_s": self.score,
            "score_step_s": self.score_step,
            "bound_makespan_s": self.bound,
            "bound_step_s": self.bound_step,
            "bound_source": self.bound_source,
            "gap": self.gap,
            "optimality_tolerance": OPTIMALITY_TOLERANCE,
            "requested_gap": self.requested_gap,
            "wall_time_s": self.wall_time,
            "message": self.message,
            "stats": self.stats,
            **extra,
        }
