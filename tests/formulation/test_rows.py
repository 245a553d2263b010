"""The shared rows of the exact backends hold on every simulated schedule.

A row of ``rlplan.formulation.rows`` is a valid inequality only if no plan of the
plan space violates it. The simulator schedules every run as soon as its
inputs have arrived, so a lag row whose conditions hold is *tight* on some
plans: a lag rounded up instead of down (``Formulation.to_units``), or a
condition attached to the wrong block, makes these tests fail.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from rlplan.formulation import build_formulation, rows, windows
from rlplan.formulation.model import Formulation
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search.sampling import random_plan

ROOT = Path(__file__).resolve().parent.parent.parent
INSTANCES = [
    ROOT / "tests" / "data" / "tiny_grpo_2x2gpu.yaml",  # two nodes: node- and GPU-level lags
    ROOT / "instances" / "tiny_ppo_2gpu.yaml",
    ROOT / "instances" / "tiny_grpo_4gpu.yaml",
    # A 1.5 ms GPU-to-GPU latency: point-to-point copies and reshards differ by
    # many time units, so a lag priced the wrong way shows.
    ROOT / "instances" / "tiny_lag_grpo_2gpu_async.yaml",
    ROOT / "tests" / "data" / "tiny_grpo_4gpu_slow_p2p.yaml",
]
PLANS_PER_INSTANCE = 60


def _holds(condition: rows.Condition, f: Formulation, plan: Plan, chosen: list[int]) -> bool:
    if isinstance(condition, rows.StalenessIs):
        return plan.staleness_map[condition.model] == condition.value
    if isinstance(condition, rows.OnBlocks):
        block = f.block_index[plan.placements[condition.vertex].block]
        return block in condition.blocks
    return chosen[condition.vertex] in condition.indices


def _feasible_plans(problem: Problem) -> list[Plan]:
    rng = random.Random(7)
    plans = []
    for _ in range(PLANS_PER_INSTANCE * 4):
        plan = random_plan(problem.directory, rng, with_order=rng.random() < 0.5)
        if problem.simulator.simulate(plan).feasible:
            plans.append(plan)
        if len(plans) == PLANS_PER_INSTANCE:
            break
    return plans


def _simulated(problem: Problem, plan: Plan):
    """The formulation of ``plan``, its canonical form and assignments, its trace, and
    each run's simulated start and end (by run id)."""
    f = build_formulation(problem, problem.simulator.evaluate(plan).makespan)
    plan = f.canonical(plan)  # the formulation only holds the root's canonical blocks
    chosen = [f.assignment_of(v, p) for v, p in enumerate(plan.placements)]
    trace = problem.simulator.simulate(plan)
    names = problem.directory.template.names
    start, end = {}, {}
    for (vertex, step), span in trace.run_spans().items():
        run = f.run(names.index(vertex), step)
        start[run], end[run] = span
    return f, plan, chosen, trace, start, end


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.stem)
def test_lag_rows_hold_and_bind_on_simulated_schedules(path: Path) -> None:
    problem = Problem.from_instance(load_instance(str(path)))
    plans = _feasible_plans(problem)
    assert plans
    tight_lag_rows = 0
    for plan in plans:
        f, plan, chosen, trace, start, end = _simulated(problem, plan)
        names = problem.directory.template.names
        transfers = {
            (
                f.run(names.index(event.vertex), event.step),
                f.run(names.index(event.source[0]), event.source[1]),
            ): event.end - event.start
            for event in trace.events
            if event.kind in ("transfer", "refit")
        }
        all_rows = [
            *rows.chain_rows(f),
            *rows.data_rows(f),
            *rows.pub_rows(f),
            *rows.refit_rows(f),
        ]
        for row in all_rows:
            if not all(_holds(c, f, plan, chosen) for c in row.conditions):
                continue
            slack = start[row.after] - (end[row.before] + row.lag * f.unit)
            assert slack >= -1e-9, (plan, row, slack)
            if row.lag > 0:
                # The row's lag is the simulator's transfer, rounded down to the unit.
                assert row.lag == f.to_units(transfers[(row.after, row.before)]), (plan, row)
                if slack < f.unit:
                    tight_lag_rows += 1
    # The check above is not vacuous: some transfer lag decides a start.
    assert tight_lag_rows > 0


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.stem)
def test_memory_rows_hold_on_memory_feasible_plans(path: Path) -> None:
    problem = Problem.from_instance(load_instance(str(path)))
    for plan in _feasible_plans(problem):
        f = build_formulation(problem, problem.simulator.evaluate(plan).makespan)
        plan = f.canonical(plan)
        chosen = [f.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        for row in rows.memory_rows(f):
            resident: dict[str, int] = {}
            transient = 0
            for terms in row.vertices:
                for (i, r), (_, t) in zip(terms.resident, terms.transient, strict=True):
                    if chosen[terms.vertex] == i:
                        resident[terms.model] = max(resident.get(terms.model, 0), r)
                        transient = max(transient, t)
            assert sum(resident.values()) + transient <= f.memory_capacity, (plan, row.unit)


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.stem)
def test_colocation_rows_force_exactly_the_colocated_engines(path: Path) -> None:
    """A colocation row's conditions hold only when the engine truly shares a GPU, and
    every colocated engine has such a row; the switch term then prices the simulator's
    wake and sleep, the run's duration rounded down once."""
    problem = Problem.from_instance(load_instance(str(path)))
    colocated_seen = 0
    for plan in _feasible_plans(problem):
        f = build_formulation(problem, problem.simulator.evaluate(plan).makespan)
        plan = f.canonical(plan)
        chosen = [f.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        truth = problem.simulator.colocated(plan)
        assert f.colocated_of(chosen) == truth
        forced = {
            row.engine
            for row in rows.colocation_rows(f)
            if all(_holds(c, f, plan, chosen) for c in row.conditions)
        }
        assert forced == {v for v in f.engines if truth[v]}, plan
        durations = problem.simulator.durations(plan)
        for engine in f.engines:
            colocated_seen += truth[engine]
            assert f.durations(chosen)[engine] == f.to_units(durations[engine]), plan
    assert colocated_seen > 0


#: The lag instance is left out: every plan fitting its GPUs colocates the rollout
#: with reward.infer and holds the same host bytes, so one outcome only.
HOST_INSTANCES = [path for path in INSTANCES if path.stem != "tiny_lag_grpo_2gpu_async"]


@pytest.mark.parametrize("path", HOST_INSTANCES, ids=lambda p: p.stem)
def test_host_memory_rows_agree_with_the_simulator(path: Path) -> None:
    """On plans that fit the GPUs, the host rows all fit exactly when the simulator finds
    every node's host memory within capacity, and each row's value at the plan's choice
    is the simulator's host bytes of that node (rounded up per term)."""
    problem = Problem.from_instance(load_instance(str(path)))
    # A host memory small enough for offloaded states and sleeping engines to matter.
    instance = problem.instance
    hardware = dataclasses.replace(instance.hardware, host_memory_per_node=1.3e9)
    problem = Problem.from_instance(dataclasses.replace(instance, hardware=hardware))
    simulator = problem.simulator
    rng = random.Random(11)
    outcomes = set()
    for _ in range(PLANS_PER_INSTANCE * 4):
        plan = random_plan(problem.directory, rng)
        if simulator.gpu_violation(plan) > 0:
            continue
        f = build_formulation(problem, simulator.evaluate(plan).makespan)
        plan = f.canonical(plan)
        chosen = [f.assignment_of(v, p) for v, p in enumerate(plan.placements)]
        colocated = f.colocated_of(chosen)
        trace = simulator.simulate(plan)
        fits = True
        for row in rows.host_memory_rows(f):
            held: dict[str, int] = {}
            engines = 0
            for terms in row.vertices:
                size = dict(terms.terms).get(chosen[terms.vertex], 0)
                if terms.engine:
                    engines += size if colocated[terms.vertex] else 0
                else:
                    held[terms.model] = max(held.get(terms.model, 0), size)
            total = sum(held.values()) + engines
            fits = fits and total <= f.host_capacity
            assert total == pytest.approx(trace.host_memory_bytes[row.node], abs=8), plan
        assert fits == (trace.host_violation_bytes <= 0), plan
        outcomes.add(fits)
    # Both outcomes occur: the check is not vacuous.
    assert outcomes == {True, False}


def test_area_terms_cover_every_assignment() -> None:
    # tiny_ppo_2gpu: coefficient = k_eval x GPUs x duration of each assignment.
    problem = Problem.from_instance(load_instance(str(INSTANCES[1])))
    f = build_formulation(problem, 100.0, prune=False)
    terms = rows.area_terms(f)
    assert len(terms) == sum(len(items) for items in f.assignments)
    for vertex, index, coefficient in terms:
        a = f.assignments[vertex][index]
        assert coefficient == f.k_eval * a.block.size * a.duration


def _window_runs(f: Formulation, row: windows.WindowRow) -> dict[int, int]:
    """How many of each vertex's runs a window row counts (coefficient / (GPUs x duration))."""
    times: dict[int, int] = {}
    for vertex, index, coefficient in row.terms:
        a = f.assignments[vertex][index]
        if a.duration:
            times[vertex] = coefficient // (a.block.size * a.duration)
    return times


def test_window_rows_count_the_runs_between_two_runs() -> None:
    # tiny_grpo_2gpu, k_eval 2, runs step-major: generate 0/5, actor.infer 1/6,
    # reference.infer 2/7, reward.infer 3/8, actor.train 4/9. Precedences every plan
    # keeps: the data edges of each step, each vertex's chain, and the synchronous pub
    # edge actor.train(t-1) -> actor.infer(t) (old log-probs); train -> generate
    # depends on the staleness and is left out.
    # * before actor.infer of step 1 (run 6): both generations, the step-0 infers and
    #   the step-0 train;
    # * after actor.infer of step 0 (run 1): the two trains and actor.infer of step 1
    #   (the next generation does not wait for it);
    # * between the two trains (4, 9): actor.infer of step 1 alone.
    problem = Problem.from_instance(load_instance(str(ROOT / "instances" / "tiny_grpo_2gpu.yaml")))
    f = build_formulation(problem, 100.0, prune=False)
    by_ends = {(row.after, row.before): row for row in windows.window_rows(f)}
    assert _window_runs(f, by_ends[None, 6]) == {0: 2, 1: 1, 2: 1, 3: 1, 4: 1}
    assert _window_runs(f, by_ends[1, None]) == {1: 1, 4: 2}
    assert _window_runs(f, by_ends[4, 9]) == {1: 1}
    assert (0, 9) in by_ends and (9, None) not in by_ends  # nothing follows the last train
    assert all(row.gpus == 2 for row in by_ends.values())


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.stem)
def test_window_rows_hold_on_simulated_schedules(path: Path) -> None:
    """Each busy window's GPU-time covers its runs' on every simulated schedule, and
    some window is tighter than the whole schedule's area row."""
    problem = Problem.from_instance(load_instance(str(path)))
    tighter = 0
    for plan in _feasible_plans(problem):
        f, plan, chosen, _, start, end = _simulated(problem, plan)
        makespan = max(end.values())
        area = sum(c for v, i, c in rows.area_terms(f) if chosen[v] == i) * f.unit
        slack_of_area = f.problem.directory.cluster.num_gpus * makespan - area
        for row in windows.window_rows(f):
            busy = sum(c for v, i, c in row.terms if chosen[v] == i) * f.unit
            window = (makespan if row.before is None else start[row.before]) - (
                0.0 if row.after is None else end[row.after]
            )
            slack = row.gpus * window - busy
            assert slack >= -1e-6, (plan, row.after, row.before, slack)
            tighter += slack < slack_of_area - 1e-6
    assert tighter > 0


def test_window_rows_fill_the_term_budget_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny_grpo_2gpu: the heads (None, 1..9) hold 4, 4, 4, 19, 4, 22, 9, 9 and 22 terms
    # (97); the tails (0..8, None) 22, 8, 13, ... With 96 terms the last head does not
    # fit; of the 21 left, the tail of run 0 (22) does not either, those of runs 1 (8)
    # and 2 (13) do, and nothing is left for the rest.
    problem = Problem.from_instance(load_instance(str(ROOT / "instances" / "tiny_grpo_2gpu.yaml")))
    f = build_formulation(problem, 100.0, prune=False)
    monkeypatch.setenv("RLPLAN_WINDOW_TERMS", "97")
    assert [(r.after, r.before) for r in windows.window_rows(f)] == [
        (None, b) for b in range(1, 10)
    ]
    monkeypatch.setenv("RLPLAN_WINDOW_TERMS", "96")
    ends = [(r.after, r.before) for r in windows.window_rows(f)]
    assert ends == [*((None, b) for b in range(1, 9)), (1, None), (2, None)]
    assert sum(len(r.terms) for r in windows.window_rows(f)) == 96
