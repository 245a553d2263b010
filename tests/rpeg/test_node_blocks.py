"""Runs of whole nodes as blocks: ``placement.node_blocks`` (docs/plan-space.md#devices-and-blocks).

Counts are hand-computed: a node of G GPUs (G a power of two) has 2G - 1 in-node blocks
(G + G/2 + ... + 1, the whole node included); a rack of N nodes has N(N-1)/2 runs of two
or more nodes (N - k + 1 runs of k nodes, k = 2..N), and N - 1 aligned groups of two or
more nodes when N is a power of two (N/2 + N/4 + ... + 1).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from rlplan.rpeg.errors import InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.geometry import effective_node_blocks, node_runs, plan_space_blocks
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search.moves import MoveContext, move_block, resize_block
from rlplan.rpeg.search.state import SearchState
from tests.rpeg.test_blocks import make_cluster, named_gpus

RUNS = Path(__file__).resolve().parents[1] / "data" / "tiny_grpo_1x4x1_runs.yaml"


def _node_blocks(cluster) -> set[tuple[int, int]]:
    """(first node, node count) of the blocks of two or more whole nodes inside a rack."""
    return {(b.origin[1], b.extent[1]) for b in cluster.blocks if b.level == "n"}


@pytest.mark.parametrize(
    ("nodes", "aligned", "runs"),
    [(1, 0, 0), (2, 1, 1), (3, 2, 3), (4, 3, 6), (8, 7, 28), (16, 15, 120), (32, 31, 496)],
)
def test_node_block_counts_per_rack(nodes, aligned, runs):
    """Blocks of two or more nodes in one rack: N - 1 aligned (3 nodes: 0-1 and the rack),
    N(N-1)/2 runs; with 8-GPU nodes 15 in-node blocks per node come on top."""
    for node_blocks, count in (("aligned", aligned), ("any", runs)):
        cluster = make_cluster(1, nodes, 8, node_blocks=node_blocks)
        assert len(_node_blocks(cluster)) == count
        assert len(cluster.blocks) == 15 * nodes + count


def test_a_four_node_rack_gains_three_blocks():
    """Nodes 0-2, 1-3 and 1-2; one- and two-node racks gain none."""
    aligned = make_cluster(1, 4, 8, node_blocks="aligned")
    runs = make_cluster(1, 4, 8)
    assert _node_blocks(runs) - _node_blocks(aligned) == {(0, 3), (1, 3), (1, 2)}
    assert _node_blocks(aligned) <= _node_blocks(runs)
    for nodes in (1, 2):
        assert (
            make_cluster(2, nodes, 4).blocks
            == make_cluster(2, nodes, 4, node_blocks="aligned").blocks
        )


@pytest.mark.parametrize(
    ("shape", "min_block_gpus", "aligned", "runs"),
    [
        # per node 2G-1 = 3 blocks x 3 nodes = 9; runs 0-1, 1-2, 0-2 (aligned: 0-1, 0-2)
        ((1, 3, 2), 1, 11, 12),
        # G = 1: 4 nodes per rack x 2 = 8; 6 runs per rack (aligned 3); the 2-rack cluster
        ((2, 4, 1), 1, 15, 21),
        # at least 16 GPUs: runs of 2, 3, 4 nodes of 8 GPUs: 3 + 2 + 1 (aligned 2 + 1)
        ((1, 4, 8), 16, 3, 6),
    ],
)
def test_block_counts_of_small_clusters(shape, min_block_gpus, aligned, runs):
    """Hand counts with a three-node rack, with racks of one-GPU nodes, with min_block_gpus."""
    for node_blocks, count in (("aligned", aligned), ("any", runs)):
        assert len(make_cluster(*shape, min_block_gpus, node_blocks).blocks) == count


@pytest.mark.parametrize("shape", [(1, 3, 2), (2, 4, 2), (1, 5, 1), (3, 3, 4)])
def test_runs_are_contiguous_whole_nodes_inside_one_rack(shape):
    """Every block is the contiguous range its origin and extent name; a run of nodes takes
    whole nodes of one rack; some pairs overlap in part (neither holds the other)."""
    cluster = make_cluster(*shape)
    for block in cluster.blocks:
        racks, nodes, gpus = block.extent
        _, n0, g0 = block.origin
        assert named_gpus(cluster, block) == list(block.gpus())
        if block.level == "n":
            assert racks == 1 and gpus == cluster.gpus_per_node and g0 == 0
            assert n0 + nodes <= cluster.nodes_per_rack
    partial = [
        (a, b)
        for a, b in itertools.combinations(cluster.blocks, 2)
        if a.intersects(b) and not (a.contains(b) or b.contains(a))
    ]
    assert partial and all(a.level == b.level == "n" for a, b in partial)


def test_node_runs_lists_both_kinds():
    """node_runs gives (first, count): every run, or the aligned groups and the rack."""
    assert node_runs(3, "any") == ((0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (0, 3))
    assert node_runs(3, "aligned") == ((0, 1), (1, 1), (2, 1), (0, 2), (0, 3))
    assert plan_space_blocks(1, 3, 1, 1, "any") != plan_space_blocks(1, 3, 1, 1, "aligned")


def test_group_levels_do_not_depend_on_where_a_run_starts():
    """The levels of every strategy's groups, walked at the block's own GPUs, equal
    group_levels (computed as if the block started at GPU 0), for every block of 2x4x2."""
    cluster = make_cluster(2, 4, 2)

    def walked(block, dp, pp, tp):
        def level(ranks):
            low, high = block.start + min(ranks), block.start + max(ranks)
            return cluster.range_level(low, high)

        order = {"g": 0, "n": 1, "r": 2}
        groups = {
            "tp": [
                [(d * pp + p) * tp + t for t in range(tp)] for d in range(dp) for p in range(pp)
            ],
            "pp": [
                [(d * pp + p) * tp + t for p in range(pp)] for d in range(dp) for t in range(tp)
            ],
            "dp": [
                [(d * pp + p) * tp + t for d in range(dp)] for p in range(pp) for t in range(tp)
            ],
        }
        return tuple(max((level(g) for g in groups[k]), key=order.get) for k in ("tp", "pp", "dp"))

    checked = 0
    for block in cluster.blocks:
        size = block.size
        for tp in (1, 2):
            for pp in range(1, size + 1):
                if block.width % tp or size % (tp * pp):
                    continue
                dp = size // (tp * pp)
                assert cluster.group_levels(block.extent, dp, pp, tp)[:3] == walked(
                    block, dp, pp, tp
                ), (block, dp, pp, tp)
                checked += 1
    assert checked > 100


def test_block_from_json_takes_a_run_only_when_the_plan_space_has_it():
    """Nodes 1-3 of 4 are a block with node_blocks any, and refused with aligned in one
    line that says which node groups are blocks."""
    data = {"origin": [0, 1, 0], "extent": [1, 3, 8]}
    assert make_cluster(1, 4, 8).block_from_json(data, "b").start == 8
    with pytest.raises(PlanError, match="aligned power-of-two groups of nodes in a rack"):
        make_cluster(1, 4, 8, node_blocks="aligned").block_from_json(data, "b")


def _document(**placement) -> dict:
    data = read_yaml_file(RUNS)
    data["placement"].update(placement)
    return data


@pytest.mark.parametrize("value", ["dyadic", 1, True, ["any"]])
def test_a_bad_node_blocks_is_one_line_naming_the_field(value):
    expected = r"^placement\.node_blocks: must be auto or any or aligned"
    with pytest.raises(InstanceError, match=expected):
        parse_instance(_document(node_blocks=value), name="bad")


def test_a_bad_node_blocks_exits_2_with_one_line(cli, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(RUNS.read_text().replace("node_blocks: any", "node_blocks: dyadic"))
    code, out, err = cli("check", path)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: placement.node_blocks: must be auto or any or aligned, got 'dyadic'"
    ]


def test_the_default_is_auto_and_keeps_the_fingerprint():
    """Without the key the plan space is ``auto`` (runs of nodes on this 4-node rack) with
    the fingerprint of a plan file written before the key existed; aligned is another
    plan space, another fingerprint."""
    data = _document()
    del data["placement"]["node_blocks"]
    default = parse_instance(data, name="x")
    assert default.placement.node_blocks == "auto"
    same = parse_instance(_document(node_blocks="auto"), name="x")
    aligned = parse_instance(_document(node_blocks="aligned"), name="x")
    assert instance_fingerprint(default) == instance_fingerprint(same)
    assert instance_fingerprint(aligned) != instance_fingerprint(default)
    runs = Problem.from_instance(parse_instance(_document(node_blocks="any"), name="x"))
    assert len(Problem.from_instance(default).directory.cluster.blocks) == len(
        runs.directory.cluster.blocks
    )


@pytest.mark.parametrize(
    ("nodes", "effective"), [(1, "any"), (4, "any"), (8, "any"), (9, "aligned"), (32, "aligned")]
)
def test_auto_takes_every_run_up_to_eight_nodes_per_rack(nodes, effective):
    # auto = any up to AUTO_ANY_NODES = 8 nodes per rack: 8 nodes have 8*9/2 = 36 runs,
    # 16 nodes would have 136 where aligned has 16 + 8 + 4 + 2 + 1 = 31.
    assert effective_node_blocks("auto", nodes) == effective
    assert effective_node_blocks("aligned", 4) == "aligned"
    assert effective_node_blocks("any", 32) == "any"
    assert node_runs(nodes, "auto") == node_runs(nodes, effective)
    assert len(node_runs(8, "auto")) == 36 and len(node_runs(16, "auto")) == 31


def test_a_pin_may_name_a_run_of_nodes():
    """A block pin on nodes 1-3 is accepted with any and refused with aligned."""
    pin = {"actor.train": {"block": {"origin": [0, 1, 0], "extent": [1, 3, 1]}}}
    problem = Problem.from_instance(parse_instance(_document(pin=pin), name="pinned"))
    assert {b.origin for b in problem.directory.blocks(1, (1, 3, 1))} == {(0, 1, 0)}
    with pytest.raises(InstanceError, match="aligned power-of-two groups of nodes"):
        parse_instance(_document(pin=pin, node_blocks="aligned"), name="pinned")


def test_resize_and_move_reach_runs_of_nodes():
    """resize_block grows nodes 1-2 to nodes 0-2 or 1-3 and shrinks nodes 0-2 to 0-1 or 1-2;
    move_block moves a three-node block between nodes 0-2 and 1-3 (200 seeded draws)."""
    problem = Problem.from_instance(parse_instance(_document(), name="runs"))
    directory, simulator = problem.directory, problem.simulator
    context = MoveContext(directory, problem.instance.optimizer)
    index = directory.cluster.block_index
    rollout = Placement(index[((0, 0, 0), (1, 1, 1))], directory.options[0][(1, 1, 1)][0].strategy)

    def reached(move, origin, extent) -> set[tuple[int, int]]:
        train = Placement(index[(origin, extent)], directory.options[1][extent][0].strategy)
        plan = Plan((rollout, train), (("actor", 1),))
        state = SearchState.of(plan, simulator.evaluate(plan), simulator.capacity)
        rng = random.Random(0)
        found = set()
        for _ in range(200):
            for proposed in move(state, context, rng):
                block = proposed.placements[1].block
                if block != train.block:
                    found.add((block.origin[1], block.extent[1]))
        return found

    assert reached(resize_block, (0, 1, 0), (1, 2, 1)) == {(0, 3), (1, 3), (1, 1), (2, 1)}
    assert reached(resize_block, (0, 0, 0), (1, 3, 1)) == {(0, 2), (1, 2), (0, 4)}
    assert reached(move_block, (0, 0, 0), (1, 3, 1)) == {(1, 3)}


def _slime_problem() -> Problem:
    data = _document()
    data["engine"]["framework"] = "slime"
    return Problem.from_instance(parse_instance(data, name="runs-slime"))


def _two_blocks(problem: Problem, rollout: tuple, train: tuple) -> Plan:
    directory = problem.directory
    index = directory.cluster.block_index
    placements = tuple(
        Placement(index[(origin, extent)], directory.options[v][extent][0].strategy)
        for v, (origin, extent) in enumerate((rollout, train))
    )
    return Plan(placements, (("actor", 0),))


def test_slime_refuses_a_rollout_sharing_part_of_the_actors_gpus():
    """slime's placement group nests the rollout's GPUs in the actor's or keeps them apart:
    nodes 0-2 against 1-3 break rollout-nested-or-apart, node 1 inside 0-2 does not."""
    from rlplan.rpeg.model.frameworks.conform import framework_problems

    problem = _slime_problem()
    partial = _two_blocks(problem, ((0, 0, 0), (1, 3, 1)), ((0, 1, 0), (1, 3, 1)))
    nested = _two_blocks(problem, ((0, 1, 0), (1, 1, 1)), ((0, 0, 0), (1, 3, 1)))
    assert any(
        "rollout-nested-or-apart" in line for line in framework_problems(problem.directory, partial)
    )
    assert framework_problems(problem.directory, nested) == []


def test_slime_rows_exclude_exactly_the_blocks_overlapping_in_part():
    """Per rollout block, one exclusion row naming the training blocks that overlap it in
    part. The rollout (the symmetry root) keeps nodes 0, 1, 0-1, 1-2, 0-2 and 0-3: against
    nodes 0-1 the rows name 1-2 and 1-3, against 1-2 they name 0-1 and 2-3 (nodes 0-2 and
    1-3 hold it), against 0-2 they name 1-3 and 2-3; single nodes and the rack get none."""
    from rlplan.formulation import build_formulation
    from rlplan.formulation.framework import ExclusionRow, framework_rows

    formulation = build_formulation(_slime_problem(), 1.0, prune=False)

    def runs(blocks):
        return {(formulation.blocks[b].origin[1], formulation.blocks[b].extent[1]) for b in blocks}

    crossing = {}
    for row in framework_rows(formulation):
        if not isinstance(row, ExclusionRow) or len(row.conditions) != 2:
            continue
        first, second = row.conditions
        if (first.vertex, second.vertex) == (0, 1) and hasattr(first, "blocks"):
            (block,) = runs(first.blocks)
            crossing[block] = runs(second.blocks)
    assert crossing == {
        (0, 2): {(1, 2), (1, 3)},
        (1, 2): {(0, 2), (2, 2)},
        (0, 3): {(1, 3), (2, 2)},
    }
