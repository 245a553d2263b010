"""Conforming heuristic plans to a framework's rules (rlplan/rpeg/model/frameworks/conform.py)."""

from __future__ import annotations

import dataclasses

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model import frameworks
from rlplan.rpeg.model.frameworks import rules as R
from rlplan.rpeg.model.frameworks.conform import conform, framework_problems
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search.baselines import greedy_plan

WORDS = {"words": "w", "need": "n", "source": "s"}
PPO = "instances/ppo_8b_1x4x8_h100.yaml"


def framed(path: str, monkeypatch, *rules: R.Rule) -> Problem:
    monkeypatch.setitem(frameworks.FRAMEWORKS, "nemo-rl", R.Framework("nemo-rl", "T", "t", rules))
    instance = load_instance(path)
    engine = dataclasses.replace(instance.engine, framework="nemo-rl")
    return Problem.from_instance(dataclasses.replace(instance, engine=engine))


def _layout(placement):
    s = placement.strategy
    return (placement.block, s.dp, s.pp, s.tp)


def _shared_plan(problem: Problem):
    """Every vertex on the whole cluster with its fastest strategy there (memory aside)."""
    directory = problem.directory
    whole = directory.cluster.blocks[0]
    assert whole.size == directory.cluster.num_gpus
    placements = tuple(
        Placement(whole, directory.options[v][whole.extent][0].strategy)
        for v in range(len(directory.template.vertices))
    )
    return Plan(placements, (("actor", 0),))


def test_a_follower_takes_its_leaders_block_and_layout(monkeypatch):
    tie = R.SameLayout("tie", leader="actor.train", follower="reference.infer", **WORDS)
    problem = framed("instances/tiny_grpo_4gpu.yaml", monkeypatch, tie)
    directory = problem.directory
    names = directory.template.names
    train, ref = names.index("actor.train"), names.index("reference.infer")
    plan = greedy_plan(directory, problem.simulator)
    # Move the trainer to GPUs 0-1 alone: the reference must follow it there.
    block = directory.blocks(train, (1, 1, 2))[0]
    strategy = directory.options[train][(1, 1, 2)][0].strategy
    moved = plan.with_placement(train, type(plan.placements[0])(block, strategy))
    assert framework_problems(directory, moved)
    fixed = conform(directory, moved)
    assert _layout(fixed.placements[ref]) == _layout(fixed.placements[train])
    assert fixed.placements[train] == moved.placements[train]
    assert framework_problems(directory, fixed) == []


def test_stale_pairs_sharing_gpus_run_on_policy(monkeypatch):
    apart = R.DisjointWhenStale(
        "apart", model="actor", first="actor.generate", second="actor.train", **WORDS
    )
    problem = framed("instances/tiny_lag_grpo_2gpu_async.yaml", monkeypatch, apart)
    directory = problem.directory
    names = directory.template.names
    plan = _shared_plan(problem)
    gen, train = names.index("actor.generate"), names.index("actor.train")
    assert plan.placements[gen].block.intersects(plan.placements[train].block)
    stale = plan.with_staleness("actor", 1)
    assert framework_problems(directory, stale)
    assert conform(directory, stale).staleness_map == {"actor": 0}


def test_staleness_outside_the_values_falls_to_the_largest_below(monkeypatch):
    sync = R.StalenessValues("sync", allowed=frozenset({0}), **WORDS)
    problem = framed("instances/tiny_lag_grpo_2gpu_async.yaml", monkeypatch, sync)
    plan = _shared_plan(problem).with_staleness("actor", 1)
    assert framework_problems(problem.directory, plan)
    assert conform(problem.directory, plan).staleness_map == {"actor": 0}


def _train_beside_rollout(name: str, field: str, value) -> R.FieldWhenShared:
    """A rule allowing only ``value`` of ``field`` for the actor's training beside its rollout."""
    return R.FieldWhenShared(
        name,
        vertex="actor.train",
        other="actor.generate",
        field=field,
        allowed=frozenset({value}),
        **WORDS,
    )


def test_field_beside_a_rollout_switches_to_an_allowed_value(monkeypatch):
    # tiny_grpo_4gpu lists offload false only: no allowed candidate, so the
    # plan is left as it is and still breaks the rule.
    rule = _train_beside_rollout("off", "offload", True)
    problem = framed("instances/tiny_grpo_4gpu.yaml", monkeypatch, rule)
    directory = problem.directory
    free = Problem.from_instance(load_instance("instances/tiny_grpo_4gpu.yaml"))
    plan = greedy_plan(free.directory, free.simulator)
    assert conform(directory, plan) == plan
    assert framework_problems(directory, plan)
    assert greedy_plan(directory, problem.simulator) is None


def _whole_cluster_plan(problem: Problem) -> Plan:
    plan = _shared_plan(problem)
    return Plan(plan.placements, tuple((m, 0) for m in problem.directory.template.trained_models))


def test_field_beside_a_rollout_keeps_the_layout_when_an_allowed_value_has_it(monkeypatch):
    # The fastest candidate with an allowed microbatch count in the vertex's own
    # layout, not the fastest allowed one overall.
    rule = _train_beside_rollout("mb", "microbatches", 4096)
    problem = framed(PPO, monkeypatch, rule)
    directory = problem.directory
    train = directory.template.names.index("actor.train")
    whole = directory.cluster.blocks[0]
    options = directory.options[train][whole.extent]
    fastest_allowed = next(c for c in options if c.strategy.microbatches == 4096)
    mine = next(
        c
        for c in options
        if c.strategy.microbatches != 4096
        and R.layout_of(c.strategy) != R.layout_of(fastest_allowed.strategy)
        and any(
            o.strategy.microbatches == 4096 and R.layout_of(o.strategy) == R.layout_of(c.strategy)
            for o in options
        )
    )
    expected = next(
        o
        for o in options
        if o.strategy.microbatches == 4096 and R.layout_of(o.strategy) == R.layout_of(mine.strategy)
    )
    plan = _whole_cluster_plan(problem).with_placement(train, Placement(whole, mine.strategy))
    fixed = conform(directory, plan)
    assert fixed.placements[train] == Placement(whole, expected.strategy)
    assert expected.strategy != fastest_allowed.strategy


def test_a_follower_in_its_leaders_layout_keeps_its_strategy(monkeypatch):
    tie = R.SameLayout("tie", leader="actor.train", follower="actor.infer", **WORDS)
    problem = framed(PPO, monkeypatch, tie)
    directory = problem.directory
    train, infer = (directory.template.names.index(n) for n in ("actor.train", "actor.infer"))
    whole = directory.cluster.blocks[0]
    lead = directory.options[train][whole.extent][0].strategy
    same = [
        c.strategy
        for c in directory.options[infer][whole.extent]
        if R.layout_of(c.strategy) == R.layout_of(lead)
    ]
    assert len(same) > 1
    # The follower on another block with the layout's second candidate: it moves, keeping it.
    other = directory.blocks(infer, (1, 1, 8))[0]
    plan = _whole_cluster_plan(problem).with_placement(train, Placement(whole, lead))
    plan = plan.with_placement(infer, Placement(other, same[1]))
    assert conform(directory, plan).placements[infer] == Placement(whole, same[1])
