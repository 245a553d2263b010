"""The block descent: every vertex's strategies on its own block, against full simulation."""

from __future__ import annotations

from rlplan.rpeg.model.plan import Placement
from rlplan.rpeg.search.block_descent import descend_on_blocks
from tests.rpeg.test_moves import optimum, state_of
from tests.solvers.conftest import load_problem


def test_block_descent_restores_every_vertex_best_strategy_on_its_block():
    """tiny_dpo_2gpu's optimum (10.9146 s) with the slowest candidate on the rollout's
    block (pp 2, 16.8 s alone) and on actor.infer's (pp 2, 11.35 s alone): the
    descent, keeping every block, returns to a plan at least as good as the optimum,
    its state the full simulation of its plan."""
    name = "tiny_dpo_2gpu.yaml"
    problem = load_problem(name)
    best = optimum(name)
    worse = best
    for vertex_name in ("actor.generate", "actor.infer"):
        vertex = problem.directory.template.index(vertex_name)
        placement = worse.placements[vertex]
        options = problem.directory.options[vertex][placement.block.extent]
        worse = worse.with_placement(vertex, Placement(placement.block, options[-1].strategy))
    start = state_of(problem, worse)
    assert start.feasible and start.objective > problem.simulator.evaluate(best).score
    found = descend_on_blocks(
        start, problem.directory, lambda plan: state_of(problem, plan), lambda: False, 1e-4
    )
    assert [p.block for p in found.plan.placements] == [p.block for p in worse.placements]
    assert found.feasible
    assert found.objective <= problem.simulator.evaluate(best).score * (1 + 1e-9)
    assert found.score == problem.simulator.evaluate(found.plan).score
