"""Each local-search move alone: a tiny state where it must fire and improve, one where it must not.

The improving states are a proven optimum (the exhaustive oracle's plan) with one
change the move under test can undo; the move, given 200 draws of a seeded generator,
must propose a plan that simulates strictly faster. The non-firing states are
plans where the move does not apply; it must propose nothing in 200 draws.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import random

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search import moves
from rlplan.rpeg.search.annealing import SimulatedAnnealing
from rlplan.rpeg.search.state import SearchState
from rlplan.rpeg.search.stopping import StoppingCriterion
from rlplan.solvers import exhaustive
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import load_problem

DRAWS = 200


@functools.cache
def optimum(name: str) -> Plan:
    """The exhaustive oracle's optimal plan of ``instances/<name>``."""
    result = exhaustive.solve(load_problem(name), SolveOptions(time_limit=60))
    assert result.status is Status.OPTIMAL
    return result.plan


def state_of(problem: Problem, plan: Plan) -> SearchState:
    return SearchState.of(plan, problem.simulator.evaluate(plan), problem.simulator.capacity)


def proposals(move, problem: Problem, plan: Plan, context=None) -> list[Plan]:
    """Every plan ``move`` proposes from ``plan`` in DRAWS seeded draws."""
    context = context or moves.MoveContext(problem.directory, problem.instance.optimizer)
    rng = random.Random(0)
    state = state_of(problem, plan)
    return [found for _ in range(DRAWS) for found in move.propose(state, context, rng)]


def block(problem: Problem, start: int, size: int):
    return next(b for b in problem.directory.cluster.blocks if (b.start, b.size) == (start, size))


def on_block(problem: Problem, plan: Plan, name: str, target, fastest: bool = True) -> Plan:
    """``plan`` with vertex ``name`` on ``target`` with its fastest (or slowest) candidate."""
    vertex = problem.directory.template.index(name)
    options = problem.directory.options[vertex][target.extent]
    candidate = options[0] if fastest else options[-1]
    return plan.with_placement(vertex, Placement(target, candidate.strategy))


def assert_improves(move, problem: Problem, worse: Plan, context=None) -> None:
    start = problem.simulator.evaluate(worse)
    assert start.feasible
    found = proposals(move, problem, worse, context)
    assert found, f"{move.name} proposed nothing"
    best = min(problem.simulator.evaluate(plan).makespan for plan in found)
    assert best < start.makespan * (1 - 1e-9)


def variant(name: str, **placement) -> Problem:
    """``instances/<name>`` with placement fields replaced."""
    instance = load_problem(name).instance
    changed = dataclasses.replace(instance.placement, **placement)
    return Problem.from_instance(dataclasses.replace(instance, placement=changed))


# -- fire and improve ------------------------------------------------------------------


def test_change_strategy_fires_and_improves():
    """tiny_dpo_2gpu's optimum with the slowest rollout strategy on both GPUs: the
    sampled candidates always include the fastest (tp 2), which is faster."""
    problem = load_problem("tiny_dpo_2gpu.yaml")
    worse = on_block(problem, optimum("tiny_dpo_2gpu.yaml"), "actor.generate",
                     block(problem, 0, 2), fastest=False)  # fmt: skip
    assert_improves(moves.CHANGE_STRATEGY, problem, worse)


def test_change_microbatches_fires_and_improves():
    """tiny_dpo_2gpu's optimum rolls out with tp 2 and max_num_seqs 32 (3.8393 s); with
    max_num_seqs 8 on the same (dp, pp, tp) it takes 13.6815 s, and the move restores 32."""
    name = "tiny_dpo_2gpu.yaml"
    problem = load_problem(name)
    best = optimum(name)
    vertex = problem.directory.template.index("actor.generate")
    current = best.placements[vertex]
    slower = dataclasses.replace(current.strategy, max_num_seqs=8)
    worse = best.with_placement(vertex, Placement(current.block, slower))
    assert_improves(moves.CHANGE_MICROBATCHES, problem, worse)


def test_move_block_fires_and_improves():
    """tiny_grpo_2gpu's optimum runs actor.infer on GPU 0 beside reference.infer on
    GPU 1; with both on GPU 1 they run in turn (20.7069 s; both on GPU 0, beside
    reward.infer, would not fit), and moving actor.infer back to GPU 0 helps."""
    problem = load_problem("tiny_grpo_2gpu.yaml")
    worse = on_block(problem, optimum("tiny_grpo_2gpu.yaml"), "actor.infer",
                     block(problem, 1, 1))  # fmt: skip
    assert_improves(moves.MOVE_BLOCK, problem, worse)


def test_resize_block_fires_and_improves():
    """tiny_dpo_2gpu's optimum rolls out with tp 2 on both GPUs; on GPU 0 alone the
    rollout is slower, and doubling its block back (fastest candidate) helps."""
    problem = load_problem("tiny_dpo_2gpu.yaml")
    worse = on_block(problem, optimum("tiny_dpo_2gpu.yaml"), "actor.generate",
                     block(problem, 0, 1))  # fmt: skip
    assert_improves(moves.RESIZE_BLOCK, problem, worse)


def test_swap_blocks_fires_and_improves():
    """tiny_grpo_2gpu's optimum with the rollout on GPU 0 and reward.infer on both GPUs
    (30.0630 s): exchanging their blocks gives the rollout both GPUs back."""
    name = "tiny_grpo_2gpu.yaml"
    problem = load_problem(name)
    worse = on_block(problem, optimum(name), "actor.generate", block(problem, 0, 1))
    worse = on_block(problem, worse, "reward.infer", block(problem, 0, 2))
    assert_improves(moves.SWAP_BLOCKS, problem, worse)


def test_colocate_fires_and_improves():
    """tiny_ppo_2gpu's optimum runs critic.infer with dp 2 on both GPUs; on GPU 0 alone
    (20.5119 s) reference.infer waits longer, and putting it back on another vertex's
    block (both GPUs) restores the optimum."""
    name = "tiny_ppo_2gpu.yaml"
    problem = load_problem(name)
    worse = on_block(problem, optimum(name), "critic.infer", block(problem, 0, 1))
    assert_improves(moves.COLOCATE, problem, worse)


def test_separate_fires_and_improves():
    """As for move_block: actor.infer and reference.infer both on GPU 1 run in turn;
    moving one to a disjoint block (GPU 0) lets them overlap."""
    problem = load_problem("tiny_grpo_2gpu.yaml")
    worse = on_block(problem, optimum("tiny_grpo_2gpu.yaml"), "actor.infer",
                     block(problem, 1, 1))  # fmt: skip
    assert_improves(moves.SEPARATE, problem, worse)


def test_change_staleness_fires_and_improves():
    """tiny_lag_grpo_2gpu_async's optimum has staleness 1 (the rollout need not wait for
    the trained weights to cross GPUs): 9.1253 s, scored x 1.05 = 9.5816 s, below the
    9.7094 s of staleness 0; at staleness 0 the move restores 1."""
    name = "tiny_lag_grpo_2gpu_async.yaml"
    problem = load_problem(name)
    best = optimum(name)
    assert best.staleness_map == {"actor": 1}
    worse = best.with_staleness("actor", 0)
    found = proposals(moves.CHANGE_STALENESS, problem, worse)
    assert {plan.staleness_map["actor"] for plan in found} == {1}
    assert_improves(moves.CHANGE_STALENESS, problem, worse)


def test_a_higher_staleness_in_the_same_run_order():
    """tiny_dpo_2gpu_v2 with the penalty off (tests/solvers/test_staleness.py): the
    on-policy optimum (13.3170 s) runs every run of step 0 before step 1's; the
    off-policy optimum (13.2541 s) is the same placement in the same order at staleness
    1, the refit no longer waited for. At staleness 1 the list order starts step 1's
    rollout early and is 5.3 % slower; the plan the polish tries beside it keeps the
    order and is the off-policy optimum. A lower staleness keeps no order."""
    from rlplan.rpeg.search.compound_moves import staleness_in_order
    from tests.solvers.test_exhaustive import written_plan
    from tests.solvers.test_staleness import OFF_POLICY, ON_POLICY, flip_problem

    problem = flip_problem(0.0)
    on_policy = written_plan("tiny_dpo_2gpu_v2.yaml").with_order(None)
    simulator = problem.simulator
    assert simulator.evaluate(on_policy).makespan == pytest.approx(ON_POLICY, rel=1e-12)
    kept = staleness_in_order(state_of(problem, on_policy), "actor", 1)
    assert simulator.evaluate(kept).makespan == pytest.approx(OFF_POLICY, rel=1e-12)
    listed = on_policy.with_staleness("actor", 1)
    assert simulator.evaluate(listed).makespan > 1.05 * OFF_POLICY
    assert staleness_in_order(state_of(problem, kept), "actor", 0) is None


def test_swap_order_fires_and_improves():
    """tiny_ppo_2gpu's optimum with reward.infer (GPU 1) run before critic.infer (both
    GPUs) in step 1: reference.infer (GPU 0) then waits for critic.infer, 20.6127 s
    instead of 20.4310 s; swapping them back restores the optimum."""
    name = "tiny_ppo_2gpu.yaml"
    problem = load_problem(name)
    # vertices: 0 actor.generate, 1 reference.infer, 2 reward.infer, 3 critic.infer,
    # 4 actor.train, 5 critic.train; pairs (vertex, step)
    order = ((0, 0), (3, 0), (1, 0), (2, 0), (4, 0), (5, 0),
             (0, 1), (2, 1), (3, 1), (1, 1), (5, 1), (4, 1))  # fmt: skip
    worse = optimum(name).with_order(order)
    assert problem.simulator.evaluate(worse).makespan > 20.5
    assert_improves(moves.SWAP_ORDER, problem, worse)


# -- must not fire ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "move",
    [moves.MOVE_BLOCK, moves.RESIZE_BLOCK, moves.SWAP_BLOCKS, moves.COLOCATE, moves.SEPARATE],
    ids=lambda move: move.name,
)
def test_structural_moves_do_not_fire_with_one_block(move):
    """With min_block_gpus 2 on 2 GPUs there is one block: every vertex is on it, so
    no block move, resize, exchange, co-location or separation applies."""
    problem = variant("tiny_dpo_2gpu.yaml", min_block_gpus=2)
    assert len(problem.directory.cluster.blocks) == 1
    plan = optimum("tiny_dpo_2gpu.yaml")  # every vertex on both GPUs
    assert proposals(move, problem, plan) == []


def test_change_strategy_does_not_fire_with_one_candidate_per_vertex():
    """When each vertex's current strategy is the only candidate on its block's shape,
    there is no other strategy to propose."""
    name = "tiny_dpo_2gpu.yaml"
    problem = load_problem(name)
    plan = optimum(name)
    directory = copy.copy(problem.directory)
    directory.options = [
        {
            shape: tuple(c for c in candidates if c.strategy == placement.strategy)
            for shape, candidates in per_shape.items()
        }
        for per_shape, placement in zip(problem.directory.options, plan.placements, strict=True)
    ]
    context = moves.MoveContext(directory, problem.instance.optimizer)
    assert proposals(moves.CHANGE_STRATEGY, problem, plan, context) == []


def test_change_microbatches_does_not_fire_with_one_setting_per_layout():
    """tiny_ppo_2gpu with rollout max_num_seqs 16 and gpu_memory_utilization 0.2 only: one
    microbatch, no recompute, ZeRO-1 and no offload leave one setting per (dp, pp, tp)."""
    problem = variant("tiny_ppo_2gpu.yaml", max_num_seqs=(16,), gpu_memory_utilization=(0.2,))
    plan = optimum("tiny_ppo_2gpu.yaml")
    assert plan.placements[0].strategy.max_num_seqs == 16
    assert proposals(moves.CHANGE_MICROBATCHES, problem, plan) == []


def test_change_staleness_does_not_fire_with_one_staleness():
    """tiny_ppo_2gpu_sync allows staleness 0 only."""
    problem = load_problem("tiny_ppo_2gpu_sync.yaml")
    assert proposals(moves.CHANGE_STALENESS, problem, optimum("tiny_ppo_2gpu_sync.yaml")) == []


def test_swap_order_does_not_fire_when_every_shared_pair_is_ordered():
    """tiny_dpo_2gpu at staleness 0 with actor.infer on GPU 0 and reference.infer on
    GPU 1: the rollout and the training use both GPUs, so every run that shares GPUs
    with an earlier one has that run (or a later one) as a direct predecessor."""
    name = "tiny_dpo_2gpu.yaml"
    problem = load_problem(name)
    plan = on_block(problem, optimum(name), "actor.infer", block(problem, 0, 1))
    plan = on_block(problem, plan, "reference.infer", block(problem, 1, 1))
    plan = plan.with_staleness("actor", 0)  # the optimum itself takes staleness 1
    assert plan.staleness_map == {"actor": 0}
    assert proposals(moves.SWAP_ORDER, problem, plan) == []


# -- the search takes its moves --------------------------------------------------------


def test_search_runs_with_one_move_alone():
    """Given only change_strategy (and no polish), the search changes strategies only."""
    name = "tiny_dpo_2gpu.yaml"
    instance = load_problem(name).instance
    optimizer = dataclasses.replace(instance.optimizer, no_polish=True)
    problem = Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))
    worse = on_block(problem, optimum(name), "actor.generate", block(problem, 0, 2), False)
    search = SimulatedAnnealing(problem.simulator, seed=0, moves=[moves.CHANGE_STRATEGY])
    outcome = search.run(worse, StoppingCriterion(200))
    assert outcome.makespan < problem.simulator.evaluate(worse).makespan
    assert [p.block for p in outcome.plan.placements] == [p.block for p in worse.placements]
    assert outcome.plan.staleness == worse.staleness


def test_search_refuses_an_empty_move_list():
    with pytest.raises(ValueError, match="at least one move"):
        SimulatedAnnealing(load_problem("tiny_dpo_2gpu.yaml").simulator, moves=[])
