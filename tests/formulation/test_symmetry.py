"""Symmetry breaking in the formulation: the mirror is a symmetry, the root starts at GPU 0."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.formulation import build_formulation
from rlplan.formulation.model import symmetry_root
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search.sampling import random_plan
from rlplan.solvers import SolveOptions, solve

# 1 rack x 2 nodes x 2 GPUs: XOR with 1 swaps the GPUs of both nodes, with 2 the nodes.
TWO_NODES = Path(__file__).resolve().parent.parent / "data" / "tiny_grpo_2x2gpu.yaml"


def _problem(small: bool = False, **placement) -> Problem:
    data = read_yaml_file(TWO_NODES)
    data.setdefault("placement", {}).update(placement)
    if small:  # small enough for the exhaustive oracle
        data["placement"].update(
            recompute=["none"], sharding=["zero1"], offload=[False], max_num_seqs=[16]
        )
        data["engine"] = {"recompute_logprobs": False}
        data["optimizer"]["staleness_candidates"] = {"actor": [0, 1]}
    return Problem.from_instance(parse_instance(data, name="two_nodes"))


def _mirrored(problem: Problem, plan: Plan, mask: int) -> Plan:
    cluster = problem.directory.cluster
    return Plan(
        tuple(Placement(cluster.mirror(p.block, mask), p.strategy) for p in plan.placements),
        plan.staleness,
        plan.order,
    )


@settings(max_examples=60, derandomize=True, deadline=None)
@given(seed=st.integers(0, 10_000), mask=st.integers(0, 3))
def test_mirrored_plans_simulate_identically(seed, mask):
    """i -> i ^ mask keeps every lag, memory peak and run time: same makespan and violation."""
    problem = _problem()
    assert problem.directory.cluster.xor_symmetric
    plan = random_plan(problem.directory, random.Random(seed))
    mirrored = _mirrored(problem, plan, mask)
    first, second = problem.simulator.evaluate(plan), problem.simulator.evaluate(mirrored)
    assert second.makespan == pytest.approx(first.makespan, rel=1e-12)
    assert second.violation == pytest.approx(first.violation, rel=1e-12, abs=1e-6)


def test_root_is_fixed_only_without_position_pins():
    """Generation (vertex 0) starts at GPU 0 unless a block pin names an origin."""
    free = _problem()
    assert symmetry_root(free.directory) == 0
    formulation = build_formulation(free, 1000.0, prune=False)
    assert {a.block.start for a in formulation.assignments[0]} == {0}
    pinned = _problem(pin={"reward.infer": {"block": {"origin": [0, 1, 0], "extent": [1, 1, 2]}}})
    assert symmetry_root(pinned.directory) is None
    formulation = build_formulation(pinned, 1000.0, prune=False)
    assert {a.block.start for a in formulation.assignments[0]} != {0}


def test_canonical_warm_start_puts_the_root_at_gpu_zero():
    """A start plan with generation on node 1 is mirrored into the restricted model."""
    problem = _problem()
    directory = problem.directory
    rng = random.Random(3)
    plan = next(
        p
        for p in (random_plan(directory, rng) for _ in range(500))
        if p.placements[0].block.start != 0
    )
    formulation = build_formulation(problem, problem.simulator.evaluate(plan).makespan)
    canonical = formulation.canonical(plan)
    assert canonical.placements[0].block.start == 0
    chosen, _, _ = formulation.warm_start(plan)
    assert formulation.assignments[0][chosen[0]].block.start == 0


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_keep_the_optimum_with_symmetry_breaking(backend):
    """On two nodes the restricted model proves the exhaustive optimum (no plan is lost)."""
    problem = _problem(small=True)
    oracle = solve("exhaustive", problem, SolveOptions(time_limit=120))
    assert oracle.status.value == "OPTIMAL"
    result = solve(backend, problem, SolveOptions(time_limit=60))
    assert result.stats["symmetry_breaking"] is True
    assert result.status.value == "OPTIMAL"
    raw = result.stats.get("cp_bound_s", result.stats.get("milp_bound_s"))
    assert raw <= oracle.makespan * (1 + 1e-9)
    assert result.makespan == pytest.approx(oracle.makespan, rel=2e-4)


# -- Runs of nodes (placement.node_blocks: any) ------------------------------------------
# 1 rack x 4 one-GPU nodes: runs such as nodes 1-2 are blocks, so XOR with node bits 1 or
# 2 maps nodes 0-2 onto {1, 0, 3} or {2, 3, 0}, no block; 0 and 3 (the reflection) remain.
RUNS = Path(__file__).resolve().parent.parent / "data" / "tiny_grpo_1x4x1_runs.yaml"


def _images(cluster, block, mask):
    """The GPUs of ``block`` XOR-ed with ``mask``, as (start, size) if contiguous, else None."""
    gpus = sorted(gpu ^ mask for gpu in block.gpus())
    return (gpus[0], len(gpus)) if gpus[-1] - gpus[0] + 1 == len(gpus) else None


@pytest.mark.parametrize("shape", [(1, 4, 1), (2, 4, 2), (1, 8, 1), (2, 2, 2)])
@pytest.mark.parametrize("node_blocks", ["any", "aligned"])
def test_symmetries_are_the_masks_mapping_every_block_onto_a_block(shape, node_blocks):
    """is_symmetry(mask) exactly when every block's image is a block of the same extent,
    and mirror gives that block; canonical_mask takes each block to its first image."""
    from tests.rpeg.test_blocks import make_cluster

    cluster = make_cluster(*shape, node_blocks=node_blocks)
    by_range = {(b.start, b.size): b for b in cluster.blocks}
    symmetric = []
    for mask in range(cluster.num_gpus):
        images = [by_range.get(_images(cluster, b, mask)) for b in cluster.blocks]
        maps = all(
            image is not None and image.extent == b.extent
            for b, image in zip(cluster.blocks, images, strict=True)
        )
        assert cluster.is_symmetry(mask) == maps, mask
        if maps:
            symmetric.append(mask)
            assert [cluster.mirror(b, mask) for b in cluster.blocks] == images
    for block in cluster.blocks:
        first = min((cluster.mirror(block, m) for m in symmetric), key=lambda b: b.start)
        assert cluster.is_symmetry(cluster.canonical_mask(block))
        assert cluster.mirror(block, cluster.canonical_mask(block)) == first
        assert cluster.is_canonical(block) == (block == first)
    every = node_blocks == "aligned" or shape[1] <= 2
    assert len(symmetric) == (cluster.num_gpus if every else cluster.num_gpus // shape[1] * 2)


def _runs_problem() -> Problem:
    return Problem.from_instance(parse_instance(read_yaml_file(RUNS), name="runs"))


def test_the_root_keeps_blocks_no_symmetry_moves_to_gpu_zero():
    """On 4 one-GPU nodes the rollout may lie on node 0 or 1 (node 2 reflects onto 1, node 3
    onto 0) and on nodes 0-1, 1-2, 0-2 or 0-3: nodes 1-2 reflect onto themselves."""
    problem = _runs_problem()
    assert symmetry_root(problem.directory) == 0
    formulation = build_formulation(problem, 1.0, prune=False)
    roots = {(a.block.origin[1], a.block.extent[1]) for a in formulation.assignments[0]}
    assert roots == {(0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (0, 4)}


@settings(max_examples=60, derandomize=True, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_canonical_plans_simulate_identically_and_satisfy_the_restriction(seed):
    """Any plan, blocks overlapping in part included, is mirrored into the restricted model
    with the same makespan and memory."""
    problem = _runs_problem()
    formulation = build_formulation(problem, 1.0, prune=False)
    allowed = {a.block for a in formulation.assignments[0]}
    plan = random_plan(problem.directory, random.Random(seed))
    canonical = formulation.canonical(plan)
    assert canonical.placements[0].block in allowed
    first, second = problem.simulator.evaluate(plan), problem.simulator.evaluate(canonical)
    assert second.makespan == pytest.approx(first.makespan, rel=1e-12)
    assert second.violation == pytest.approx(first.violation, rel=1e-12, abs=1e-6)
