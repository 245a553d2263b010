"""Pins (``placement.pin``): validation, and how the plan space applies them.

The solver-level guarantees (every backend honours pins, pinned optima) are
in tests/solvers/test_pins.py.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.errors import InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.candidates import CandidateDirectory, enumerate_strategies, strategy_problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import plan_from_json, plan_to_json
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.search.sampling import random_plan

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


def document(name: str, pin: Any = None) -> dict[str, Any]:
    """The instance document ``instances/<name>`` with ``placement.pin`` set to ``pin``."""
    data = copy.deepcopy(read_yaml_file(INSTANCES / name))
    if pin is not None:
        data.setdefault("placement", {})["pin"] = pin
    return data


def pinned(name: str, pin: Any) -> Problem:
    """The problem of ``instances/<name>`` under ``pin``."""
    return Problem.from_instance(parse_instance(document(name, pin), name))


@pytest.mark.parametrize(
    ("name", "pin", "path", "words"),
    [
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.trian": {"tp": 1}},
            "placement.pin.actor.trian",
            "no such vertex; did you mean 'actor.train'?",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"critic.train": {"tp": 1}},
            "placement.pin.critic.train",
            "the grpo instance has no such vertex",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"tpp": 1}},
            "placement.pin.actor.generate.tpp",
            "unknown field; did you mean 'tp'?",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"recompute": "full"}},
            "placement.pin.actor.generate.recompute",
            "applies to train vertices only",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.train": {"max_num_seqs": 4}},
            "placement.pin.actor.train.max_num_seqs",
            "applies to generate vertices only",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"concurrency": 4}},
            "placement.pin.actor.generate.concurrency",
            "was renamed: pin max_num_seqs",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"tp": 0}},
            "placement.pin.actor.generate.tp",
            "must be a positive integer, got 0",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"max_num_seqs": 64}},
            "placement.pin.actor.generate.max_num_seqs",
            "64 is not among placement.max_num_seqs (4, 16)",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"max_num_seqs": 0}},
            "placement.pin.actor.generate.max_num_seqs",
            "must be a positive integer, got 0",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"gpu_memory_utilization": 1.5}},
            "placement.pin.actor.generate.gpu_memory_utilization",
            "must be a number in (0, 1], got 1.5",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"gpu_memory_utilization": 0.9}},
            "placement.pin.actor.generate.gpu_memory_utilization",
            "0.9 is not among placement.gpu_memory_utilization (0.2, 0.3, 0.4, 0.5)",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.train": {"microbatches": 4}},
            "placement.pin.actor.train.microbatches",
            "4 is not among placement.microbatches (8)",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.train": {"recompute": "full"}},
            "placement.pin.actor.train.recompute",
            "full is not among placement.recompute (none)",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.train": {"sharding": "zero2"}},
            "placement.pin.actor.train.sharding",
            "must be one of zero1, zero3",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.train": {"offload": "yes"}},
            "placement.pin.actor.train.offload",
            "must be true or false",
        ),
        (
            "tiny_dpo_2gpu_v2.yaml",
            {"actor.train": {"microbatches": 4, "micro_batch_size": 2}},
            "placement.pin.actor.train.micro_batch_size",
            "not both",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"block": {"origin": [0, 0, 1], "extent": [1, 1, 2]}}},
            "placement.pin.actor.generate.block",
            "no block of the plan space has origin [0, 0, 1] extent [1, 1, 2]",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"block": {"extent": [1, 1, 4]}}},
            "placement.pin.actor.generate.block.extent",
            "no block of the plan space has extent [1, 1, 4]",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {"block": {"start": [0, 0, 0]}}},
            "placement.pin.actor.generate.block.start",
            "unknown key",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"staleness": {"critic": 1}},
            "placement.pin.staleness.critic",
            "grpo trains no such model",
        ),
        (
            "tiny_ppo_2gpu_sync.yaml",
            {"staleness": {"actor": 1}},
            "placement.pin.staleness.actor",
            "1 is not among optimizer.staleness_candidates.actor (0)",
        ),
        (
            "tiny_grpo_2gpu.yaml",
            {"actor.generate": {}},
            "placement.pin.actor.generate",
            "pin at least one field",
        ),
    ],
)
def test_bad_pins_are_one_line_errors_naming_the_path(name, pin, path, words):
    """Unknown vertices or fields, misplaced fields and values outside the plan space."""
    with pytest.raises(InstanceError) as caught:
        parse_instance(document(name, pin), name)
    assert caught.value.path == path
    assert words in caught.value.message
    assert "\n" not in str(caught.value)


def test_cli_check_rejects_a_bad_pin_with_exit_2(cli, tmp_path):
    """``check`` prints one line naming the pin's path and exits 2."""
    data = document("tiny_grpo_2gpu.yaml", {"actor.generate": {"tp": 1, "tpp": 2}})
    path = tmp_path / "bad_pin.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _out, err = cli("check", path)
    assert code == 2
    assert err.strip().splitlines() == [
        "error: placement.pin.actor.generate.tpp: unknown field; did you mean 'tp'? "
        "(allowed: block, dp, pp, tp, gpu_memory_utilization, max_num_seqs, ep)"
    ]


def test_staleness_pin_narrows_the_staleness_candidates():
    """``staleness: {actor: 1}`` leaves the actor the one candidate 1 (the critic keeps its own)."""
    problem = pinned("tiny_ppo_2gpu.yaml", {"staleness": {"actor": 1}})
    unpinned = pinned("tiny_ppo_2gpu.yaml", None)
    critic = unpinned.instance.optimizer.staleness_candidates["critic"]
    assert unpinned.instance.optimizer.staleness_candidates["actor"] == (0, 1)
    assert problem.instance.optimizer.staleness_candidates == {"actor": (1,), "critic": critic}
    assert problem.instance.placement.pin.staleness_of("actor") == 1


def test_strategy_pins_filter_every_candidate():
    """Only strategies with the pinned tp and max_num_seqs remain, on any shape."""
    problem = pinned("tiny_grpo_2gpu.yaml", {"actor.generate": {"tp": 1, "max_num_seqs": 4}})
    directory = problem.directory
    index = directory.template.index("actor.generate")
    strategies = [c.strategy for cands in directory.options[index].values() for c in cands]
    # tp 1 on one GPU, and on both as dp 2 or pp 2, each with max_num_seqs 4 only, at the
    # smallest gpu_memory_utilization whose engine starts (the larger ones are no faster:
    # 4 sequences fit every pool). With all 28 layers a GPU holds 3.09 GB of weights, and
    # 0.2 x 24 GB = 4.8 GB leaves no pool beside them and the 2 GB workspace: 0.3.
    # pp 2 holds 14 layers (1.54 GB of weights): 0.2 leaves a 1.26 GB pool.
    assert sorted(
        (s.dp, s.pp, s.tp, s.gpu_memory_utilization, s.max_num_seqs) for s in strategies
    ) == [(1, 1, 1, 0.3, 4), (1, 2, 1, 0.2, 4), (2, 1, 1, 0.3, 4)]
    vertex = directory.template.vertices[index]
    # dp 2 or pp 2, each at the 4 fractions
    assert len(enumerate_strategies(problem.instance, vertex, (1, 1, 2))) == 8
    unpinned = pinned("tiny_grpo_2gpu.yaml", None)
    # (dp, pp, tp) in (2,1,1), (1,2,1), (1,1,2), each at 4 fractions and max_num_seqs 4 or 16.
    assert len(enumerate_strategies(unpinned.instance, vertex, (1, 1, 2))) == 24


def test_strategy_problem_names_the_broken_pin():
    """A strategy breaking a pin is outside the plan space, and the reason names the pin."""
    problem = pinned("tiny_dpo_2gpu_v2.yaml", {"actor.train": {"micro_batch_size": 8}})
    vertex = problem.directory.template.vertices[problem.directory.template.index("actor.train")]
    # 32 sequences; dp 2 gives 16 per replica, 4 microbatches of 4: not the pinned 8.
    dp2 = Strategy(2, 1, 1, 4, "full", "zero3", False)
    assert (
        strategy_problem(problem.instance, vertex, (1, 1, 2), dp2)
        == "placement.pin.actor.train: micro_batch_size 8 pinned, got 4"
    )
    # dp 1: 32 sequences in 4 microbatches of 8.
    tp2 = Strategy(1, 1, 2, 4, "full", "zero1", False, 0)
    assert strategy_problem(problem.instance, vertex, (1, 1, 2), tp2) is None


def test_block_pins_narrow_the_blocks_every_consumer_reads():
    """``directory.blocks`` lists only the pinned block; other vertices keep every block."""
    pin = {"actor.infer": {"block": {"origin": [0, 0, 1], "extent": [1, 1, 1]}}}
    directory = pinned("tiny_grpo_2gpu.yaml", pin).directory
    index = directory.template.index("actor.infer")
    assert sorted(directory.options[index]) == [(1, 1, 1)]
    assert [b.label() for b in directory.blocks(index, (1, 1, 1))] == ["gpu 1"]
    assert directory.blocks(index, (1, 1, 2)) == ()
    cluster = directory.cluster
    assert not directory.allows(index, cluster.block_index[((0, 0, 0), (1, 1, 1))])
    other = directory.template.index("actor.train")
    assert [b.label() for b in directory.blocks(other, (1, 1, 1))] == ["gpu 0", "gpu 1"]


def test_origin_only_block_pin_keeps_every_shape_at_that_origin():
    """``block: {origin: [0, 0, 0]}`` allows GPU 0 and both GPUs, not GPU 1."""
    directory = pinned(
        "tiny_grpo_2gpu.yaml", {"reward.infer": {"block": {"origin": [0, 0, 0]}}}
    ).directory
    index = directory.template.index("reward.infer")
    labels = sorted(
        b.label() for shape in directory.options[index] for b in directory.blocks(index, shape)
    )
    assert labels == ["gpu 0", "gpus 0-1"]


def test_random_plans_respect_block_and_strategy_pins():
    """Sampled plans (restarts, benchmarks) never leave the pinned plan space."""
    pin = {
        "actor.infer": {"block": {"origin": [0, 0, 1], "extent": [1, 1, 1]}},
        "actor.generate": {"tp": 1},
    }
    problem = pinned("tiny_grpo_2gpu.yaml", pin)
    template = problem.directory.template
    rng = random.Random(3)
    for _ in range(200):
        plan = random_plan(problem.directory, rng)
        infer = plan.placements[template.index("actor.infer")]
        assert infer.block.label() == "gpu 1"
        assert plan.placements[template.index("actor.generate")].strategy.tp == 1


def test_plan_files_breaking_a_pin_are_refused():
    """A plan whose block or strategy breaks a pin is outside the plan space (PlanError)."""
    free = pinned("tiny_grpo_2gpu.yaml", None)
    rng = random.Random(0)
    plan = random_plan(free.directory, rng)
    document_ = plan_to_json(plan, free.directory)
    del document_["instance"]  # a hand-written plan: checked on its content alone
    document_["vertices"]["actor.infer"]["block"] = {"origin": [0, 0, 0], "extent": [1, 1, 1]}
    document_["vertices"]["actor.infer"]["dp"] = 1
    document_["vertices"]["actor.infer"]["pp"] = 1
    document_["vertices"]["actor.infer"]["tp"] = 1
    document_["vertices"]["actor.infer"]["micro_batch_size"] = 2
    block_pin = pinned(
        "tiny_grpo_2gpu.yaml", {"actor.infer": {"block": {"origin": [0, 0, 1]}}}
    ).directory
    with pytest.raises(PlanError) as caught:
        plan_from_json(document_, block_pin)
    assert caught.value.path == "plan.vertices.actor.infer.block"
    assert "outside placement.pin.actor.infer {origin: [0, 0, 1]}" in caught.value.message
    tp_pin = pinned("tiny_grpo_2gpu.yaml", {"actor.infer": {"tp": 2}}).directory
    with pytest.raises(PlanError) as caught:
        plan_from_json(document_, tp_pin)
    assert caught.value.path == "plan.vertices.actor.infer"
    assert caught.value.message == "placement.pin.actor.infer: tp 2 pinned, got 1"
    plan_from_json(document_, free.directory)  # the unpinned instance accepts it


def test_pins_change_the_instance_fingerprint():
    """A plan made without pins is refused by the pinned instance (another plan space)."""
    free = pinned("tiny_grpo_2gpu.yaml", None).instance
    tp1 = pinned("tiny_grpo_2gpu.yaml", {"actor.generate": {"tp": 1}}).instance
    assert instance_fingerprint(free) != instance_fingerprint(tp1)


def test_no_pins_leave_the_directory_unchanged():
    """Without pins every block of every shape is allowed (the unpinned plan space)."""
    directory = CandidateDirectory(pinned("tiny_ppo_2gpu.yaml", None).instance)
    for index in range(len(directory.template.vertices)):
        for shape, blocks in directory.cluster.blocks_by_shape.items():
            assert directory.blocks(index, shape) == blocks
