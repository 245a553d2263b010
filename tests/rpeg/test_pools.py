"""GPU pools in the model: geometry, each pool's costs and memory, the link between pools,
plan files and pins, and a one-pool cluster written as ``pools`` (docs/plan-space.md#pools).
"""

from __future__ import annotations

import copy
import random

import pytest

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.bounds import lower_bounds
from rlplan.rpeg.evaluation.occupancy import Occupancy
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan, plan_from_json, plan_to_json
from rlplan.rpeg.model.pools import PooledCluster
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search.sampling import random_plan
from tests.rpeg.conftest import INSTANCES
from tests.rpeg.test_pools_schema import two_pools


def problem_of(data: dict, name: str = "pools") -> Problem:
    return Problem.from_instance(parse_instance(data, name))


def plan_on(problem: Problem, pools: tuple[int, ...]) -> Plan:
    """Each vertex on the whole of pool ``pools[v]`` with its fastest candidate there."""
    directory = problem.directory
    wholes = directory.cluster.whole_blocks()
    placements = []
    for vertex, pool in enumerate(pools):
        block = wholes[pool]
        placements.append(Placement(block, directory.options[vertex][block.extent][0].strategy))
    return Plan(tuple(placements), (("actor", 0),))


# -- geometry ---------------------------------------------------------------------------


def _mixed_pools():
    """Pool 0: 2 nodes of 2 GPUs; pool 1: one node of 4."""
    data = two_pools()
    data["hardware"]["pools"][0].update(nodes_per_rack=2, gpus_per_node=2)
    data["hardware"]["pools"][1].update(nodes_per_rack=1, gpus_per_node=4)
    return parse_instance(data, "mixed").pools


def _mixed_cluster() -> PooledCluster:
    return PooledCluster(_mixed_pools())


def test_pools_lie_one_after_another_with_their_own_blocks():
    cluster = _mixed_cluster()
    first, second = cluster.pools
    assert (cluster.num_gpus, cluster.num_nodes, cluster.first_nodes) == (8, 3, (0, 2))
    assert [b.pool for b in cluster.blocks] == [0] * len(first.blocks) + [1] * len(second.blocks)
    moved = [(b.start - 4, b.size, b.origin, tuple(b.extent), b.level) for b in second.blocks]
    alone = PooledCluster(_mixed_pools()[1:]).pools[0]
    assert moved == [(b.start, b.size, b.origin, tuple(b.extent), b.level) for b in alone.blocks]
    whole_first, whole_second = cluster.whole_blocks()
    assert (whole_first.start, whole_first.size, whole_second.start) == (0, 4, 4)
    # A shape of one pool is not the same shape of the other: each has its candidates.
    assert tuple(whole_first.extent) == (1, 2, 2) and pool_of(whole_second.extent) == 1
    assert (1, 1, 2) in cluster.blocks_by_shape
    assert cluster.blocks_by_shape[(1, 1, 2)] != cluster.blocks_by_shape.get(
        second.blocks[1].extent
    )


def test_levels_and_nodes_follow_each_pool():
    cluster = _mixed_cluster()
    by_range = {(b.start, b.size): b for b in cluster.blocks}
    gpu0, gpu1, gpu2, node_b = (
        by_range[(0, 1)],
        by_range[(1, 1)],
        by_range[(2, 1)],
        by_range[(4, 4)],
    )
    assert cluster.span_level(gpu0, gpu1) == "g"
    assert cluster.span_level(gpu0, gpu2) == "n"
    assert cluster.span_level(gpu2, node_b) == "x"
    assert cluster.span_level(by_range[(4, 1)], by_range[(7, 1)]) == "g"
    assert list(cluster.nodes_of(by_range[(0, 4)])) == [0, 1]
    assert list(cluster.nodes_of(by_range[(6, 2)])) == [2]
    assert cluster.gpus_on_node(by_range[(0, 4)], 1) == 2
    assert cluster.gpus_on_node(node_b, 2) == 4 and cluster.gpus_on_node(node_b, 1) == 0
    assert [cluster.pool_of_gpu(g) for g in range(8)] == [0] * 4 + [1] * 4
    assert not cluster.xor_symmetric


# -- costs and memory per pool ---------------------------------------------------------------


def test_each_pool_prices_its_own_candidates():
    """A candidate on a pool's block is the candidate of that pool's hardware alone."""
    pooled = problem_of(two_pools())
    for index, raw in enumerate(two_pools()["hardware"]["pools"]):
        data = two_pools()
        fields = {k: v for k, v in raw.items() if k not in ("name", "price_per_gpu_hour")}
        data["hardware"] = fields
        alone = problem_of(data, "alone").directory
        block = pooled.directory.cluster.whole_blocks()[index]
        for vertex in (0, 1):
            mine = pooled.directory.options[vertex][block.extent]
            theirs = alone.options[vertex][tuple(block.extent)]
            assert [(c.strategy, c.time, c.resident, c.transient, c.host) for c in mine] == [
                (c.strategy, c.time, c.resident, c.transient, c.host) for c in theirs
            ]


def test_transfers_between_pools_cross_the_inter_pool_link():
    problem = problem_of(two_pools())
    cost, link = problem.directory.cost, problem.instance.inter_pool
    split = plan_on(problem, (1, 0))
    data_lag, refit = problem.simulator.lags(split)
    assert data_lag - 0.001 == pytest.approx(link.alpha_p2p + cost.data_bytes * link.beta_p2p)
    shard = cost.weight_shard("actor", split.placements[0].strategy)
    assert refit == pytest.approx(link.alpha_p2p + shard * link.beta_p2p, rel=1e-12)
    # On one pool: no data transfer, and the refit is the device copy of that pool.
    data_lag, refit = problem.simulator.lags(plan_on(problem, (1, 1)))
    wide = problem.directory.costs[1].colocation
    assert data_lag == 0.001 and refit == wide.refit_ipc("actor", split.placements[0].strategy)


def test_the_compute_bound_sums_every_pools_peak():
    problem = problem_of(two_pools())
    directory = problem.directory
    flops = sum(directory.cost.vertex_flops(v) for v in directory.template.vertices)
    peak = 2 * 400e12 + 2 * 100e12
    assert lower_bounds(directory).compute == pytest.approx(2 * flops / peak, rel=1e-12)


def _small_wide() -> Problem:
    """Pool wide with 2 GB GPUs and a rollout taking 0.9 of them: alone it fits, beside
    the training's 0.13 GB of states it does not (its pool's 1.9 GB), on fast both fit."""
    data = two_pools()
    data["hardware"]["pools"][1]["memory_per_gpu"] = 2e9
    data["placement"]["gpu_memory_utilization"] = [0.9]
    return problem_of(data, "small")


def test_memory_is_checked_against_each_pools_capacity():
    problem = _small_wide()
    simulator, directory = problem.simulator, problem.directory
    assert directory.capacities == (24e9 * 0.95, 2e9 * 0.95)
    crowded = simulator.simulate(plan_on(problem, (1, 1)))
    assert crowded.violation_bytes > 0 and not crowded.feasible
    assert crowded.gpu_capacity_bytes == (22.8e9, 22.8e9, 1.9e9, 1.9e9)
    assert simulator.evaluate(plan_on(problem, (1, 1))).violation == crowded.violation_bytes
    assert simulator.simulate(plan_on(problem, (0, 0))).feasible
    assert simulator.simulate(plan_on(problem, (1, 0))).feasible


def test_occupancy_reads_the_capacity_of_each_blocks_pool():
    problem = _small_wide()
    plan = plan_on(problem, (1, 1))
    candidates = problem.directory.candidates_of(plan.placements)
    occupancy = Occupancy.of(plan.placements)
    assert occupancy.pools == (1, 1)
    model_of = (0, 0)
    peak = candidates[1].resident + max(c.transient for c in candidates)
    assert occupancy.gpu_overflow(candidates, model_of, (1e18, 1.9e9)) == peak - 1.9e9
    assert occupancy.gpu_overflow(candidates, model_of, (1.9e9, 1e18)) == 0.0


def test_the_formulation_rows_hold_each_pools_capacity():
    from rlplan.formulation import rows
    from rlplan.formulation.model import build_formulation

    problem = _small_wide()
    formulation = build_formulation(problem, 1.0, prune=False)
    assert formulation.memory_capacities == (22_800_000_000, 1_900_000_000)
    assert formulation.levels == ("g", "n", "r", "x")
    by_pool = {row.unit[0] // 2: row.capacity for row in rows.memory_rows(formulation)}
    assert by_pool == {0: 22_800_000_000, 1: 1_900_000_000}


def test_host_memory_is_each_nodes_pools():
    """Pool wide's nodes hold 20 MB of host memory: an engine colocated there sleeps its
    25 MB of weights into it and overflows; on fast it fits."""
    from rlplan.formulation.model import build_formulation
    from rlplan.formulation.rows import host_memory_rows

    data = two_pools()
    data["hardware"]["pools"][1]["host_memory_per_node"] = 2e7
    problem = problem_of(data, "small host")
    simulator = problem.simulator
    assert simulator.host_capacities == (256e9, 2e7)
    crowded = simulator.simulate(plan_on(problem, (1, 1)))
    (overflow,) = crowded.host_overflows
    assert (overflow.node, overflow.capacity) == (1, 2e7) and overflow.excess > 0
    assert simulator.evaluate(plan_on(problem, (1, 1))).violation == crowded.host_violation_bytes
    assert simulator.simulate(plan_on(problem, (0, 0))).feasible
    rows = list(host_memory_rows(build_formulation(problem, 1.0, prune=False)))
    assert [(row.node, row.capacity) for row in rows] == [(1, 20_000_000)]


# -- plan files and pins -----------------------------------------------------------------------


def test_plan_files_name_each_blocks_pool_and_read_back():
    problem = problem_of(two_pools())
    plan = plan_on(problem, (1, 0))
    document = plan_to_json(plan, problem.directory)
    blocks = [document["vertices"][name]["block"] for name in ("actor.generate", "actor.train")]
    assert [block["pool"] for block in blocks] == ["wide", "fast"]
    assert plan_from_json(document, problem.directory) == plan


@pytest.mark.parametrize(
    ("block", "path", "words"),
    [
        ({"pool": "fast", "origin": [0, 0, 0], "extent": [1, 1, 4]}, ".block", "leaves pool"),
        ({"pool": "fast", "origin": [0, 0, 2], "extent": [1, 1, 2]}, ".block", "leaves pool"),
        ({"origin": [0, 0, 0], "extent": [1, 1, 2]}, ".block.pool", "missing"),
        ({"pool": "slow", "origin": [0, 0, 0], "extent": [1, 1, 2]}, ".block.pool", "'slow'"),
        ({"pool": 3, "origin": [0, 0, 0], "extent": [1, 1, 2]}, ".block.pool", "no pool"),
    ],
)
def test_a_plan_block_lies_in_one_named_pool(block, path, words):
    problem = problem_of(two_pools())
    document = plan_to_json(plan_on(problem, (1, 0)), problem.directory)
    document["vertices"]["actor.train"]["block"] = block
    with pytest.raises(PlanError) as error:
        plan_from_json(document, problem.directory)
    assert error.value.path == "plan.vertices.actor.train" + path
    assert words in error.value.message


def test_a_pool_pin_keeps_a_vertex_on_its_pool():
    data = two_pools()
    data["placement"]["pin"]["actor.train"]["block"] = {"pool": "wide"}
    problem = problem_of(data, "pinned")
    train = problem.directory.template.index("actor.train")
    assert [
        b.pool for s in problem.directory.options[train] for b in problem.directory.blocks(train, s)
    ] == [1]
    document = plan_to_json(plan_on(problem_of(two_pools()), (1, 0)), problem.directory)
    document.pop("instance")
    with pytest.raises(PlanError) as error:
        plan_from_json(document, problem.directory)
    assert (
        "pool 'fast'" in error.value.message and "placement.pin.actor.train" in error.value.message
    )


# -- one pool written as pools -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["tiny_ppo_2gpu.yaml", "tiny_grpo_4gpu.yaml", "tiny_dpo_2gpu_v2.yaml"]
)
def test_one_pool_written_as_pools_simulates_alike(name):
    """The same candidates, bounds and, for random plans, the same trace to the bit."""
    data = read_yaml_file(INSTANCES / name)
    pooled = copy.deepcopy(data)
    pooled["hardware"] = {
        "pools": [{"name": "only", "price_per_gpu_hour": 1.5, **data["hardware"]}]
    }
    plain, one = problem_of(data, "plain"), problem_of(pooled, "plain")
    assert not one.directory.cluster.pooled
    assert one.directory.cluster.blocks == plain.directory.cluster.blocks
    assert one.directory.options == plain.directory.options
    assert lower_bounds(one.directory) == lower_bounds(plain.directory)
    rng = random.Random(7)
    for seed in range(40):
        plan = random_plan(plain.directory, rng, seed % 2 == 1)
        assert one.simulator.simulate(plan).to_json() == plain.simulator.simulate(plan).to_json()
        assert one.simulator.evaluate(plan) == plain.simulator.evaluate(plan)
        written, plain_written = (plan_to_json(plan, p.directory) for p in (one, plain))
        assert written["vertices"] == plain_written["vertices"]
