"""Framework plan spaces: each rule kind narrows the plan space the same way in every backend.

The rules under test are synthetic (registered under ``nemo-rl`` for the
test's duration), so these tests guard the mechanism whatever the shipped
frameworks' rules say; tests/rpeg/test_framework_*.py check those rules.
"""

from __future__ import annotations

import dataclasses

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model import frameworks
from rlplan.rpeg.model.frameworks import rules as R
from rlplan.rpeg.model.frameworks.conform import framework_problems
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import load_instance
from rlplan.solvers import framework_gap, solve
from rlplan.solvers.framework_gap import solve_in_framework
from rlplan.solvers.options import SolveOptions

TINY = "instances/tiny_grpo_4gpu.yaml"
ASYNC = "instances/tiny_lag_grpo_2gpu_async.yaml"
EXACT = ("exhaustive", "cpsat", "milp")
WORDS = {"words": "w", "need": "n", "source": "test"}
SAME_LAYOUT = R.SameLayout(
    "ref-in-layout", leader="actor.train", follower="reference.infer", **WORDS
)
RESIDENT = R.FieldWhenShared(
    "offload-beside-rollout",
    vertex="actor.train",
    other="actor.generate",
    field="offload",
    allowed=frozenset({True}),
    **WORDS,
)


def restricted(path: str, monkeypatch, *rules: R.Rule) -> tuple[Problem, Problem]:
    """The instance's problem over the full space and over a framework of ``rules``."""
    framework = R.Framework("nemo-rl", "Test", "t1", tuple(rules))
    monkeypatch.setitem(frameworks.FRAMEWORKS, "nemo-rl", framework)
    instance = load_instance(path)
    engine = dataclasses.replace(instance.engine, framework="nemo-rl")
    return Problem.from_instance(instance), Problem.from_instance(
        dataclasses.replace(instance, engine=engine)
    )


def optima(problem: Problem, solvers=EXACT) -> dict[str, float]:
    results = {
        name: solve(name, problem, SolveOptions(time_limit=60, threads=2)) for name in solvers
    }
    for name, result in results.items():
        assert result.plan is not None, name
        assert framework_problems(problem.directory, result.plan) == [], name
    return {name: result.makespan for name, result in results.items()}


def test_same_layout_removes_the_full_space_optimum(monkeypatch):
    # On 4 GPUs every vertex of the optimum runs on the whole node, one after
    # the other (k_eval 2). Its reference pass takes dp 4 (0.0398 s) and its
    # trainer dp 2 x tp 2 (0.1887 s), the rollout's own layout, so the trainer
    # publishes to the next rollout with no reshard. Tied to the trainer's
    # layout, the reference and trainer take the best common layout, dp 4
    # (0.0398 + 0.1951 s; dp 2 x tp 2 gives 0.0619 + 0.1887), and the next
    # rollout pays one reshard (a collective of its weight shard): optimum =
    # full optimum + 2 x (0.2349 - 0.2285) + 0.0252 = 4.9852 + 0.0380 s.
    full, framed = restricted(TINY, monkeypatch, SAME_LAYOUT)
    directory = framed.directory
    names = directory.template.names
    whole = (1, 1, 4)
    times = {
        name: {
            (c.strategy.dp, c.strategy.pp, c.strategy.tp): c.time
            for c in directory.options[names.index(name)][whole]
        }
        for name in ("reference.infer", "actor.train")
    }
    ref, train = times["reference.infer"], times["actor.train"]
    rollout = directory.options[names.index("actor.generate")][whole][0].strategy
    assert (rollout.dp, rollout.pp, rollout.tp) == (2, 1, 2) == min(train, key=train.get)
    common = min(ref[layout] + train[layout] for layout in ref.keys() & train.keys())
    reshard = directory.cost.pub_lag("actor", True, False, "g", rollout)
    free = optima(full)
    assert len(set(free.values())) == 1
    expected = free["exhaustive"] + 2 * (common - min(ref.values()) - min(train.values())) + reshard
    tied = optima(framed, (*EXACT, "local"))
    for name, makespan in tied.items():
        assert makespan == pytest.approx(expected, abs=2e-3), name
    assert tied["cpsat"] > free["cpsat"] + 0.03


def test_field_when_shared_moves_training_off_the_rollout(monkeypatch):
    # The optimum colocates the trainer (offload false: the only value the
    # instance lists) with the rollout; the rule forbids that, so every exact
    # backend finds the same, slower, split plan.
    full, framed = restricted(TINY, monkeypatch, RESIDENT)
    free = solve("cpsat", full, SolveOptions(time_limit=60, threads=2))
    assert framework_problems(framed.directory, free.plan)
    tied = optima(framed)
    assert len({round(value, 6) for value in tied.values()}) == 1
    assert tied["cpsat"] > free.makespan * 1.05
    plan = solve("cpsat", framed, SolveOptions(time_limit=60, threads=2)).plan
    names = framed.directory.template.names
    rollout, trainer = (plan.placements[names.index(n)] for n in ("actor.generate", "actor.train"))
    assert not rollout.block.intersects(trainer.block)


def test_staleness_values_and_disjoint_when_stale(monkeypatch):
    # The async instance's optimum runs the rollout and the trainer on
    # different GPUs with staleness 1. Forbidding staleness 1 makes the step
    # on-policy; forbidding stale colocation keeps the optimum (it is apart).
    sync_only = R.StalenessValues("sync-only", allowed=frozenset({0}), **WORDS)
    full, framed = restricted(ASYNC, monkeypatch, sync_only)
    free = optima(full)
    tied = optima(framed)
    assert len({round(value, 6) for value in tied.values()}) == 1
    assert tied["cpsat"] > free["cpsat"] + 1e-3
    plan = solve("exhaustive", framed, SolveOptions(time_limit=60)).plan
    assert plan.staleness_map == {"actor": 0}
    apart = R.DisjointWhenStale(
        "apart", model="actor", first="actor.generate", second="actor.train", **WORDS
    )
    _, framed = restricted(ASYNC, monkeypatch, apart)
    assert optima(framed)["cpsat"] == pytest.approx(free["cpsat"], abs=1e-6)


def test_dominance_keeps_every_layout_a_rule_compares(monkeypatch):
    # Without the rule, dominance may keep one (tp, pp) of the reference pass
    # per shape (no pub edge touches it); tied to the trainer's layout, each
    # layout that fits must survive, or the tie could lose its best pair.
    full, framed = restricted(TINY, monkeypatch, SAME_LAYOUT)
    index = framed.directory.template.names.index("reference.infer")
    for shape, kept in framed.directory.options[index].items():
        layouts = {(c.strategy.dp, c.strategy.pp, c.strategy.tp) for c in kept}
        free = {
            (c.strategy.dp, c.strategy.pp, c.strategy.tp)
            for c in full.directory.options[index][shape]
        }
        assert free <= layouts
    assert framed.directory.size > full.directory.size


def test_solve_in_framework_reports_the_full_space_and_its_needs(monkeypatch):
    _, framed = restricted(TINY, monkeypatch, SAME_LAYOUT)
    result = solve_in_framework(_cpsat, framed, SolveOptions(time_limit=20))
    facts = result.stats["framework"]
    assert facts["step_time"] == pytest.approx(result.step_time)
    assert facts["speedup"] > 1.0
    assert facts["needs"] == ["n"]
    assert any("ref-in-layout" in line for line in facts["broken"])


def _cpsat(problem: Problem, options: SolveOptions):
    return solve("cpsat", problem, options)


class _Clock:
    """A stand-in for the ``time`` module whose clock moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize(("limit", "limits"), [(10.0, [5.0, 3.0]), (6.0, [3.0, 0.001])])
def test_the_full_space_solve_gets_what_the_first_solve_and_its_build_left(
    monkeypatch, limit, limits
):
    # Each solve takes 4 s and building the full-space problem 3 s of the clock: the
    # full-space solve gets the limit minus both (never less than 0.001 s).
    _, framed = restricted(TINY, monkeypatch, SAME_LAYOUT)
    clock = _Clock()
    monkeypatch.setattr(framework_gap, "time", clock)
    build = framework_gap.full_space

    def slow_build(problem: Problem) -> Problem:
        clock.now += 3.0
        return build(problem)

    given = []

    def timed(problem: Problem, options: SolveOptions):
        given.append(options.time_limit)
        clock.now += 4.0
        return solve("greedy", problem, options)

    monkeypatch.setattr(framework_gap, "full_space", slow_build)
    result = solve_in_framework(timed, framed, SolveOptions(time_limit=limit))
    assert given == limits
    assert result.stats["framework"]["full_space_step_time"] is not None


def test_switching_frameworks_builds_each_problem_once(monkeypatch):
    full, _ = restricted(TINY, monkeypatch, SAME_LAYOUT)
    framed = full.with_framework("nemo-rl")
    assert framed.directory.framework is not None
    assert framed.with_framework(None) is full
    assert full.with_framework("nemo-rl") is framed


def test_unsupported_instance_is_infeasible_with_the_rule(monkeypatch):
    never = R.Unsupported("no-grpo", applies=lambda instance: instance.algorithm == "grpo", **WORDS)
    _, framed = restricted(TINY, monkeypatch, never)
    result = solve_in_framework(_cpsat, framed, SolveOptions(time_limit=5))
    assert result.plan is None
    assert "rule no-grpo" in result.message


def test_fingerprint_ignores_the_framework():
    instance = load_instance(TINY)
    engine = dataclasses.replace(instance.engine, framework="verl")
    assert instance_fingerprint(instance) == instance_fingerprint(
        dataclasses.replace(instance, engine=engine)
    )


def test_a_fixed_field_takes_the_frameworks_values_beyond_the_lists(monkeypatch):
    # tiny_grpo_4gpu lists offload false only. A framework that always keeps
    # the reference in host memory (a fixed rule) runs it with offload true,
    # which the instance's own plan space does not hold; a plain rule with the
    # same values leaves the reference nothing to run with.
    on_host = {"field": "offload", "allowed": frozenset({True}), "vertices": ("reference.infer",)}
    fixed = R.FieldValues("ref-on-host", fixed=True, **on_host, **WORDS)
    _, framed = restricted(TINY, monkeypatch, fixed)
    index = framed.directory.template.names.index("reference.infer")
    kept = [c for per_shape in framed.directory.options[index].values() for c in per_shape]
    assert kept and all(c.strategy.offload for c in kept)
    plan = solve("cpsat", framed, SolveOptions(time_limit=60, threads=2)).plan
    assert plan.placements[index].strategy.offload is True
    narrowing = R.FieldValues("ref-on-host", **on_host, **WORDS)
    _, framed = restricted(TINY, monkeypatch, narrowing)
    assert framed.directory.options[index] == {}
