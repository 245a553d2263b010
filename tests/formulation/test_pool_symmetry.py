"""Symmetry breaking on a cluster of GPU pools: XOR masks inside one pool at a time.

A mask applied to the GPU indices of one XOR-symmetric pool, the other pools left as
they are, is a symmetry of the whole problem; a mask across a pool boundary is not (it
would swap GPU types), nor is one on a pool whose shape is not XOR-symmetric.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.formulation import build_formulation
from rlplan.formulation.model import symmetry_pools, symmetry_root
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.model.pools import PooledCluster
from rlplan.rpeg.schema.hardware import LEVELS, Hardware
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.pools import Pool
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search.baselines import default_staleness
from rlplan.rpeg.search.sampling import random_plan
from rlplan.solvers import SolveOptions, solve

TWO_POOLS = Path(__file__).resolve().parent.parent / "data" / "tiny_two_pools_grpo.yaml"

# -- The instance and its optimum by hand ---------------------------------------------------
# tests/data/tiny_two_pools_grpo.yaml with pool "wide" widened to one node of 4 GPUs and
# pp pinned to 1: both vertices (dp 2, tp 1) take a block of 2 GPUs, one on "fast" (flat
# GPUs 0-1) and two on "wide" (flat 2-3 and 4-5, wide's own GPUs 0-1 and 2-3): 3 x 3 plans.
# tests/solvers/test_pools_exact.py derives the terms: G_fast 0.03225604325376 s, G_wide
# 0.00816530325504 s, T_fast 0.00179217732608 s, T_wide 0.00408881042432 s, the reward
# R 0.001 s, across pools the data edge d 5.589824e-5 s and the refit p 0.00206326592 s;
# one block shared costs the wake and sleep 0.00201326592 s per rollout and a device refit.
# Staleness 0, k_eval 2: makespan 2 (G + d + R + T) + p.
#   rollout on either wide block, training on fast (a block of another pool):
#     2 (0.00816530325504 + 5.589824e-5 + 0.001 + 0.00179217732608) + 0.00206326592
#     = 0.02409002356224 s   <- the optimum, twice (wide's mask 2 swaps its two blocks)
#   rollout and training on the two wide blocks: transfers inside wide's node (level g,
#     p_g = 8e-6 + 25_165_824 / 25e9 = 0.00101463296 s, d_g < 1e-5 s) and no wake or sleep:
#     >= 2 (0.00816530325504 + 0.001 + 0.00408881042432) + 0.00101463296 = 0.0255229... s
#   any plan with the rollout on fast: >= 2 (0.03225604325376 + 0.001) = 0.0665... s
# The per-pool masks fix the rollout to wide's GPUs 0-1 (flat 2-3) or fast; an optimum is
# kept. A mask across the boundary (flat i -> i ^ 2 maps flat 2-3 onto fast's 0-1) would
# fix the rollout to fast: the best left is 0.0665 s or more, the optimum is lost.
OPTIMUM = 0.02409002356224


def _data() -> dict:
    data = read_yaml_file(TWO_POOLS)
    data["hardware"]["pools"][1] = {**data["hardware"]["pools"][1], "gpus_per_node": 4}
    for pin in data["placement"]["pin"].values():
        pin["pp"] = 1
    return data


@functools.cache
def wide_problem() -> Problem:
    """Pool fast of 2 GPUs, pool wide of 4: the instance derived above."""
    return Problem.from_instance(parse_instance(_data(), name="wide4"))


@functools.cache
def odd_problem() -> Problem:
    """Pools fast (2 GPUs), odd (one node of 3 GPUs: not XOR-symmetric) and wide (4 GPUs)."""
    data = _data()
    fast, wide = data["hardware"]["pools"]
    odd = {**wide, "name": "odd", "gpus_per_node": 3}
    data["hardware"]["pools"] = [fast, odd, wide]
    data["placement"]["min_block_gpus"] = 1
    for pin in data["placement"]["pin"].values():
        pin.pop("dp")
    return Problem.from_instance(parse_instance(data, name="odd"))


def test_each_xor_symmetric_pool_breaks_symmetry_alone():
    """fast and wide are XOR-symmetric, odd (3 GPUs per node) is not; the rollout is the root."""
    problem = odd_problem()
    cluster = problem.directory.cluster
    assert cluster.symmetric_pools == (0, 2)
    assert symmetry_pools(problem.directory) == (0, 2)
    assert symmetry_root(problem.directory) == 0
    formulation = build_formulation(problem, 1.0, prune=False)
    assert formulation.stats["symmetry_pools"] == ["fast", "wide"]
    roots = {a.block for a in formulation.assignments[0]}
    directory = problem.directory
    every = {b for shape in directory.options[0] for b in directory.blocks(0, shape)}
    # odd keeps every block of the rollout; fast and wide keep those starting at their GPU 0.
    assert {b for b in every if b.pool == 1} <= roots
    assert {(b.pool, b.start - cluster.pools[b.pool].offset) for b in roots if b.pool != 1} == {
        (0, 0),
        (2, 0),
    }


def test_a_pinned_position_keeps_its_pool_out():
    """A block pin on wide takes wide out of the symmetry breaking; fast stays in."""
    data = _data()
    data["placement"]["pin"]["actor.train"]["block"] = {
        "pool": "wide",
        "origin": [0, 0, 2],
        "extent": [1, 1, 2],
    }
    problem = Problem.from_instance(parse_instance(data, name="pinned"))
    assert symmetry_pools(problem.directory) == (0,)
    formulation = build_formulation(problem, 1.0, prune=False)
    assert {a.block.start for a in formulation.assignments[0]} == {0, 2, 4}


@settings(max_examples=80, derandomize=True, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_canonical_plans_simulate_identically_on_three_pools(seed):
    """Any plan is mirrored inside its root's pool into the restricted model, same figures."""
    problem = odd_problem()
    formulation = build_formulation(problem, 1.0, prune=False)
    allowed = {a.block for a in formulation.assignments[0]}
    plan = random_plan(problem.directory, random.Random(seed))
    canonical = formulation.canonical(plan)
    assert canonical.placements[0].block in allowed
    root = plan.placements[0].block.pool
    for before, after in zip(plan.placements, canonical.placements, strict=True):
        assert after.block.pool == before.block.pool
        if before.block.pool != root:
            assert after.block == before.block
    first, second = problem.simulator.evaluate(plan), problem.simulator.evaluate(canonical)
    assert second.makespan == pytest.approx(first.makespan, rel=1e-12)
    assert second.violation == pytest.approx(first.violation, rel=1e-12, abs=1e-6)


@functools.cache
def _solved(backend: str):
    return solve(backend, wide_problem(), SolveOptions(time_limit=60, threads=1, seed=0))


def test_the_oracle_finds_the_hand_optimum():
    result = _solved("exhaustive")
    assert result.status.value == "OPTIMAL"
    assert result.makespan == pytest.approx(OPTIMUM, rel=1e-9)


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_keep_the_optimum_with_per_pool_symmetry_breaking(backend):
    """The rollout is restricted to fast and wide's first block, and the optimum is proven."""
    result = _solved(backend)
    assert result.stats["symmetry_breaking"] is True
    assert result.stats["symmetry_pools"] == ["fast", "wide"]
    assert result.status.value == "OPTIMAL"
    raw = result.stats.get("cp_bound_s", result.stats.get("milp_bound_s"))
    assert raw <= OPTIMUM * (1 + 1e-9)
    assert result.makespan == pytest.approx(OPTIMUM, rel=2e-4)
    generate, train = result.plan.placements
    assert (generate.block.pool, generate.block.start) == (1, 2)
    assert train.block.pool == 0


def test_the_restricted_root_keeps_an_optimal_plan():
    """Every plan with the rollout on a block the model keeps, simulated: the best is the
    optimum (a mask across the pool boundary would leave only fast, 0.0665 s or more)."""
    problem = wide_problem()
    directory = problem.directory
    formulation = build_formulation(problem, 1.0, prune=False)
    staleness = default_staleness(directory)
    best = min(
        problem.simulator.evaluate(
            Plan((Placement(root.block, root.candidate.strategy), train), staleness)
        ).makespan
        for root in formulation.assignments[0]
        for train in (
            Placement(block, candidate.strategy)
            for shape, candidates in directory.options[1].items()
            for block in directory.blocks(1, shape)
            for candidate in candidates
        )
    )
    assert best == pytest.approx(OPTIMUM, rel=1e-9)


def _hardware(racks: int, nodes: int, gpus: int) -> Hardware:
    """A pool of ``racks x nodes x gpus`` GPUs (communication numbers are irrelevant)."""
    return Hardware(
        racks=racks,
        nodes_per_rack=nodes,
        gpus_per_node=gpus,
        flops_per_gpu=1e12,
        memory_per_gpu=80e9,
        memory_bandwidth=1e9,
        alpha_coll=dict.fromkeys(LEVELS, 0.0),
        beta_coll=dict.fromkeys(LEVELS, 1e-9),
        alpha_p2p=dict.fromkeys(LEVELS, 0.0),
        beta_p2p=dict.fromkeys(LEVELS, 1e-9),
    )


@pytest.mark.parametrize("node_blocks", ["any", "aligned"])
def test_pool_masks_map_blocks_onto_blocks_after_another_pool(node_blocks):
    """Pool 1 (1 x 4 x 2, after a pool of 3 GPUs) keeps the one-pool rule on its own indices:
    a mask is kept when it maps every block of the pool onto a block of the same extent, and
    mirror gives that block; the blocks of pool 0 are their own images."""
    pools = (Pool("three", _hardware(1, 1, 3)), Pool("runs", _hardware(1, 4, 2)))
    cluster = PooledCluster(pools, node_blocks=node_blocks)
    assert cluster.symmetric_pools == (1,)
    geometry = cluster.pools[1]
    offset = geometry.offset
    assert offset == 3
    by_range = {(b.start, b.size): b for b in cluster.blocks}
    kept = 0
    for mask in range(geometry.num_gpus):
        images = []
        for block in geometry.blocks:
            gpus = sorted(offset + ((gpu - offset) ^ mask) for gpu in block.gpus())
            contiguous = gpus[-1] - gpus[0] + 1 == len(gpus)
            images.append(by_range.get((gpus[0], len(gpus))) if contiguous else None)
        maps = all(
            image is not None and image.extent == block.extent
            for block, image in zip(geometry.blocks, images, strict=True)
        )
        assert geometry.is_symmetry(mask) == maps, mask
        if maps:
            kept += 1
            assert [cluster.mirror(b, mask, 1) for b in geometry.blocks] == images
            assert all(cluster.mirror(b, mask, 1) == b for b in cluster.pools[0].blocks)
    assert kept == (8 if node_blocks == "aligned" else 4)


def test_a_root_pinned_to_an_asymmetric_pool_breaks_no_symmetry():
    """With the rollout pinned to odd (3 GPUs per node), the masks of fast and wide move
    none of its blocks: no symmetry breaking is reported."""
    data = _data()
    fast, wide = data["hardware"]["pools"]
    data["hardware"]["pools"] = [fast, {**wide, "name": "odd", "gpus_per_node": 3}, wide]
    data["placement"]["min_block_gpus"] = 1
    for pin in data["placement"]["pin"].values():
        pin.pop("dp")
    data["placement"]["pin"]["actor.generate"]["block"] = {"pool": "odd"}
    problem = Problem.from_instance(parse_instance(data, name="odd_root"))
    assert symmetry_pools(problem.directory) == (0, 2)
    assert symmetry_root(problem.directory) is None
    formulation = build_formulation(problem, 1.0, prune=False)
    assert formulation.stats["symmetry_breaking"] is False
    assert formulation.stats["symmetry_pools"] == []
