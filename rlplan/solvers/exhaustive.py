"""Backend ``exhaustive``: enumerate the whole plan space of a tiny instance.

Every combination of (block, candidate) per vertex and staleness per trained
model is visited; placements that overflow memory are skipped. For each
remaining (placement, staleness) the run order is optimised by depth-first
branch and bound over the serial schedule-generation scheme:

* a placement whose lower bound (the critical path with its real durations
  and lags, or the busiest GPU's total run time) is no better than the
  incumbent is pruned;
* at each node the next run is one of the ready runs; two consecutive runs on
  disjoint blocks commute (neither changes the other's start), so only the
  increasing order of such a pair is explored — every schedule keeps one
  representative (its lexicographically smallest run sequence);
* a node whose bound (max over ready runs of start + remaining path, and over
  GPUs of free time + remaining work) is no better than the incumbent is cut.

The result is the optimum over the plan space (candidates dominated in the
directory cannot improve it). Under the steady-state objective the order
of each (placement, staleness) is its best cyclic order instead
(:mod:`rlplan.solvers.steady_orders`). It refuses, naming the plan-space size, when
the space is too large to enumerate.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks.conform import framework_problems
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.solvers.common import plan_result, unplaceable_result, within_space
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status
from rlplan.solvers.steady_orders import best_cycle
from rlplan.solvers.templates import each_template

#: Largest number of (placement, staleness) combinations the oracle accepts.
MAX_COMBINATIONS = 2_000_000


def plan_space_size(problem: Problem) -> tuple[int, int]:
    """(placements, staleness combinations) of the instance."""
    directory = problem.directory
    placements = 1
    for vertex, per_shape in enumerate(directory.options):
        placements *= sum(len(c) * len(directory.blocks(vertex, s)) for s, c in per_shape.items())
    staleness = 1
    for model in directory.template.trained_models:
        staleness *= len(directory.instance.optimizer.staleness_candidates[model])
    return placements, staleness


class _OrderSearch:
    """Branch and bound over run orders for one (placement, staleness)."""

    def __init__(self, problem: Problem, plan: Plan, deadline: float) -> None:
        simulator = problem.simulator
        self.count = simulator.num_vertices
        self.runs = simulator.num_runs
        durations = simulator.durations(plan)  # with a colocated engine's wake and sleep
        self.duration = [durations[r % self.count] for r in range(self.runs)]
        lags = simulator.lags(plan)
        preds, succs, _ = simulator.graph(plan.staleness)
        self.preds = [
            [(p, lags[e] if e >= 0 else 0.0) for p, e in preds[r]] for r in range(self.runs)
        ]
        self.succs = succs
        # Each run's GPUs as ranges: one for a contiguous block, one per node for a sliced one.
        self.pieces = [plan.placements[r % self.count].block.pieces() for r in range(self.runs)]
        self.num_gpus = problem.directory.cluster.num_gpus
        self.deadline = deadline
        # Remaining path length from a run's start to the end of the schedule.
        self.tail = [0.0] * self.runs
        for run in reversed(range(self.runs)):  # run ids are topological
            best = 0.0
            for succ in succs[run]:
                lag = next(lag for p, lag in self.preds[succ] if p == run)
                best = max(best, lag + self.tail[succ])
            self.tail[run] = self.duration[run] + best
        self.nodes = 0
        self.timed_out = False

    def lower_bound(self) -> float:
        """Critical path with real lags and the busiest GPU's total work."""
        heads = [0.0] * self.runs
        for run in range(self.runs):
            heads[run] = max(
                (heads[p] + self.duration[p] + lag for p, lag in self.preds[run]), default=0.0
            )
        path = max(heads[r] + self.tail[r] for r in range(self.runs))
        load = [0.0] * self.num_gpus
        for run in range(self.runs):
            for low, high in self.pieces[run]:
                for gpu in range(low, high):
                    load[gpu] += self.duration[run]
        return max(path, max(load))

    def search(self, incumbent: float) -> tuple[float, list[int] | None]:
        """Best makespan below ``incumbent`` and its run sequence (None if none is better)."""
        self.best = incumbent
        self.best_sequence: list[int] | None = None
        remaining = [len(p) for p in self.preds]
        ready = [r for r in range(self.runs) if remaining[r] == 0]
        load = [0.0] * self.num_gpus
        for run in range(self.runs):
            for low, high in self.pieces[run]:
                for gpu in range(low, high):
                    load[gpu] += self.duration[run]
        self._dfs([0.0] * self.num_gpus, [0.0] * self.runs, remaining, ready, [], load, 0.0)
        return self.best, self.best_sequence

    def _dfs(self, free, end, remaining, ready, sequence, load, makespan) -> None:
        self.nodes += 1
        if self.nodes % 4096 == 0 and time.perf_counter() > self.deadline:
            self.timed_out = True
        if self.timed_out:
            return
        if not ready:
            if makespan < self.best:
                self.best, self.best_sequence = makespan, list(sequence)
            return
        if max(f + w for f, w in zip(free, load, strict=True)) >= self.best:
            return
        last = sequence[-1] if sequence else -1
        options = []
        for run in ready:
            pieces = self.pieces[run]
            if (
                last >= 0
                and run < last
                and all(
                    high <= last_low or last_high <= low
                    for low, high in pieces
                    for last_low, last_high in self.pieces[last]
                )
            ):
                continue  # commutes with the previous run: keep the increasing order only
            arrival = max((end[p] + lag for p, lag in self.preds[run]), default=0.0)
            start = max(arrival, *(max(free[low:high]) for low, high in pieces))
            if start + self.tail[run] >= self.best:
                continue
            options.append((start, run))
        options.sort()
        for start, run in options:
            pieces = self.pieces[run]
            finish = start + self.duration[run]
            saved = [free[low:high] for low, high in pieces]
            for low, high in pieces:
                free[low:high] = [finish] * (high - low)
                for gpu in range(low, high):
                    load[gpu] -= self.duration[run]
            end[run] = finish
            sequence.append(run)
            released = []
            for succ in self.succs[run]:
                remaining[succ] -= 1
                if remaining[succ] == 0:
                    released.append(succ)
            next_ready = [r for r in ready if r != run] + released
            self._dfs(free, end, remaining, next_ready, sequence, load, max(makespan, finish))
            for succ in self.succs[run]:
                remaining[succ] += 1
            sequence.pop()
            end[run] = 0.0
            for (low, high), kept in zip(pieces, saved, strict=True):
                for gpu in range(low, high):
                    load[gpu] += self.duration[run]
                free[low:high] = kept
            if self.timed_out:
                return


@dataclass
class _Enumeration:
    """The state of an enumeration: its best plan so far and what it visited."""

    best_plan: Plan | None = None
    best: float = float("inf")
    visited: int = 0
    feasible: int = 0
    pruned: int = 0
    nodes: int = 0
    timed_out: bool = False


def _refusal(problem: Problem, placements: int, staleness_count: int, started: float) -> Result:
    """UNKNOWN, naming the plan-space size, for a space too large to enumerate."""
    combinations = placements * staleness_count
    return Result(
        Status.UNKNOWN,
        "exhaustive",
        k_eval=problem.instance.k_eval,
        bound=problem.bounds.best,
        wall_time=time.perf_counter() - started,
        message=(
            f"refused: the plan space has {placements:,} placements x {staleness_count} "
            f"staleness choices = {combinations:,} combinations (each with its run orders), "
            f"more than the {MAX_COMBINATIONS:,} the exhaustive oracle enumerates"
        ),
        stats={"placements": placements, "staleness_combinations": staleness_count},
    )


def _placement_choices(problem: Problem) -> list[list[Placement]]:
    """Every (block, candidate) placement of each vertex, in template order."""
    directory = problem.directory
    return [
        [
            Placement(block, c.strategy)
            for shape, cands in per_shape.items()
            for block in directory.blocks(vertex, shape)
            for c in cands
        ]
        for vertex, per_shape in enumerate(directory.options)
    ]


def _staleness_choices(problem: Problem) -> list[tuple[tuple[str, int], ...]]:
    """Every combination of the trained models' staleness candidates."""
    directory = problem.directory
    models = directory.template.trained_models
    choices = directory.instance.optimizer.staleness_candidates
    return [
        make_staleness(dict(zip(models, values, strict=True)))
        for values in itertools.product(*(choices[m] for m in models))
    ]


def _search_placement(
    problem: Problem,
    base: Plan,
    staleness_options: list[tuple[tuple[str, int], ...]],
    state: _Enumeration,
    options: SolveOptions,
    deadline: float,
) -> None:
    """Improve ``state`` with the best run order of ``base`` under each staleness choice.

    Sets ``state.timed_out`` (and stops) when an order search reaches ``deadline``.
    """
    for staleness in staleness_options:
        plan = Plan(base.placements, staleness)
        if framework_problems(problem.directory, plan):
            continue  # outside the framework's plan space (engine.framework)
        listed = problem.simulator.evaluate(plan)
        if listed.makespan < state.best:
            state.best, state.best_plan = listed.makespan, plan
            options.progress.update(best=state.best)
        if problem.instance.steady_state:
            _search_cycle(problem, plan, state, options, deadline)
            if state.timed_out:
                return
            continue
        search = _OrderSearch(problem, plan, deadline)
        if search.lower_bound() >= state.best:
            state.pruned += 1
            continue
        value, sequence = search.search(state.best)
        state.nodes += search.nodes
        if sequence is not None and value < state.best:
            count = search.count
            state.best = value
            state.best_plan = plan.with_order(tuple((r % count, r // count) for r in sequence))
            options.progress.update(best=state.best)
        if search.timed_out:
            state.timed_out = True
            return


def _search_cycle(
    problem: Problem, plan: Plan, state: _Enumeration, options: SolveOptions, deadline: float
) -> None:
    """Improve ``state`` with the best cyclic order of ``plan`` (steady-state objective).

    ``state.best`` is ``k_eval`` periods, as the simulator's makespan is then;
    ``state.timed_out`` is set when ``deadline`` passes.
    """
    k_eval = problem.instance.k_eval
    period, cyclic, state.timed_out = best_cycle(problem, plan, state.best / k_eval, deadline)
    if cyclic is not None:
        state.best, state.best_plan = k_eval * period, cyclic
        options.progress.update(best=state.best)


def _enumerate(problem: Problem, options: SolveOptions, deadline: float) -> _Enumeration:
    """Visit every placement that fits in memory (until ``deadline``) and keep the best plan."""
    staleness_options = _staleness_choices(problem)
    state = _Enumeration()
    for combination in itertools.product(*_placement_choices(problem)):
        if time.perf_counter() > deadline:
            state.timed_out = True
            break
        state.visited += 1
        base = Plan(tuple(combination), staleness_options[0])
        if problem.simulator.memory_violation(base) > 0:
            continue
        state.feasible += 1
        _search_placement(problem, base, staleness_options, state, options, deadline)
        if state.timed_out:
            break
        options.progress.update(evaluations=state.visited)
    return state


def _enumeration_result(
    problem: Problem,
    state: _Enumeration,
    stats: dict,
    placements: int,
    options: SolveOptions,
    started: float,
) -> Result:
    """The result of an enumeration: best so far, INFEASIBLE, or the proven optimum."""
    if state.timed_out:
        message = (
            f"time limit reached after {state.visited:,} of {placements:,} placements: "
            "best plan so far, not proven optimal"
        )
        return plan_result(
            problem,
            "exhaustive",
            state.best_plan,
            started,
            requested_gap=options.gap,
            stats=stats,
            message=message,
        )
    if state.best_plan is None:
        return Result(
            Status.INFEASIBLE,
            "exhaustive",
            k_eval=problem.instance.k_eval,
            wall_time=time.perf_counter() - started,
            stats=stats,
            message="no combination of placements fits in memory" + within_space(problem),
        )
    # The enumeration completed: its best makespan is the optimum, hence a bound.
    best = state.best
    result = plan_result(
        problem,
        "exhaustive",
        state.best_plan,
        started,
        bound=best,
        requested_gap=options.gap,
        stats=stats,
    )
    if result.makespan is not None and abs(result.makespan - best) > 1e-9 * max(1.0, best):
        result.status = Status.ERROR
        result.message = (
            f"oracle makespan {best!r} differs from its simulated plan {result.makespan!r}"
        )
    return result


@each_template("exhaustive")  # AC-share: solve each template, keep the better
def solve(problem: Problem, options: SolveOptions) -> Result:
    """Enumerate the plan space; OPTIMAL when it completes (its optimum is then the bound)."""
    started = time.perf_counter()
    infeasible = unplaceable_result(problem, "exhaustive", started)
    if infeasible is not None:
        return infeasible
    placements, staleness_count = plan_space_size(problem)
    if placements * staleness_count > MAX_COMBINATIONS:
        return _refusal(problem, placements, staleness_count, started)
    state = _enumerate(problem, options, started + options.time_limit)
    stats = {
        "placements": placements,
        "staleness_combinations": staleness_count,
        "placements_visited": state.visited,
        "placements_memory_feasible": state.feasible,
        "pruned_by_bound": state.pruned,
        "order_nodes": state.nodes,
    }
    return _enumeration_result(problem, state, stats, placements, options, started)
