"""The depth-group move (one DAG depth on another partition of the cluster) against
full simulation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import rlplan
from rlplan.rpeg.model.plan import read_plan
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search import group_moves, moves
from rlplan.rpeg.search.baselines import repair_memory
from tests.rpeg.test_moves import block, on_block, state_of

ROOT = Path(__file__).resolve().parents[2]

#: CP-SAT's proven optimum (OPTIMAL, 86.60062749 s; localbench variant ppo8b-k1) of
#: ppo_8b_1x2x8_h100 at k_eval 1: both trainers on all 16 GPUs one after the other,
#: the inference vertices two by two on the two nodes.
OPTIMUM = ROOT / "tests" / "data" / "ppo_8b_k1_optimum.plan.json"


#: CP-SAT's proven optimum (OPTIMAL, 327.85383861 s; localbench variant ppo8b-8) of
#: ppo_8b_1x2x8_h100 on one node of 8 GPUs: both trainers on the 8 GPUs, offloaded.
OPTIMUM_8 = ROOT / "tests" / "data" / "ppo_8b_8gpu_optimum.plan.json"


def _ppo(plan_file: Path, **fields):
    document = read_yaml_file(str(ROOT / "instances" / "ppo_8b_1x2x8_h100.yaml"))
    for key, value in fields.items():
        section, name = key.split("__")
        document[section][name] = value
    problem = rlplan.load(document)
    return problem, read_plan(plan_file, problem.directory)


@pytest.fixture(scope="module")
def ppo_k1():
    return _ppo(OPTIMUM, optimizer__k_eval=1)


def _on(problem, plan, name: str, start: int, size: int):
    """``plan`` with vertex ``name`` on the block (start, size), its fastest candidate there."""
    return on_block(problem, plan, name, block(problem, start, size))


def test_both_trainers_move_together_where_one_alone_is_uphill(ppo_k1):
    """From the optimum with the two trainers on the two nodes side by side (87.41 s),
    moving either trainer alone to all 16 GPUs makes it wait for the other (about 106 s:
    uphill), while the group move puts both on the 16 GPUs in one step (86.92 s, below
    the start; the rest of the way is the inference vertices' strategies). Every
    proposal's score is its full simulation."""
    problem, optimum = ppo_k1
    simulator = problem.simulator
    start = repair_memory(
        _on(problem, _on(problem, optimum, "actor.train", 0, 8), "critic.train", 8, 8), simulator
    )
    start_score = simulator.evaluate(start).score
    assert start_score > simulator.evaluate(optimum).score
    for name in ("actor.train", "critic.train"):
        alone = repair_memory(_on(problem, start, name, 0, 16), simulator)
        assert simulator.evaluate(alone).score > start_score * 1.1
    context = moves.MoveContext(problem.directory, problem.instance.optimizer, simulator)
    rng = random.Random(0)
    state = state_of(problem, start)
    found = [
        plan for _ in range(60) for plan in moves.REPARTITION_GROUP.propose(state, context, rng)
    ]
    assert found
    trainers = [problem.directory.template.index(n) for n in ("actor.train", "critic.train")]
    together = [p for p in found if all(p.placements[v].block.size == 16 for v in trainers)]
    assert together
    best = min(state_of(problem, p).score for p in together)
    assert best < start_score
    depths = problem.directory.template.depths()
    for plan in found:  # blocks change within one depth group (memory repair may
        # change other vertices' strategies, never their blocks)
        moved = [
            v
            for v, (a, b) in enumerate(zip(start.placements, plan.placements, strict=True))
            if a.block != b.block
        ]
        assert len({depths[v] for v in moved}) <= 1


def test_no_proposal_without_the_simulator(ppo_k1):
    """The move repairs memory with the context's simulator; without one it proposes
    nothing (and so never an unrepaired plan)."""
    problem, optimum = ppo_k1
    context = moves.MoveContext(problem.directory, problem.instance.optimizer)
    state = state_of(problem, optimum)
    assert group_moves.groups_repartition(problem.directory)
    assert moves.REPARTITION_GROUP.propose(state, context, random.Random(0)) == []


def test_the_trainers_fit_together_on_their_leanest_residents():
    """On 8 GPUs the optimum runs both trainers on all 8, offloaded (their states on the
    host between runs, so little resident memory). From the trainers on two halves of
    the node the group move finds that layout: the leanest start of a moved vertex is
    the candidate of least *resident* memory, which colocated vertices hold at once;
    the least peak memory alone (offload off, smaller micro-batches) does not fit the
    two trainers together, and the move then proposed nothing for this partition."""
    problem, optimum = _ppo(OPTIMUM_8, hardware__nodes_per_rack=1)
    simulator = problem.simulator
    start = _on(problem, _on(problem, optimum, "actor.train", 0, 4), "critic.train", 4, 4)
    start = repair_memory(start, simulator)
    start_score = simulator.evaluate(start).score
    trainers = [problem.directory.template.index(n) for n in ("actor.train", "critic.train")]
    option = next(
        option
        for option in group_moves._ranked(problem.directory)[-1]
        if {v: (b.start, b.size) for v, (b, _) in option[2].items()}
        == {trainers[0]: (0, 8), trainers[1]: (0, 8)}
    )
    moved = group_moves.repartition(start, option, simulator)
    assert moved is not None
    assert all(moved.placements[v].block.size == 8 for v in trainers)
    assert simulator.evaluate(moved).score < start_score
