"""The exact backends need no change for expert parallelism: ep, etp and cp are candidate
attributes, so the oracle, CP-SAT and the MILP agree on a tiny MoE instance.

The instances (tests/rpeg/moe_instances.py): a 4-expert, top-2 actor on 2 GPUs, ep in
{1, 2, 4}, etp in {1, 2}, cp in {1, 2}, and its narrow variant (15 heads: tp 1
only). The assertions are relations between backends, not seconds: the same optimum
from each backend, and a worse one when placement.expert_parallel is [1].
"""

from __future__ import annotations

import functools

import pytest

from rlplan.solvers import cpsat, exhaustive, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status
from tests.rpeg.moe_instances import tiny_moe_problem

#: Relative agreement of the backends' simulated makespans: each reports the simulation
#: of its plan, and the optimum plan is the same one.
REL = 1e-6


@functools.cache
def oracle(expert_parallel: tuple[int, ...] = (1, 2, 4), narrow: bool = False) -> Result:
    """The exhaustive oracle's result on the tiny MoE instance (or its narrow variant)."""
    problem = tiny_moe_problem(expert_parallel, narrow)
    result = exhaustive.solve(problem, SolveOptions(time_limit=120))
    assert result.status is Status.OPTIMAL, result.message
    return result


@pytest.mark.parametrize("narrow", [False, True], ids=["tiny", "narrow"])
@pytest.mark.parametrize("backend", [cpsat.solve, milp.solve], ids=["cpsat", "milp"])
def test_exact_backends_prove_the_oracle_optimum_with_experts(backend, narrow):
    """OPTIMAL, the oracle's makespan within 1e-6, and a bound no higher than it."""
    problem = tiny_moe_problem(narrow=narrow)
    result = backend(problem, SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(oracle(narrow=narrow).makespan, rel=REL)
    assert result.bound <= oracle(narrow=narrow).score * (1 + 1e-12)


def test_the_optimum_lies_in_the_directory_which_offers_expert_layouts():
    """The oracle's plan lies in the directory (ep, etp and cp among its candidates),
    which offers ep 2 and etp 2 somewhere: the exact backends see those candidates."""
    directory = tiny_moe_problem().directory
    for vertex, placement in enumerate(oracle().plan.placements):
        shape = placement.block.extent
        assert placement.strategy in {c.strategy for c in directory.options[vertex][shape]}
    kept = [c.strategy for options in directory.options for cs in options.values() for c in cs]
    assert any(s.ep == 2 for s in kept) and any(s.etp == 2 for s in kept)


def test_expert_parallelism_pays_on_the_narrow_moe():
    """The narrow actor's 15 heads admit tp 1 only, so on 2 GPUs only ep splits the
    experts. With ep free the optimum rolls out at dp 2 ep 2 (each GPU holds and reads
    2 of the 4 experts in every decode step), and is better than the optimum with
    placement.expert_parallel [1] (each GPU reads all 4)."""
    free, single = oracle(narrow=True), oracle((1,), narrow=True)
    assert free.score < single.score * (1 - 1e-3)
    generate = free.plan.placements[0].strategy
    assert (generate.dp, generate.tp, generate.ep) == (2, 1, 2)
    assert all(p.strategy.ep == 1 for p in single.plan.placements)
