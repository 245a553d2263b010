"""Plan files v2 (docs/plan-space.md): v1 defaults, v2 fields, micro-batching."""

from __future__ import annotations

import copy
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness, plan_from_json, plan_to_json
from rlplan.rpeg.search.sampling import random_plan
from tests.rpeg.conftest import _load

#: instances/tiny_dpo_2gpu.yaml: vertices actor.generate, actor.infer, reference.infer,
#: actor.train; B*K = 32 sequences; microbatches [1, 2]; rollout
#: gpu_memory_utilization [0.2, 0.3, 0.4, 0.5] and max_num_seqs [8, 32]; no
#: recompute, ZeRO-3 or offload in its plan space.
TINY = "tiny_dpo_2gpu.yaml"
#: The same with every v2 dimension in the plan space (microbatches [4]).
TINY_V2 = "tiny_dpo_2gpu_v2.yaml"

WHOLE = {"origin": [0, 0, 0], "extent": [1, 1, 2]}
GPU1 = {"origin": [0, 0, 1], "extent": [1, 1, 1]}


#: The runs of step 1 of a v1 DPO order, in template order.
V1_STEP_1 = [["actor.generate", 1], ["reference.infer", 1], ["actor.train", 1]]


def v1_plan() -> dict:
    """A plan file as v1 wrote it: no actor.infer, the rollout with microbatches."""
    return {
        "algorithm": "dpo",
        "k_eval": 2,
        "staleness": {"actor": 1},
        "vertices": {
            "actor.generate": {"block": WHOLE, "dp": 1, "pp": 1, "tp": 2, "microbatches": 4},
            "reference.infer": {"block": GPU1, "dp": 1, "pp": 1, "tp": 1, "microbatches": 2},
            "actor.train": {"block": WHOLE, "dp": 2, "pp": 1, "tp": 1, "microbatches": 2},
        },
    }


def test_v1_plan_loads_with_defaults():
    """Absent v2 fields take their v1 defaults; actor.infer runs where the actor trains."""
    directory = _load(TINY).directory
    plan = plan_from_json(v1_plan(), directory)
    names = directory.template.names
    assert names == ("actor.generate", "actor.infer", "reference.infer", "actor.train")
    placements = dict(zip(names, plan.placements, strict=True))
    # rollout: 32 sequences in 4 waves of 8 -> the smallest max_num_seqs >= 8, i.e. 8, at
    # the largest gpu_memory_utilization of the plan space, 0.5
    assert placements["actor.generate"].strategy == Strategy(
        1, 1, 2, 1, gpu_memory_utilization=0.5, max_num_seqs=8
    )
    # reference and training: none / zero1 / no offload
    assert placements["reference.infer"].strategy == Strategy(1, 1, 1, 2)
    assert placements["actor.train"].strategy == Strategy(2, 1, 1, 2, "none", "zero1", False)
    # old log-probs on the training block with its (dp, pp, tp) and microbatch count
    assert placements["actor.infer"].block == placements["actor.train"].block
    assert placements["actor.infer"].strategy == Strategy(2, 1, 1, 2)
    assert plan.staleness_map == {"actor": 1}
    assert plan.order is None


@pytest.mark.parametrize(("waves", "max_num_seqs"), [(1, 32), (2, 32), (4, 8)])
def test_v1_rollout_microbatches_become_a_max_num_seqs(waves, max_num_seqs):
    """v1 decoded ceil(32/mb) sequences at a time: the smallest max_num_seqs holding them."""
    # mb 1 -> 32 -> 32; mb 2 -> 16 -> 32 (no 16 in [8, 32]); mb 4 -> 8 -> 8
    directory = _load(TINY).directory
    document = v1_plan()
    document["vertices"]["actor.generate"]["microbatches"] = waves
    plan = plan_from_json(document, directory)
    assert plan.placements[0].strategy.max_num_seqs == max_num_seqs


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        # synchronous order: actor.infer t goes right before actor.train t
        (
            [["actor.generate", 0], ["reference.infer", 0], ["actor.train", 0], *V1_STEP_1],
            [(0, 0), (2, 0), (1, 0), (3, 0), (0, 1), (2, 1), (1, 1), (3, 1)],
        ),
        # staleness 1: the second rollout before the first training
        (
            [
                ["actor.generate", 0],
                ["actor.generate", 1],
                ["reference.infer", 0],
                ["actor.train", 0],
                ["reference.infer", 1],
                ["actor.train", 1],
            ],
            [(0, 0), (0, 1), (2, 0), (1, 0), (3, 0), (2, 1), (1, 1), (3, 1)],
        ),
    ],
)
def test_v1_plan_order_gains_the_actor_infer_runs(order, expected):
    """A v1 order (no actor.infer) loads, stays topological and simulates."""
    problem = _load(TINY)
    document = v1_plan()
    document["order"] = order
    plan = plan_from_json(document, problem.directory)
    assert plan.order == tuple(expected)
    trace = problem.simulator.simulate(plan)
    assert trace.start_order == tuple(expected)


def test_a_v2_order_must_list_every_run():
    """A v2 plan (with actor.infer) whose order omits its runs is rejected."""
    directory = _load(TINY).directory
    document = plan_to_json(plan_from_json(v1_plan(), directory), directory)
    document["order"] = [
        ["actor.generate", 0],
        ["reference.infer", 0],
        ["actor.train", 0],
        *V1_STEP_1,
    ]
    with pytest.raises(PlanError, match="lists 6 runs, the plan has 8"):
        plan_from_json(document, directory)


def v2_plan(problem: Problem) -> Plan:
    """A plan of the v2 tiny instance using every v2 dimension."""
    cluster = problem.directory.cluster
    whole = cluster.block_from_json(WHOLE, "block")
    gpu1 = cluster.block_from_json(GPU1, "block")
    placements = (
        Placement(whole, Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=8)),
        Placement(whole, Strategy(2, 1, 1, 4)),
        Placement(gpu1, Strategy(1, 1, 1, 4, offload=True)),
        Placement(whole, Strategy(2, 1, 1, 4, "full", "zero3", True)),
    )
    return Plan(placements, make_staleness({"actor": 0}))


def test_v2_fields_are_written_explicitly():
    """plan_to_json writes every field that applies to each vertex, defaults included."""
    problem = _load(TINY_V2)
    plan = v2_plan(problem)
    document = plan_to_json(plan, problem.directory)
    vertices = document["vertices"]
    assert vertices["actor.generate"] == {
        "block": WHOLE,
        "dp": 1,
        "pp": 1,
        "tp": 2,
        "gpu_memory_utilization": 0.2,
        "max_num_seqs": 8,
    }
    # 32 sequences over dp 2: 16 per replica, 4 microbatches of 4
    assert vertices["actor.infer"] == {
        "block": WHOLE,
        "dp": 2,
        "pp": 1,
        "tp": 1,
        "microbatches": 4,
        "micro_batch_size": 4,
        "offload": False,
    }
    # 32 sequences on one GPU: 4 microbatches of 8
    assert vertices["reference.infer"]["micro_batch_size"] == 8
    assert vertices["reference.infer"]["offload"] is True
    assert "recompute" not in vertices["reference.infer"]
    train = vertices["actor.train"]
    assert (train["recompute"], train["sharding"], train["offload"]) == ("full", "zero3", True)
    assert plan_from_json(json.loads(json.dumps(document)), problem.directory) == plan


def test_v2_fields_round_trip_with_an_order():
    """plan_from_json(plan_to_json(plan)) is the plan, order included."""
    problem = _load(TINY_V2)
    count = len(problem.directory.template.vertices)
    order = tuple((v, t) for t in range(2) for v in range(count))
    plan = v2_plan(problem).with_order(order)
    document = json.loads(json.dumps(plan_to_json(plan, problem.directory)))
    assert plan_from_json(document, problem.directory) == plan


@settings(max_examples=100, deadline=None, database=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), with_order=st.booleans())
def test_random_v2_plans_round_trip(seed, with_order):
    """Any plan of the v2 plan space survives plan_to_json -> JSON text -> plan_from_json."""
    problem = _load(TINY_V2)
    plan = random_plan(problem.directory, random.Random(seed), with_order=with_order)
    text = json.dumps(plan_to_json(plan, problem.directory))
    assert plan_from_json(json.loads(text), problem.directory) == plan


# -- micro_batch_size and microbatches -------------------------------------------------------


def reference_with(**fields) -> dict:
    document = v1_plan()
    entry = {"block": GPU1, "dp": 1, "pp": 1, "tp": 1, **fields}
    document["vertices"]["reference.infer"] = entry
    return document


@pytest.mark.parametrize(
    ("fields", "count"),
    [
        # 32 sequences per replica: 2 microbatches hold ceil(32/2) = 16 each
        ({"microbatches": 2, "micro_batch_size": 16}, 2),
        # a size alone: ceil(32/32) = 1 microbatch
        ({"micro_batch_size": 32}, 1),
        # ceil(32/20) = 2 (the second microbatch holds 12)
        ({"micro_batch_size": 20}, 2),
        ({"microbatches": 1}, 1),
    ],
)
def test_micro_batch_size_gives_the_microbatch_count(fields, count):
    """micro_batch_size m means ceil(replica / m) microbatches."""
    directory = _load(TINY).directory
    plan = plan_from_json(reference_with(**fields), directory)
    assert plan.placements[2].strategy.microbatches == count


def test_inconsistent_micro_batch_size_is_rejected():
    """2 microbatches of a 32-sequence replica hold 16 sequences, not 8."""
    directory = _load(TINY).directory
    with pytest.raises(PlanError) as info:
        plan_from_json(reference_with(microbatches=2, micro_batch_size=8), directory)
    assert info.value.path == "plan.vertices.reference.infer.micro_batch_size"
    assert "2 microbatches of a 32-sequence replica hold 16 sequences each, not 8" in str(
        info.value
    )


def test_micro_batch_size_outside_the_plan_space_is_rejected():
    """micro_batch_size 8 means 4 microbatches, and placement.microbatches is [1, 2]."""
    directory = _load(TINY).directory
    with pytest.raises(PlanError) as info:
        plan_from_json(reference_with(micro_batch_size=8), directory)
    assert info.value.path == "plan.vertices.reference.infer"
    assert "microbatches 4 not among placement.microbatches (1, 2)" in str(info.value)


def test_counts_whose_size_does_not_divide_round_trip(small_instance_data, make_instance):
    """10 sequences in 6 microbatches (2 each, the last 0): written as 6 and 2, read back as 6."""
    data = copy.deepcopy(small_instance_data)
    data["workload"]["batch_size"] = 10
    data["placement"]["microbatches"] = [6]
    data["placement"]["max_num_seqs"] = [10]
    problem = Problem.from_instance(make_instance(data))
    directory = problem.directory
    block = directory.cluster.blocks[0]
    plan = Plan(
        tuple(Placement(block, directory.options[v][(1, 1, 1)][0].strategy) for v in range(3)),
        make_staleness({"actor": 0}),
    )
    document = plan_to_json(plan, directory)
    # ceil(10/6) = 2 sequences per microbatch, but ceil(10/2) = 5 != 6: the count decides
    assert document["vertices"]["actor.train"]["microbatches"] == 6
    assert document["vertices"]["actor.train"]["micro_batch_size"] == 2
    assert plan_from_json(document, directory) == plan


@pytest.mark.parametrize(
    ("vertex", "fields", "path", "message"),
    [
        ("actor.train", {"recompute": "full"}, "plan.vertices.actor.train", "placement.recompute"),
        ("actor.train", {"sharding": "zero3"}, "plan.vertices.actor.train", "placement.sharding"),
        (
            "actor.train",
            {"sharding": "zero2"},
            "plan.vertices.actor.train.sharding",
            "must be zero1 or zero3",
        ),
        (
            "reference.infer",
            {"offload": True},
            "plan.vertices.reference.infer",
            "placement.offload",
        ),
        (
            "reference.infer",
            {"recompute": "full"},
            "plan.vertices.reference.infer",
            "train vertices only",
        ),
        (
            "reference.infer",
            {"concurrency": 8},
            "plan.vertices.reference.infer.concurrency",
            "generate vertices only",
        ),
        (
            "reference.infer",
            {"max_num_seqs": 8},
            "plan.vertices.reference.infer.max_num_seqs",
            "generate vertices only",
        ),
        (
            "reference.infer",
            {"gpu_memory_utilization": 0.5},
            "plan.vertices.reference.infer.gpu_memory_utilization",
            "generate vertices only",
        ),
        (
            "actor.generate",
            {"concurrency": 16},
            "plan.vertices.actor.generate.concurrency",
            "16 (read as max_num_seqs) is not among placement.max_num_seqs (8, 32)",
        ),
        (
            "actor.generate",
            {"max_num_seqs": 16},
            "plan.vertices.actor.generate",
            "max_num_seqs 16 not among placement.max_num_seqs (8, 32)",
        ),
        (
            "actor.generate",
            {"gpu_memory_utilization": 0.9},
            "plan.vertices.actor.generate",
            "gpu_memory_utilization 0.9 not among placement.gpu_memory_utilization "
            "(0.2, 0.3, 0.4, 0.5)",
        ),
    ],
)
def test_v2_fields_outside_the_plan_space_are_rejected(vertex, fields, path, message):
    """A v2 field must name a value of the instance's plan space, on a vertex it applies to."""
    directory = _load(TINY).directory
    document = v1_plan()
    document["vertices"][vertex].update(fields)
    with pytest.raises(PlanError) as info:
        plan_from_json(document, directory)
    assert info.value.path == path
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("change", "path", "hint"),
    [
        (lambda d: d.update(stalenes=d.pop("staleness")), "plan.stalenes", "'staleness'"),
        (
            lambda d: d["vertices"]["actor.train"].update(microbatch=2),
            "plan.vertices.actor.train.microbatch",
            "'microbatches'",
        ),
        (
            lambda d: d["vertices"].update({"actor.trian": d["vertices"].pop("actor.train")}),
            "plan.vertices.actor.trian",
            "'actor.train'",
        ),
        (lambda d: d["staleness"].update(actr=0), "plan.staleness.actr", "'actor'"),
    ],
)
def test_unknown_plan_names_suggest_the_closest(change, path, hint):
    """Misspelt keys, vertices and models of a plan file name what they likely meant."""
    directory = _load(TINY).directory
    document = v1_plan()
    change(document)
    with pytest.raises(PlanError) as caught:
        plan_from_json(document, directory)
    assert caught.value.path == path
    assert f"did you mean {hint}?" in caught.value.message
