"""Sliced blocks (``placement.sliced_blocks``): which exist, their GPUs, levels and symmetries,
how memory and occupancy treat them beside contiguous blocks, and how input is checked.

The tiny instance is tests/data/tiny_grpo_1x2x4_sliced.yaml (one rack of two 4-GPU nodes;
its optima are derived in tests/solvers/test_sliced_exact.py).
"""

from __future__ import annotations

import copy
import functools
import itertools
from pathlib import Path

import pytest

from rlplan.outputs.gantt import _spans
from rlplan.outputs.perfetto import gpu_span
from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.evaluation.occupancy import Occupancy
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.trace import Event
from rlplan.rpeg.model.blocks import Cluster
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.schema.fingerprint import _placement, instance_fingerprint
from rlplan.rpeg.schema.geometry import plan_space_blocks, slice_ranges
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file

INSTANCE = Path(__file__).resolve().parents[1] / "data" / "tiny_grpo_1x2x4_sliced.yaml"


def document(**placement) -> dict:
    """The tiny instance's document with placement keys changed."""
    data = copy.deepcopy(read_yaml_file(INSTANCE))
    data["placement"].update(placement)
    return data


@functools.cache
def problem(utilization: float = 0.5) -> Problem:
    """The tiny instance, its rollout at ``gpu_memory_utilization``."""
    data = document(gpu_memory_utilization=[utilization])
    return Problem.from_instance(parse_instance(data, name="sliced"))


def cluster(nodes: int = 2, gpus: int = 4, sliced: bool = True) -> Cluster:
    """A one-rack cluster of ``nodes`` x ``gpus`` (communication numbers are irrelevant)."""
    levels = ("g", "n", "r")
    hardware = Hardware(
        racks=1,
        nodes_per_rack=nodes,
        gpus_per_node=gpus,
        flops_per_gpu=1e12,
        memory_per_gpu=80e9,
        memory_bandwidth=1e9,
        alpha_coll=dict.fromkeys(levels, 0.0),
        beta_coll=dict.fromkeys(levels, 1e-9),
        alpha_p2p=dict.fromkeys(levels, 0.0),
        beta_p2p=dict.fromkeys(levels, 1e-9),
    )
    return Cluster(hardware, 1, "auto", sliced)


def test_in_node_ranges_give_the_splits_of_a_node():
    """Aligned ranges and the rest of a node after an aligned prefix or before a suffix:
    2 + 6, 4 + 4 and 1 + 7 splits exist; 3 + 5 does not (GPUs 0-2 are no such range)."""
    ranges = set(slice_ranges(8))
    for first, second in (((0, 2), (2, 6)), ((0, 4), (4, 4)), ((0, 1), (1, 7)), ((6, 2), (0, 6))):
        assert first in ranges and second in ranges
    assert (0, 3) not in ranges and (3, 5) not in ranges
    assert len(ranges) == 18


@pytest.mark.parametrize(("nodes", "added"), [(1, 0), (2, 18), (4, 54), (8, 126)])
def test_blocks_added_per_rack(nodes, added):
    """18 in-node ranges on each aligned group of 2+ nodes: 1, 3 and 7 groups."""
    for node_blocks in ("any", "aligned"):
        plain = plan_space_blocks(1, nodes, 8, 1, node_blocks)
        sliced = plan_space_blocks(1, nodes, 8, 1, node_blocks, True)
        assert len(sliced) - len(plain) == added
        assert set(plain) <= set(sliced)
    assert ((1, 0, 7), (1, 2, 1)) in plan_space_blocks(2, 2, 8, 1, "any", True)


def test_a_sliced_block_takes_one_range_on_each_node():
    """GPUs, pieces, hull end, label, containment and intersection by true GPU sets."""
    geometry = cluster()
    block = geometry.block_index[((0, 0, 1), (1, 2, 3))]
    assert block.sliced and block.level == "n" and block.size == 6
    assert tuple(block.gpus()) == (1, 2, 3, 5, 6, 7)
    assert block.pieces() == ((1, 4), (5, 8))
    assert block.end == 8 and block.label() == "gpus 1-3,5-7"
    pair = geometry.block_index[((0, 0, 0), (1, 2, 1))]
    assert pair.label() == "gpus 0,4" and not pair.intersects(block)
    contiguous = {b.label(): b for b in geometry.blocks if not b.sliced}
    # GPUs 1-3 lie in the hull of GPUs {0, 4} but are none of its GPUs.
    assert not pair.intersects(contiguous["gpus 2-3"]) and not pair.intersects(contiguous["gpu 1"])
    assert pair.intersects(contiguous["gpus 4-7"]) and block.intersects(contiguous["gpus 4-7"])
    assert block.contains(contiguous["gpus 2-3"]) and not block.contains(contiguous["gpus 4-7"])
    assert contiguous["gpus 0-7"].contains(block) and not contiguous["gpus 0-3"].contains(block)
    problem_cluster = problem().directory.cluster
    assert problem_cluster.gpus_on_node(block, 0) == problem_cluster.gpus_on_node(block, 1) == 3
    assert problem_cluster.node_ranges(block) == ((0, 1, 4), (1, 5, 8))


def test_group_levels_follow_the_ranks_node_by_node():
    """GPUs 2-7 of two 8-GPU nodes at tp 2, pp 2, dp 3 (the 2 + 6 recipe's training): the
    ranks 0-5 are node 0's, 6-11 node 1's; tp pairs stay in a node, the pp pair (4, 6) and
    the dp groups (0, 4, 8) cross nodes. GPUs 0-1 at tp 2, dp 2 keep tp in each node."""
    geometry = cluster(2, 8)
    levels = geometry.group_levels((1, 2, 6), dp=3, pp=2, tp=2)
    assert (levels.tp, levels.pp, levels.dp) == ("g", "n", "n")
    levels = geometry.group_levels((1, 2, 2), dp=2, pp=1, tp=2)
    assert (levels.tp, levels.dp) == ("g", "n")
    # Contiguous, 4 GPUs in one node: all in-node (the sliced shape of as many GPUs is not).
    assert geometry.group_levels((1, 1, 4), dp=2, pp=1, tp=2).dp == "g"


def test_symmetries_map_every_block_onto_a_block():
    """Exactly the masks that map every block's GPU set onto a block of the same extent
    are symmetries; with 4-GPU nodes the GPU bits are 0 or 3 (GPUs 1-3 map to 0-2 under 3,
    to no range under 1 or 2)."""
    geometry = cluster()
    sets = {frozenset(block.gpus()): block for block in geometry.blocks}
    for mask in range(geometry.num_gpus):
        maps = all(
            (image := sets.get(frozenset(g ^ mask for g in block.gpus()))) is not None
            and image.extent == block.extent
            for block in geometry.blocks
        )
        assert geometry.is_symmetry(mask) == maps
        if maps:
            for block in geometry.blocks:
                image = geometry.mirror(block, mask)
                assert set(image.gpus()) == {g ^ mask for g in block.gpus()}
    assert geometry.gpu_masks == (0, 3)
    for block in geometry.blocks:
        orbit = {geometry.mirror(block, m) for m in range(8) if geometry.is_symmetry(m)}
        canonical = geometry.mirror(block, geometry.canonical_mask(block))
        assert canonical == min(orbit, key=lambda b: b.start)
        assert geometry.is_canonical(block) == (block == canonical)


def _plan(*blocks: tuple) -> Plan:
    """The tiny instance's plan with the two vertices on blocks (origin, extent)."""
    directory = problem().directory
    placements = []
    for vertex, (origin, extent) in enumerate(blocks):
        block = directory.cluster.block_index[(origin, extent)]
        placements.append(Placement(block, directory.options[vertex][extent][0].strategy))
    return Plan(tuple(placements), (("actor", 1),))


def test_a_sliced_and_a_contiguous_block_share_only_their_common_gpus():
    """The rollout on GPUs {0, 4} and training on GPUs 1-3 (in its hull) share none: not
    colocated. On GPUs 4-7 instead, training shares GPU 4 with it: colocated."""
    simulator = problem().simulator
    apart = _plan(((0, 0, 0), (1, 2, 1)), ((0, 0, 1), (1, 1, 1)))
    assert simulator.colocated(apart) == (False, False)
    assert Occupancy.of(apart.placements).cover == ((0,), (1,))
    sharing = _plan(((0, 0, 0), (1, 2, 1)), ((0, 1, 0), (1, 1, 4)))
    assert simulator.colocated(sharing) == (True, False)
    trace = simulator.simulate(sharing)
    rollout = [e for e in trace.events if e.vertex == "actor.generate" and e.kind == "compute"]
    assert {e.gpus for e in rollout} == {(0, 4)}


def test_memory_is_checked_on_every_node_piece():
    """Training on GPUs 1-3 and 5-7 and a full-GPU rollout on node 1 (GPUs 4-7) overlap
    only on GPUs 5-7: neither block's first GPU (1, 4) holds both, the second piece's first
    GPU (5) does. The overflow is at least the training states on top of the 24 GB engine."""
    full = problem(1.0)
    directory, simulator = full.directory, full.simulator
    placements = []
    for vertex, (origin, extent) in enumerate((((0, 1, 0), (1, 1, 4)), ((0, 0, 1), (1, 2, 3)))):
        block = directory.cluster.block_index[(origin, extent)]
        placements.append(Placement(block, directory.options[vertex][extent][0].strategy))
    plan = Plan(tuple(placements), (("actor", 1),))
    peaks = simulator.peak_memory(plan)
    train = directory.options[1][(1, 2, 3)][0]
    assert peaks[1] == pytest.approx(train.resident + train.transient, rel=1e-12)  # alone
    assert peaks[4] <= 24e9 * (1 + 1e-12)  # the engine alone fits
    assert peaks[0] == 0 and peaks[5] > 24e9 + train.resident * 0.999
    assert simulator.gpu_violation(plan) == pytest.approx(peaks[5] - 24e9, rel=1e-9)
    assert max(peaks) == peaks[5]


def test_outputs_draw_and_name_each_node_piece():
    """A Gantt rectangle per GPU range; Perfetto names the ranges."""
    event = Event("actor.train", 0, "compute", 0.0, 1.0, (1, 2, 3, 5, 6, 7))
    assert _spans(event, 8) == [(1, 4), (5, 8)]
    assert gpu_span(event.gpus) == "1-3, 5-7"
    assert gpu_span(range(8)) == "0-7"


def test_the_option_is_off_by_default_and_keeps_the_fingerprint():
    """Without the key the plan space has no sliced block and the fingerprint of
    ``sliced_blocks: false`` is that of no key; ``true`` changes it."""
    data = document()
    del data["placement"]["sliced_blocks"]
    plain = parse_instance(data, name="plain")
    assert plain.placement.sliced_blocks is False
    off = parse_instance(document(sliced_blocks=False), name="off")
    on = parse_instance(document(sliced_blocks=True), name="on")
    assert instance_fingerprint(plain) == instance_fingerprint(off) != instance_fingerprint(on)
    # What the fingerprint hashes has no sliced_blocks key when it is off: plan files
    # written before the key existed keep their fingerprint.
    assert "sliced_blocks" not in _placement(off) and _placement(on)["sliced_blocks"] is True
    assert not any(b.sliced for b in Problem.from_instance(plain).directory.cluster.blocks)


@pytest.mark.parametrize("value", ["yes", 1, [True]])
def test_a_bad_option_value_is_refused_naming_the_field(value):
    with pytest.raises(InstanceError, match=r"placement\.sliced_blocks.*true or false"):
        parse_instance(document(sliced_blocks=value), name="bad")


def test_a_sliced_block_pin_needs_the_option():
    """A pin on GPUs {0, 4} is a block with the option and names it without."""
    pin = {"actor.generate": {"block": {"origin": [0, 0, 0], "extent": [1, 2, 1]}}}
    parse_instance(document(pin=pin), name="pinned")
    with pytest.raises(InstanceError, match="no block of the plan space") as caught:
        parse_instance(document(pin=pin, sliced_blocks=False), name="pinned")
    assert "placement.pin" in str(caught.value)


def test_every_pair_of_blocks_intersects_as_their_gpu_sets_do():
    """intersects and contains agree with the GPU sets for all pairs (sliced or not)."""
    geometry = cluster(2, 8)
    for first, second in itertools.product(geometry.blocks, repeat=2):
        a, b = set(first.gpus()), set(second.gpus())
        assert first.intersects(second) == bool(a & b)
        assert first.contains(second) == (b <= a)


def test_nemo_rl_refuses_sliced_blocks_and_verl_takes_them():
    """NeMo RL puts generation apart on one node or whole nodes: the published verl async
    plan (2 + 6 GPUs of each node) breaks that rule, and verl's rules hold."""
    from rlplan.rpeg.model.frameworks import FRAMEWORKS
    from rlplan.rpeg.model.frameworks.rules import plan_problems
    from rlplan.rpeg.model.plan import read_plan

    published = Path(__file__).resolve().parents[2] / "instances" / "published"
    stem = published / "verl_dapo_qwen25_math_7b_16_h20_async"
    run = Problem.load(f"{stem}.yaml")
    plan = read_plan(f"{stem}.plan.json", run.directory)
    template, gpus = run.directory.template, run.instance.hardware.num_gpus
    problems = plan_problems(FRAMEWORKS["nemo-rl"], template, plan, gpus)
    sliced = [line for line in problems if "generation-on-one-node-or-whole-nodes" in line]
    assert [line.split(":")[0] for line in sliced] == ["actor.generate", "actor.train"]
    assert "got gpus 0-1,8-9 (sliced)" in sliced[0]
    assert not plan_problems(FRAMEWORKS["verl"], template, plan, gpus)


def test_the_cli_refuses_a_bad_option_value_in_one_line(cli, tmp_path):
    """``check`` on an instance with ``sliced_blocks: "yes"``: exit 2, one line, no traceback."""
    import json

    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(document(sliced_blocks="yes")), encoding="utf-8")
    code, _, err = cli("check", path)
    assert code == 2
    assert "placement.sliced_blocks" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
