"""The group move (one memory setting for every vertex of a group) against full simulation."""

from __future__ import annotations

import dataclasses
import random

from rlplan.rpeg.model.plan import Placement
from rlplan.rpeg.search import moves
from rlplan.rpeg.search.compound_moves import MEMORY_DIMENSIONS, set_group_setting
from tests.rpeg.test_moves import optimum, proposals, state_of
from tests.solvers.conftest import load_problem


def test_group_move_restores_offload_on_both_inference_vertices_at_once():
    """tiny_dpo_2gpu_v2's optimum (13.3170 s) offloads actor.infer and reference.infer;
    with both kept on the GPUs the plan overflows memory (scored above the optimum), and
    with either one alone offloaded it still overflows by as much: only setting both
    at once, one move, gets back to the optimum, whose full simulation is the
    proposal's score."""
    name = "tiny_dpo_2gpu_v2.yaml"
    problem = load_problem(name)
    best = optimum(name)
    infer = [problem.directory.template.index(v) for v in ("actor.infer", "reference.infer")]
    worse = best
    for vertex in infer:
        placement = worse.placements[vertex]
        assert placement.strategy.offload
        kept = dataclasses.replace(placement.strategy, offload=False)
        worse = worse.with_placement(vertex, Placement(placement.block, kept))
    for vertex in infer:  # one vertex back: still as far over memory
        half = worse.with_placement(vertex, best.placements[vertex])
        assert not problem.simulator.evaluate(half).feasible
    found = proposals(moves.SET_GROUP_SETTING, problem, worse)
    assert best in found
    scored = min(state_of(problem, plan).score for plan in found)
    assert scored == problem.simulator.evaluate(best).score
    assert scored < state_of(problem, worse).score


def test_group_move_changes_one_memory_field_on_every_vertex_it_moves():
    """On ppo_8b_1x2x8_h100 each proposal differs from its start only in vertices of one
    group, all in the same memory field set to the same value (the fastest candidate of
    the same (dp, pp, tp) where the exact strategy is not listed), and simulates."""
    problem = load_problem("ppo_8b_1x2x8_h100.yaml")
    directory = problem.directory
    context = moves.MoveContext(directory, problem.instance.optimizer)
    rng = random.Random(3)
    plan = optimum_free_start(problem)
    seen_fields = set()
    for _ in range(60):
        for neighbour in set_group_setting(state_of(problem, plan), context, rng):
            pairs = zip(plan.placements, neighbour.placements, strict=True)
            changed = [v for v, (old, new) in enumerate(pairs) if old != new]
            assert changed
            settings = None  # the (field, value) pairs every moved vertex took
            for vertex in changed:
                old, new = plan.placements[vertex], neighbour.placements[vertex]
                assert old.block == new.block
                assert new.strategy.layout[:2] == old.strategy.layout[:2]  # same tp, pp
                assert new.strategy.dp == old.strategy.dp
                took = {
                    (name, getattr(new.strategy, name))
                    for name in MEMORY_DIMENSIONS
                    if getattr(old.strategy, name) != getattr(new.strategy, name)
                }
                settings = took if settings is None else settings & took
                listed = {c.strategy for c in directory.options[vertex][new.block.extent]}
                assert new.strategy in listed
            assert settings, "the moved vertices took no common memory setting"
            seen_fields |= {name for name, _ in settings}
            assert problem.simulator.evaluate(neighbour).makespan > 0
            plan = neighbour
    assert seen_fields >= {"offload"}


def optimum_free_start(problem):
    """A random plan of the space (seeded): vertices on several blocks and settings."""
    from rlplan.rpeg.search.sampling import random_plan

    return random_plan(problem.directory, random.Random(5))
