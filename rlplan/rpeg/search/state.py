"""The search state: a plan with its evaluation and penalised score."""

from __future__ import annotations

from dataclasses import dataclass

from rlplan.rpeg.evaluation.simulator import Evaluation
from rlplan.rpeg.model.plan import Plan

#: Score penalty per unit of relative memory overflow: a plan overflowing a
#: GPU by 1% of its capacity scores 5% worse than its makespan.
OVERFLOW_PENALTY = 5.0


@dataclass(frozen=True, slots=True)
class SearchState:
    """A plan, its simulation, and the score the search minimises."""

    plan: Plan
    evaluation: Evaluation
    score: float
    #: Whether the plan lies in the framework's plan space (``engine.framework``).
    allowed: bool = True

    @classmethod
    def of(
        cls, plan: Plan, evaluation: Evaluation, capacity: float, allowed: bool = True
    ) -> SearchState:
        """Score = the objective (makespan, x (1 + lambda_ac) for a fused plan),
        inflated in proportion to the worst memory overflow; infinite for a plan
        outside the framework's plan space."""
        score = evaluation.score * (1.0 + OVERFLOW_PENALTY * evaluation.violation / capacity)
        return cls(plan, evaluation, score if allowed else float("inf"), allowed)

    @property
    def objective(self) -> float:
        """The plan's objective without the memory penalty (:attr:`Evaluation.score`)."""
        return self.evaluation.score

    @property
    def feasible(self) -> bool:
        """Whether the plan fits in memory (and lies in the framework's plan space)."""
        return self.allowed and self.evaluation.feasible

    @property
    def makespan(self) -> float:
        """Simulated makespan."""
        return self.evaluation.makespan
