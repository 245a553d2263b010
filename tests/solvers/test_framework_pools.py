"""Framework plan spaces on two GPU pools: feasible, and NeMo RL's one node width holds.

The instance (tests/data/tiny_two_pools_widths_grpo.yaml) is the two-pool
instance of tests/solvers/test_pools_exact.py with pool ``wide`` one node of
4 GPUs: ``fast`` is 1 x 1 x 2, ``wide`` 1 x 1 x 4, so ``wide`` holds two
disjoint 2-GPU blocks on one node. verl gives each resource pool its own
node shape and runs the full-space optimum (rollout on ``wide``, training on
``fast``); NeMo RL's one ``cluster.gpus_per_node`` (rule ``one-node-width``)
keeps the rollout and the training on pools of one width, and its optimum
splits ``wide``. The optima are derived below; the oracle, CP-SAT and the
MILP must each find them.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.frameworks import FRAMEWORKS, plan_problems
from rlplan.rpeg.model.frameworks.rules import Framework, WholeCluster, pool_sizes
from rlplan.solvers import cpsat, exhaustive, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

WIDTHS = Path(__file__).resolve().parent.parent / "data" / "tiny_two_pools_widths_grpo.yaml"

# -- The optima by hand -------------------------------------------------------------------
# The terms of tests/solvers/test_pools_exact.py (same model, workload and pool figures):
#   G_wide = 0.00816530325504 s, G_fast = 0.03225604325376 s (the rollout, dp 2, tp 1)
#   T_fast = 0.00179217732608 s, T_wide = 0.00408881042432 s (training, its dp all-reduce
#     inside one node: 2 x 1e-5 + 25_165_824 / 25e9 on either pool), R = 0.001 s
#   across pools: data edge d_x = 5.589824e-5 s, refit p_x = 0.00206326592 s
# Two blocks of one node ("wide"'s halves): the data edge at the node's p2p rates,
#   d_g = 8e-6 + 73_728 / 25e9 = 1.094912e-5 s, the refit p_g = 8e-6 + 25_165_824 / 25e9
#   = 0.00101463296 s; no wake or sleep (the rollout keeps its own GPUs).
# Colocated plans (one block for both) need actor.train offloaded under NeMo RL
# (train-offload-beside-rollout) and the instance lists offload false only: NeMo RL has
# none. Makespan, staleness 0, k_eval 2: 2 (G + d + R + T) + p.
#   full space and verl: rollout wide, training fast
#     2 (0.00816530325504 + 5.589824e-5 + 0.001 + 0.00179217732608) + 0.00206326592
#     = 0.02409002356224 s (test_pools_exact.py's optimum; wide's node width plays no part)
#   NeMo RL: a pool of one width for both; only "wide" has two disjoint blocks:
#     2 (0.00816530325504 + 1.094912e-5 + 0.001 + 0.00408881042432) + 0.00101463296
#     = 0.02754475855872 s
#   (the cross-pool plans, 0.02409002356224 s and 0.07686476975616 s, break one-node-width)
FULL_OPTIMUM = 0.02409002356224
NEMO_OPTIMUM = 0.02754475855872
HAND = 1e-9

SOLVERS = {"exhaustive": exhaustive.solve, "cpsat": cpsat.solve, "milp": milp.solve}


@functools.cache
def problem(framework: str | None) -> Problem:
    """The instance, narrowed to ``framework``'s plan space (None: the full space)."""
    full = Problem.load(str(WIDTHS))
    return full if framework is None else full.with_framework(framework)


@functools.cache
def solved(framework: str | None, backend: str) -> Result:
    """``backend``'s OPTIMAL result on ``framework``'s plan space."""
    result = SOLVERS[backend](problem(framework), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    return result


def pools_of(framework: str | None, result: Result) -> tuple[str, str]:
    """The pools of the rollout and of the training in ``result``'s plan."""
    cluster = problem(framework).directory.cluster
    generate, train = result.plan.placements
    return cluster.pool_name(generate.block), cluster.pool_name(train.block)


@pytest.mark.parametrize("backend", sorted(SOLVERS))
def test_nemo_rl_keeps_one_node_width_on_two_pools(backend):
    """NeMo RL's optimum: rollout and training on the two halves of "wide"."""
    result = solved("nemo-rl", backend)
    assert pools_of("nemo-rl", result) == ("wide", "wide")
    generate, train = result.plan.placements
    assert not generate.block.intersects(train.block)
    assert result.makespan == pytest.approx(NEMO_OPTIMUM, rel=HAND)
    space = problem("nemo-rl")
    sizes = pool_sizes(space.directory.cluster)
    assert plan_problems(FRAMEWORKS["nemo-rl"], space.directory.template, result.plan, sizes) == []


@pytest.mark.parametrize("backend", sorted(SOLVERS))
def test_verl_runs_the_full_space_optimum_on_two_pools(backend):
    """verl's resource pools take any node shape: its optimum is the full space's."""
    result = solved("verl", backend)
    assert pools_of("verl", result) == ("wide", "fast")
    assert result.makespan == pytest.approx(FULL_OPTIMUM, rel=HAND)
    assert solved(None, "exhaustive").makespan == pytest.approx(FULL_OPTIMUM, rel=HAND)


def test_the_full_space_plan_breaks_one_node_width():
    """The rule's line names the two widths; the plan breaks no other NeMo RL rule."""
    full = solved(None, "exhaustive")
    space = problem("nemo-rl")
    sizes = pool_sizes(space.directory.cluster)
    lines = plan_problems(FRAMEWORKS["nemo-rl"], space.directory.template, full.plan, sizes)
    assert len(lines) == 1
    assert lines[0].startswith(
        "actor.train on 2 GPUs per node and actor.generate on 4: NeMo RL rule one-node-width:"
    )


def test_whole_cluster_means_a_whole_pool():
    """A WholeCluster rule keeps exactly each pool's block of all its GPUs (no block spans both)."""
    rule = WholeCluster(name="whole", words="w", need="n", source="s", vertices=("actor.train",))
    framework = Framework(name="x", display="X", release="0", rules=(rule,))
    cluster = problem(None).directory.cluster
    sizes = pool_sizes(cluster)
    kept = [b for b in cluster.blocks if framework.block_problem("actor.train", b, sizes) is None]
    # "fast": its one 2-GPU block; "wide": its 4-GPU block, not its two halves.
    assert [(cluster.pool_name(b), b.size) for b in kept] == [("fast", 2), ("wide", 4)]
    assert tuple(kept) == cluster.whole_blocks()
    assert all(framework.block_problem("actor.generate", b, sizes) is None for b in cluster.blocks)
