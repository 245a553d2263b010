"""Simulated annealing over plans, with the reference optimizer's knobs.

Knobs (``optimizer`` section):

* ``e_max`` evaluation budget; past it the search stops once converged (no new
  best in the last ``e_max / 2`` evaluations), and always at the time limit.
* ``t_init`` / ``t_min``: temperature, as a fraction of the current score,
  at the start and the end of the budget (linear cooling, or geometric with
  ``geometric_cooling``); ``t_warm`` the temperature after a restart.
* ``e_struct``: evaluations between structural moves (block changes and
  co-location changes); in between, parameter moves (strategy,
  microbatches, staleness, run-order swaps).
* ``k_x`` candidates per vertex sampled when a move picks a strategy.
* ``alpha_pair`` probability that a structural move involves two vertices.
* ``stag_window``: after that many steps without a new best, restart from
  the best plan at temperature ``t_warm``; at the first such restart on a
  best plan, the block descent (:mod:`rlplan.rpeg.search.block_descent`)
  first tries every strategy of every vertex on its block.
* ``score_eps``: relative improvement needed to count as a new best.
* ``hard_oom``: reject memory-overflowing neighbours instead of penalising.
* ``fixed_mb``, ``uniform_vertex``, ``no_polish`` (no polish and no block
  descent): ablations.

The returned plan is always memory-feasible: the best *feasible* plan seen
(the start plan is feasible).

On an AC-share instance (both templates in the plan space) the search
minimises the objective, step time x (1 + ``lambda_ac``) for a fused plan,
and a structural move switches the template with probability
:data:`SWITCH_PROBABILITY` (:func:`rlplan.rpeg.search.template_switch.switch_template`);
the polish also tries the other template of its best plan.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.frameworks.conform import conform, framework_problems
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.search.block_descent import descend_on_blocks
from rlplan.rpeg.search.compound_moves import staleness_in_order
from rlplan.rpeg.search.moves import DEFAULT_MOVES, PAIR, PARAMETER, SINGLE, Move, MoveContext
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.search.stopping import StoppingCriterion
from rlplan.rpeg.search.template_switch import convert_plan, switch_template

#: Probability that a structural move switches the template (AC-share instances only).
SWITCH_PROBABILITY = 0.2


@dataclass
class SearchStatistics:
    """Counters of one search."""

    evaluations: int = 0
    accepted: int = 0
    improvements: int = 0
    restarts: int = 0
    polish_evaluations: int = 0
    stop_reason: str = ""
    history: list[tuple[float, int, float]] = field(default_factory=list)


@dataclass
class SearchOutcome:
    """The best feasible plan found and how the search went."""

    plan: Plan
    makespan: float
    statistics: SearchStatistics
    score: float | None = None


def _applicable(moves: Sequence[Move], directory) -> tuple[Move, ...]:
    """The moves that can apply to ``directory``'s plan space (all, if none can)."""
    kept = tuple(
        move
        for move in moves
        if getattr(move, "applicable", None) is None or move.applicable(directory)
    )
    return kept or tuple(moves)


class SimulatedAnnealing:
    """The local-search optimizer.

    Parameters
    ----------
    simulator
        The instance's simulator (its directory gives the plan space).
    seed
        Seed of the search's random generator; the search is deterministic
        for a given seed when it stops on its evaluation budget.
    progress
        Optional callback ``progress(best_score, evaluations)``.
    switch_templates
        Whether the search may switch between the separate and the fused
        (AC-share) template; default: when the simulator's instance has both
        in its plan space. :attr:`best_by_template` then holds the best
        feasible plan seen of each template.
    moves
        The moves to draw from (:data:`rlplan.rpeg.search.moves.DEFAULT_MOVES` by
        default); within each kind a move is drawn uniformly. A move with an
        ``applicable(directory)`` method that says no for this plan space
        (``change_expert_layout`` on an instance with one expert and context
        layout, ``change_pool`` on a one-pool cluster) is left out, so the
        draws are those of the moves that apply. Structural moves
        (kinds ``single`` and ``pair``) come every ``e_struct`` evaluations,
        parameter moves in between; when one side has no move the other
        side's moves are drawn instead.
    """

    def __init__(
        self,
        simulator: Simulator,
        seed: int = 0,
        progress=None,
        switch_templates: bool | None = None,
        moves: Sequence[Move] = DEFAULT_MOVES,
    ) -> None:
        self.simulator = simulator
        self.directory = simulator.directory
        self.knobs = self.directory.instance.optimizer
        self.capacity = simulator.capacity
        self.rng = random.Random(seed)
        self.context = MoveContext(self.directory, self.knobs, simulator)
        self.progress = progress
        self.statistics = SearchStatistics()
        if not moves:
            raise ValueError("the local search needs at least one move")
        moves = _applicable(moves, self.directory)
        self.single = tuple(m for m in moves if m.kind == SINGLE)
        self.pair = tuple(m for m in moves if m.kind == PAIR)
        self.parameter = tuple(m for m in moves if m.kind == PARAMETER)
        unknown = [m.name for m in moves if m.kind not in (SINGLE, PAIR, PARAMETER)]
        if unknown:
            raise ValueError(f"moves of unknown kind: {', '.join(unknown)}")
        if switch_templates is None:
            switch_templates = len(self.directory.instance.templates) > 1
        self.switch_templates = switch_templates
        #: Move contexts per template (True: fused), built on first use.
        self._contexts = {self.directory.fused: self.context}
        #: Best feasible state seen per template (True: fused).
        self.best_by_template: dict[bool, SearchState] = {}

    def _context(self, plan: Plan) -> MoveContext:
        """The move context of ``plan``'s template."""
        found = self._contexts.get(plan.fused)
        if found is None:
            found = MoveContext(self.directory.variant(plan.fused), self.knobs)
            self._contexts[plan.fused] = found
        return found

    # -- evaluation ------------------------------------------------------------------

    def _state(self, plan: Plan) -> SearchState:
        """The state of ``plan``, conformed first to the framework's rules (if any)."""
        self.statistics.evaluations += 1
        allowed = True
        if self.directory.framework is not None:
            plan = conform(self.directory, plan)
            allowed = not framework_problems(self.directory, plan)
        state = SearchState.of(plan, self.simulator.evaluate(plan), self.capacity, allowed)
        if self.switch_templates and state.feasible:
            known = self.best_by_template.get(plan.fused)
            if known is None or state.objective < known.objective:
                self.best_by_template[plan.fused] = state
        return state

    def _temperature(self, used: int, start_fraction: float, start_at: int) -> float:
        # past the budget (the search goes on until it converges) a warm restart
        # still cools over one stagnation window
        span = max(1, self.knobs.e_max - start_at, self.knobs.stag_window)
        progress = min(1.0, max(0.0, (used - start_at) / span))
        low = min(self.knobs.t_min, start_fraction)
        if self.knobs.geometric_cooling and start_fraction > 0 and low > 0:
            return start_fraction * (low / start_fraction) ** progress
        return start_fraction + (low - start_fraction) * progress

    # -- main loop ---------------------------------------------------------------------

    def run(self, initial: Plan, stop: StoppingCriterion) -> SearchOutcome:
        """Anneal from ``initial`` (which must be memory-feasible) until ``stop`` says so."""
        knobs, rng, stats = self.knobs, self.rng, self.statistics
        current = self._state(initial)
        if not current.feasible:
            raise ValueError("the start plan of the local search must fit in memory")
        best = current
        self._record(best, stop)
        start_fraction, start_at = knobs.t_init, 0
        since_structural, stagnation = 0, 0
        descended = None  # the last best plan the block descent started from
        try:
            while not stop(stats.evaluations):
                structural = since_structural >= knobs.e_struct
                neighbours = self._neighbours(current, structural)
                if structural:
                    since_structural = 0
                if not neighbours:
                    since_structural += 1
                    stagnation += 1
                    if stagnation > 50 * knobs.stag_window:
                        break
                    continue
                proposal = None
                for plan in neighbours:
                    state = self._state(plan)
                    since_structural += 1
                    if knobs.hard_oom and not state.feasible:
                        continue
                    if proposal is None or state.score < proposal.score:
                        proposal = state
                if proposal is None:
                    stagnation += 1
                    continue
                temperature = self._temperature(stats.evaluations, start_fraction, start_at)
                delta = proposal.score - current.score
                if delta <= 0 or (
                    temperature > 0
                    and rng.random() < math.exp(-delta / (temperature * current.score))
                ):
                    current = proposal
                    stats.accepted += 1
                if current.feasible and current.objective < best.objective * (1 - knobs.score_eps):
                    best = current
                    stats.improvements += 1
                    stagnation = 0
                    stop.improved(stats.evaluations)
                    self._record(best, stop)
                else:
                    stagnation += 1
                if stagnation >= knobs.stag_window:
                    if best is not descended and not knobs.no_polish:
                        best = descended = self._descend(best, stop)
                    current = best
                    start_fraction, start_at = knobs.t_warm, stats.evaluations
                    stagnation = 0
                    stats.restarts += 1
                if self.progress is not None:
                    self.progress(best.objective, stats.evaluations)
        except KeyboardInterrupt:
            stop.interrupted = True
            stop.reason = "interrupted"
        stats.stop_reason = stop.reason or "no applicable move"
        if not knobs.no_polish and not stop.interrupted:
            try:
                best = self.polish(best, stop)
            except KeyboardInterrupt:
                stop.interrupted = True
                stats.stop_reason = "interrupted"
        return SearchOutcome(best.plan, best.makespan, stats, best.objective)

    def _neighbours(self, current: SearchState, structural: bool) -> list[Plan]:
        rng, context = self.rng, self._context(current.plan)
        if structural and self.switch_templates and rng.random() < SWITCH_PROBABILITY:
            return switch_template(current.plan, context, rng, self.simulator)
        has_structural = bool(self.single or self.pair)
        if (structural and has_structural) or not self.parameter:
            if self.single and self.pair:
                pool = self.pair if rng.random() < self.knobs.alpha_pair else self.single
            else:
                pool = self.single or self.pair
        else:
            pool = self.parameter
        return rng.choice(pool).propose(current, context, rng)

    def _descend(self, best: SearchState, stop: StoppingCriterion) -> SearchState:
        """The block descent from ``best`` (:mod:`rlplan.rpeg.search.block_descent`), run
        at a restart on a best plan it has not started from yet."""
        found = descend_on_blocks(
            best,
            self.directory.variant(best.plan.fused),
            self._state,
            stop.out_of_time,
            self.knobs.score_eps,
        )
        if found is not best:
            self.statistics.improvements += 1
            stop.improved(self.statistics.evaluations)
            self._record(found, stop)
        return found

    def _record(self, best: SearchState, stop: StoppingCriterion) -> None:
        self.statistics.history.append((stop.elapsed, self.statistics.evaluations, best.objective))

    # -- polish --------------------------------------------------------------------------

    def polish(self, start: SearchState, stop: StoppingCriterion) -> SearchState:
        """Greedy descent: first improving (block, strategy) or staleness change, until none.

        On an AC-share instance each round first tries the best plan carried
        over to the other template. Bounded by the time limit only (its
        evaluations are counted apart from ``e_max``).
        """
        best = start
        improved = True
        while improved and not stop.out_of_time():
            improved = False
            if self.switch_templates:
                source = self.directory.variant(best.plan.fused)
                converted = convert_plan(best.plan, source, source.variant(not best.plan.fused))
                better = None if converted is None else self._polish_step(converted, best, stop)
                if better is not None:
                    best, improved = better, True
            directory = self.directory.variant(best.plan.fused)
            for vertex in range(len(best.plan.placements)):
                for shape, candidates in directory.options[vertex].items():
                    for block in directory.blocks(vertex, shape):
                        for candidate in candidates:
                            if stop.out_of_time():
                                return best
                            plan = best.plan.with_placement(
                                vertex, type(best.plan.placements[0])(block, candidate.strategy)
                            )
                            better = self._polish_step(plan, best, stop)
                            if better is not None:
                                best, improved = better, True
            for model, choices in self.knobs.staleness_candidates.items():
                if model not in best.plan.staleness_map:
                    continue  # the other template's model
                for value in choices:
                    for plan in self._staleness_plans(best, model, value):
                        better = self._polish_step(plan, best, stop)
                        if better is not None:
                            best, improved = better, True
                            break
        return best

    def _polish_step(
        self, plan: Plan, best: SearchState, stop: StoppingCriterion
    ) -> SearchState | None:
        """``plan``'s state if it fits and beats ``best`` by ``score_eps`` (recorded), else None."""
        state = self._state(plan)
        self.statistics.polish_evaluations += 1
        if not state.feasible or state.objective >= best.objective * (1 - self.knobs.score_eps):
            return None
        self._record(state, stop)
        return state

    def _staleness_plans(self, best: SearchState, model: str, value: int) -> list[Plan]:
        """``best``'s plan at ``value`` in the list order and, higher, in its own order.

        Under the steady-state objective orders are cyclic: the list order only.
        """
        plans = [best.plan.with_staleness(model, value)]
        if self.knobs.objective != "steady_state":
            kept = staleness_in_order(best, model, value)
            if kept is not None:
                plans.append(kept)
        return plans
