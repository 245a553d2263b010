"""Blocks and communication levels of the cluster (docs/plan-space.md)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.model.blocks import Cluster
from rlplan.rpeg.schema.hardware import Hardware

LEVELS = ("g", "n", "r")


def make_cluster(
    racks: int, nodes: int, gpus: int, min_block_gpus: int = 1, node_blocks: str = "any"
) -> Cluster:
    """A cluster of ``racks x nodes x gpus`` GPUs (communication numbers are irrelevant)."""
    hardware = Hardware(
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
    return Cluster(hardware, min_block_gpus, node_blocks)


def test_block_count_1x2x8():
    """1x2x8 has 31 blocks: 15 in-node per node x 2 = 30, plus the 2-node block."""
    cluster = make_cluster(1, 2, 8)
    # per node: sizes 1, 2, 4, 8 -> 8 + 4 + 2 + 1 = 15; two nodes -> 30; + (1,2,8) = 31
    assert len(cluster.blocks) == 31
    sizes = sorted(block.size for block in cluster.blocks)
    assert sizes == [1] * 16 + [2] * 8 + [4] * 4 + [8] * 2 + [16]


def test_block_count_1x1x2():
    """1x1x2 has 3 blocks: the two single GPUs and the whole node."""
    cluster = make_cluster(1, 1, 2)
    # sizes 1 (2 blocks) + 2 (1 block) = 3
    assert [(b.start, b.size) for b in cluster.blocks] == [(0, 2), (0, 1), (1, 1)]


def test_min_block_gpus_drops_small_blocks():
    """With min_block_gpus 4 on 1x2x8 only blocks of 4, 8 and 16 GPUs remain."""
    cluster = make_cluster(1, 2, 8, min_block_gpus=4)
    # per node: 2 blocks of 4 + 1 of 8 = 3; two nodes 6; + the 2-node block = 7
    assert len(cluster.blocks) == 7
    assert min(block.size for block in cluster.blocks) == 4


def named_gpus(cluster: Cluster, block) -> list[int]:
    """The flat indices of the GPUs ``block``'s origin and extent name, sorted."""
    racks, nodes, gpus = block.extent
    r0, n0, g0 = block.origin
    return sorted(
        cluster.flat_index(r0 + r, n0 + n, g0 + g)
        for r in range(racks)
        for n in range(nodes)
        for g in range(gpus)
    )


def _expected_count(racks: int, nodes: int, gpus: int) -> int:
    # per node (2G-1) power-of-two ranges; per rack (N-1) node groups of >= 2 nodes;
    # rack groups of >= 2 racks (all sizes powers of two, whole cluster included)
    return racks * nodes * (2 * gpus - 1) + racks * (nodes - 1) + (racks - 1)


@pytest.mark.parametrize("shape", [(1, 2, 8), (1, 1, 2), (1, 4, 8), (2, 4, 8), (4, 8, 8)])
def test_blocks_are_aligned_contiguous_and_laminar(shape):
    """With node_blocks aligned every block is an aligned contiguous range; any two blocks
    are nested or disjoint."""
    cluster = make_cluster(*shape, node_blocks="aligned")
    blocks = cluster.blocks
    assert len(blocks) == _expected_count(*shape)
    for block in blocks:
        # contiguous: the GPUs of origin+extent are exactly start..end-1
        assert named_gpus(cluster, block) == list(block.gpus())
        # aligned: power-of-two sizes start at a multiple of their size
        assert block.size & (block.size - 1) == 0
        assert block.start % block.size == 0
    for first, second in itertools.combinations(blocks, 2):
        assert first.contains(second) or second.contains(first) or not first.intersects(second), (
            first,
            second,
        )


@settings(max_examples=30, deadline=None, database=None)
@given(
    racks=st.sampled_from([1, 2, 4]),
    nodes=st.sampled_from([1, 2, 4]),
    gpus=st.sampled_from([1, 2, 4, 8]),
)
def test_block_properties_hold_for_random_clusters(racks, nodes, gpus):
    """Random power-of-two clusters, aligned node blocks: the count formula, alignment and
    laminarity hold."""
    cluster = make_cluster(racks, nodes, gpus, node_blocks="aligned")
    blocks = cluster.blocks
    assert len(blocks) == _expected_count(racks, nodes, gpus)
    assert len({(b.start, b.size) for b in blocks}) == len(blocks)
    for block in blocks:
        assert block.start % block.size == 0
        assert block.end <= cluster.num_gpus
    for first, second in itertools.combinations(blocks, 2):
        assert first.contains(second) or second.contains(first) or not first.intersects(second)


def test_block_levels():
    """A block's level is g inside a node, n inside a rack, r across racks."""
    cluster = make_cluster(2, 2, 4)
    levels = {(b.origin, b.extent): b.level for b in cluster.blocks}
    assert levels[((0, 1, 0), (1, 1, 4))] == "g"
    assert levels[((1, 0, 0), (1, 2, 4))] == "n"
    assert levels[((0, 0, 0), (2, 2, 4))] == "r"


def test_flat_index():
    """Flat index is (r*N + n)*G + g."""
    cluster = make_cluster(2, 4, 8)
    # (1*4 + 2)*8 + 5 = 53
    assert cluster.flat_index(1, 2, 5) == 53


def test_group_levels_tp8_dp2_on_two_nodes():
    """tp=8, dp=2 on a 2-node block: tp groups stay in a node (g), dp spans nodes (n)."""
    cluster = make_cluster(1, 2, 8)
    # ranks tp fastest: tp group {0..7} and {8..15}; dp groups {i, i+8} cross nodes
    tp, pp, dp = cluster.group_levels((1, 2, 8), 2, 1, 8)[:3]
    assert (tp, dp) == ("g", "n")
    assert pp == "g"  # pp = 1: no pipeline group


@pytest.mark.parametrize(
    ("dp", "pp", "tp", "expected"),
    [
        # tp=2: {0,1}; pp=2: {0,2}; dp=4: {0,4,8,12} spans both nodes
        (4, 2, 2, ("g", "g", "n")),
        # pp=8 over tp=2: pp group {0,2,...,14} spans nodes; dp=1 trivially g
        (1, 8, 2, ("g", "n", "g")),
        # dp=16: groups of one GPU for tp/pp; dp {0..15} spans nodes
        (16, 1, 1, ("g", "g", "n")),
    ],
)
def test_group_levels_other_layouts(dp, pp, tp, expected):
    """Group levels follow the rank order tp, then pp, then dp."""
    cluster = make_cluster(1, 2, 8)
    assert cluster.group_levels((1, 2, 8), dp, pp, tp)[:3] == expected


def test_group_levels_across_racks():
    """On a 2-rack block, dp groups that cross racks are level r."""
    cluster = make_cluster(2, 2, 8)
    # 32 GPUs, tp=8, pp=2, dp=2: dp pairs {i, i+16} sit in different racks
    assert cluster.group_levels((2, 2, 8), 2, 2, 8)[:3] == ("g", "n", "r")


def test_group_levels_inside_a_node_are_g():
    """Any strategy on an in-node block has only g-level groups."""
    cluster = make_cluster(1, 2, 8)
    assert cluster.group_levels((1, 1, 8), 2, 2, 2)[:5] == ("g",) * 5


def test_context_and_expert_groups_follow_the_rank_order():
    """Ranks run tp, cp, pp, dp; a stage's experts fold etp fastest, then ep.

    32 GPUs (4 nodes of 8), tp 2, cp 2, pp 2, dp 4. A cp group is {base + t,
    base + 2 + t}: inside a node (g). A pp group strides cp*tp = 4 ranks, so
    {0, 4} is in one node too, and dp strides pp*cp*tp = 8 ranks: level n.
    Stage 0's ranks are 0-3, 8-11, 16-19, 24-27 (flat positions 0..15); ep 4,
    etp 1 groups take 4 consecutive flat positions, 0-3 -> ranks 0-3 (g); ep 8
    takes positions 0-7 -> ranks 0-3 and 8-11, two nodes (n).
    """
    cluster = make_cluster(1, 4, 8)
    assert cluster.group_levels((1, 4, 8), 4, 2, 2, 2, 4, 1)[:5] == ("g", "g", "n", "g", "g")
    assert cluster.group_levels((1, 4, 8), 4, 2, 2, 2, 8, 1)[4] == "n"
    # etp 2 with ep 4: groups {o, 2+o, 4+o, 6+o} of flat positions -> ranks 0..11 (n)
    assert cluster.group_levels((1, 4, 8), 4, 2, 2, 2, 4, 2)[4] == "n"
    # cp 8 at tp 1 on one pipeline stage spans ranks 0..7: one node; cp 16 spans two
    assert cluster.group_levels((1, 4, 8), 2, 1, 1, 16)[3] == "n"
    assert cluster.group_levels((1, 4, 8), 4, 1, 1, 8)[3] == "g"


def test_span_level():
    """Transfers between blocks use the level spanning both."""
    cluster = make_cluster(2, 2, 8)
    index = cluster.block_index
    gpu0 = index[((0, 0, 0), (1, 1, 1))]
    gpu7 = index[((0, 0, 7), (1, 1, 1))]
    node1 = index[((0, 1, 0), (1, 1, 8))]
    rack1 = index[((1, 0, 0), (1, 2, 8))]
    assert cluster.span_level(gpu0, gpu7) == "g"
    assert cluster.span_level(gpu0, node1) == "n"
    assert cluster.span_level(gpu7, rack1) == "r"


def test_block_from_json_rejects_unaligned_block():
    """An unaligned range inside a node is not a block of the plan space."""
    cluster = make_cluster(1, 2, 8)
    assert cluster.block_from_json({"origin": [0, 1, 4], "extent": [1, 1, 4]}, "b").start == 12
    with pytest.raises(PlanError, match="not a block of the plan space"):
        cluster.block_from_json({"origin": [0, 0, 2], "extent": [1, 1, 4]}, "b")
    with pytest.raises(PlanError, match="outside the cluster"):
        cluster.block_from_json({"origin": [0, 1, 4], "extent": [1, 1, 8]}, "b")


def test_expert_group_peers_by_level():
    """``ep_peers``: a member's ep - 1 peers counted by the link that joins them.

    tp 1, pp 1 on 4 nodes of 8: ep 16 groups are 16 consecutive ranks, two whole
    nodes: 7 peers in the node, 8 in the other. The tp 2 cp 2 pp 2 dp 4 layout of
    the test above puts ep 8 on ranks 0-3 and 8-11: 3 and 4. On 2 racks of 2 nodes,
    ep 32 holds every GPU: 7 in the node, 8 in the rack's other node, 16 beyond.
    Inside a node every peer is on NVLink.
    """
    cluster = make_cluster(1, 4, 8)
    assert cluster.group_levels((1, 4, 8), 32, 1, 1, 1, 16, 1).ep_peers == (7, 8, 0)
    assert cluster.group_levels((1, 4, 8), 4, 2, 2, 2, 8, 1).ep_peers == (3, 4, 0)
    assert cluster.group_levels((1, 1, 8), 8, 1, 1, 1, 4, 1).ep_peers == (3, 0, 0)
    assert cluster.group_levels((1, 4, 8), 32, 1, 1).ep_peers == (0, 0, 0)
    racks = make_cluster(2, 2, 8)
    assert racks.group_levels((2, 2, 8), 32, 1, 1, 1, 32, 1).ep_peers == (7, 8, 16)
    # Uneven: ep 4 at etp 2 over tp 2 on 2 nodes of 2 GPUs (dp 4): flat positions
    # {0, 2, 4, 6} -> ranks 0, 2, 4, 6, one per node of 2: every peer is off-node.
    small = make_cluster(1, 4, 2)
    assert small.group_levels((1, 4, 2), 4, 1, 2, 1, 4, 2).ep_peers == (0, 3, 0)
