"""The local-search move across GPU pools, ``change_pool`` (docs/solvers.md#local).

On tests/data/tiny_two_pools_grpo.yaml (pools ``fast`` and ``wide``, one 2-GPU
block each, one strategy per vertex) the optimum rolls out on ``wide`` and trains
on ``fast``, 0.02409002356224 s (derived by hand in tests/solvers/test_pools_exact.py).
Every block move that looks blocks up by shape keeps a vertex in its pool; from a
plan with both vertices on one pool, ``change_pool`` alone must reach that optimum.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import random

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.pins import Pins
from rlplan.rpeg.search import moves
from rlplan.rpeg.search.annealing import SimulatedAnnealing
from rlplan.rpeg.search.pool_moves import pool_targets
from rlplan.rpeg.search.stopping import StoppingCriterion
from rlplan.solvers.local import best_baseline
from tests.rpeg.test_moves import proposals, state_of
from tests.solvers.conftest import load_problem
from tests.solvers.test_pools_exact import OPTIMUM, REL, TWO_POOLS

#: Evaluations of the search from a one-pool start: the plan space has four plans.
BUDGET = 200


@functools.cache
def two_pools(**placement) -> Problem:
    """The two-pool instance, with placement fields replaced."""
    instance = Problem.load(str(TWO_POOLS)).instance
    changed = dataclasses.replace(instance.placement, **placement)
    return Problem.from_instance(dataclasses.replace(instance, placement=changed))


def all_on(problem: Problem, pool: str) -> Plan:
    """Both vertices on ``pool``'s 2-GPU block with their fastest candidate."""
    cluster = problem.directory.cluster
    block = next(b for b in cluster.whole_blocks() if cluster.pool_name(b) == pool)
    placements = tuple(
        Placement(block, problem.directory.options[vertex][block.extent][0].strategy)
        for vertex in range(len(problem.directory.template.vertices))
    )
    staleness = tuple((model, 0) for model in problem.instance.optimizer.staleness_candidates)
    return Plan(placements, staleness)


def pools(problem: Problem, plan: Plan) -> tuple[str, ...]:
    return tuple(problem.directory.cluster.pool_name(p.block) for p in plan.placements)


@pytest.mark.parametrize("pool", ["fast", "wide"])
def test_change_pool_proposes_blocks_of_another_pool_only(pool):
    """Each proposal moves one vertex, to the other pool, with a candidate of its shape."""
    problem = two_pools()
    start = all_on(problem, pool)
    found = proposals(moves.CHANGE_POOL, problem, start)
    assert found
    moved = set()
    for plan in found:
        changed = [
            vertex
            for vertex, (old, new) in enumerate(zip(start.placements, plan.placements, strict=True))
            if old != new
        ]
        assert len(changed) == 1
        vertex = changed[0]
        new = plan.placements[vertex]
        assert new.block.pool != start.placements[vertex].block.pool
        options = problem.directory.options[vertex][new.block.extent]
        assert new.strategy in {c.strategy for c in options}
        moved.add(vertex)
    assert moved == {0, 1}  # the rollout and the training are both drawn


def test_change_pool_proposes_the_fastest_candidate_of_the_new_shape():
    """Without pins each shape has several strategies; as for the other block moves, the
    proposals of one draw are at most ``k_x`` candidates of one block, the fastest among them."""
    problem = two_pools(min_block_gpus=1, pin=Pins((), ()))
    context = moves.MoveContext(problem.directory, problem.instance.optimizer)
    rng = random.Random(0)
    state = state_of(problem, all_on(problem, "fast"))
    several = 0
    for _ in range(50):
        found = moves.CHANGE_POOL.propose(state, context, rng)
        assert 0 < len(found) <= problem.instance.optimizer.k_x
        moved = [
            next(p for p, old in zip(plan.placements, state.plan.placements, strict=True)
                 if p != old)
            for plan in found
        ]  # fmt: skip
        assert len({p.block for p in moved}) == 1
        vertex = next(
            v for v, old in enumerate(state.plan.placements) if found[0].placements[v] != old
        )
        options = problem.directory.options[vertex][moved[0].block.extent]
        several += len(options) > 1
        assert options[0].strategy in {p.strategy for p in moved}
    assert several > 0


def test_change_pool_keeps_the_gpu_count_or_takes_the_nearest():
    """With 1-GPU blocks as well (min_block_gpus 1, no pins) a vertex keeps its GPU count
    in the other pool; with the other pool's 2-GPU block pinned away from it, the nearest
    count there (1) is taken."""
    problem = two_pools(min_block_gpus=1, pin=Pins((), ()))
    context = moves.MoveContext(problem.directory, problem.instance.optimizer)
    cluster = problem.directory.cluster
    for block in cluster.blocks:
        targets = pool_targets(context, 0, block)
        assert list(targets) == [1 - block.pool]
        assert {b.size for b in targets[1 - block.pool]} == {block.size}
        assert len(targets[1 - block.pool]) == (2 if block.size == 1 else 1)
    whole_wide = next(b for b in cluster.whole_blocks() if b.pool == 1)
    directory = problem.directory
    allowed = list(directory._allowed_sets)
    allowed[0] = frozenset(b for b in allowed[0] if b != whole_wide)
    pinned = dataclasses.replace(context, directory=_with_allowed(directory, allowed))
    targets = pool_targets(pinned, 0, cluster.whole_blocks()[0])
    assert {b.size for b in targets[1]} == {1}


def _with_allowed(directory: CandidateDirectory, allowed: list) -> CandidateDirectory:
    """A shallow copy of ``directory`` whose vertices may use the blocks ``allowed`` lists."""
    changed = copy.copy(directory)
    changed._allowed_sets = allowed
    return changed


def test_change_pool_is_left_out_on_one_pool():
    """On a one-pool cluster the move does not apply, proposes nothing, and the search
    draws from the same moves as without it (so its random draws are unchanged)."""
    problem = load_problem("tiny_grpo_2gpu.yaml")
    assert not moves.CHANGE_POOL.applicable(problem.directory)
    search = SimulatedAnnealing(problem.simulator, seed=0)
    assert moves.CHANGE_POOL not in search.single
    without = [m for m in moves.DEFAULT_MOVES if m is not moves.CHANGE_POOL]
    reference = SimulatedAnnealing(problem.simulator, seed=0, moves=without)
    assert (search.single, search.pair, search.parameter) == (
        reference.single,
        reference.pair,
        reference.parameter,
    )
    assert proposals(moves.CHANGE_POOL, problem, best_baseline(problem)) == []
    assert moves.CHANGE_POOL.applicable(two_pools().directory)


@pytest.mark.parametrize("pool", ["fast", "wide"])
def test_change_pool_alone_reaches_the_two_pool_optimum(pool):
    """From both vertices on one pool, the search with change_pool only (no polish)
    returns the hand-derived optimum, rollout on wide and training on fast."""
    base = two_pools()
    optimizer = dataclasses.replace(base.instance.optimizer, no_polish=True)
    problem = Problem.from_instance(dataclasses.replace(base.instance, optimizer=optimizer))
    start = all_on(problem, pool)
    search = SimulatedAnnealing(problem.simulator, seed=0, moves=[moves.CHANGE_POOL])
    outcome = search.run(start, StoppingCriterion(BUDGET))
    assert pools(problem, outcome.plan) == ("wide", "fast")
    assert outcome.makespan == pytest.approx(OPTIMUM, rel=REL)


def test_change_pool_delta_equals_full_resimulation():
    """The search's simulator (its lag cache warm from earlier plans, the inter-pool
    lags among them) scores every proposal as a fresh simulator does: the same lags,
    the same evaluation, the same score difference to the plan it left, and the makespan
    of a full simulation."""
    problem = two_pools(min_block_gpus=1, pin=Pins((), ()))
    context = moves.MoveContext(problem.directory, problem.instance.optimizer)
    rng = random.Random(3)
    plan = all_on(problem, "fast")
    checked = 0
    for _ in range(60):
        before = problem.simulator.evaluate(plan).score
        found = moves.CHANGE_POOL.propose(state_of(problem, plan), context, rng)
        for neighbour in found:
            evaluation = problem.simulator.evaluate(neighbour)
            fresh = Simulator(CandidateDirectory(problem.instance))
            assert problem.simulator.lags(neighbour) == fresh.lags(neighbour)
            assert evaluation == fresh.evaluate(neighbour)
            delta = fresh.evaluate(neighbour).score - fresh.evaluate(plan).score
            assert evaluation.score - before == pytest.approx(delta, rel=1e-12, abs=1e-12)
            assert evaluation.makespan == fresh.simulate(neighbour).makespan
            assert pools(problem, neighbour) != pools(problem, plan)
            checked += 1
        plan = found[-1] if found else plan
    assert checked > 50
