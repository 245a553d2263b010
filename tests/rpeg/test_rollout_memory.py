"""The rollout engine's memory (docs/cost-model.md#rollout-engine-memory), by hand.

The instance is the small one of conftest.py (2 layers, d=64, kv=2, h=16, V=256:
P = 106_496 parameters, 2P = 212_992 bytes of bf16 weights; 2*2*2*16*2 = 256 KV
bytes per token on one GPU; S = 4, T = 4) on a GPU of 1 MB, so that the KV pool
of a gpu_memory_utilization u is a number of bytes one can follow:
``u * 1e6 - 212_992 - rollout_workspace``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from rlplan.rpeg.errors import InfeasiblePlanError, InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.plan import plan_from_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.templates import Kind, Vertex
from tests.rpeg.conftest import INSTANCES, SMALL_INSTANCE

GENERATE = Vertex("actor", Kind.GENERATE)
ONE_GPU = {"origin": [0, 0, 0], "extent": [1, 1, 1]}


def small(batch_size: int = 4, workspace: float = 0, **placement: Any) -> dict[str, Any]:
    """The small instance on a 1 MB GPU with ``batch_size`` prompts (one sample each)."""
    data = copy.deepcopy(SMALL_INSTANCE)
    data["hardware"]["memory_per_gpu"] = 1e6
    # no reserve: every byte of the 1 MB is usable (the default reserve's fixed 1 GiB
    # would leave none; test_the_engine_share_must_fit_the_usable_memory sets a fraction)
    data["hardware"]["memory_reserve"] = 0.0
    data["hardware"]["memory_reserve_bytes"] = 0
    data["engine"]["rollout_workspace"] = workspace
    data["workload"]["batch_size"] = batch_size
    data["placement"].update(placement)
    return data


def rollout(u: float, seqs: int) -> Strategy:
    return Strategy(1, 1, 1, 1, gpu_memory_utilization=u, max_num_seqs=seqs)


def test_effective_concurrency_by_hand():
    """c = min(max_num_seqs, n, floor(pool tokens / (S + E[T^2] / (2 E[T]))))."""
    data = small(batch_size=300, workspace=1000)
    data["workload"]["gen_quantiles"] = [[0.5, 2], [1.0, 4]]
    cost = CostModel(parse_instance(data, "small"))
    strategy = rollout(0.5, 1024)
    # pool bytes: 0.5 * 1e6 - 212_992 (weights) - 1_000 (workspace) = 286_008
    assert cost.rollout_pool_bytes("actor", strategy) == pytest.approx(286_008, rel=1e-12)
    # KV per token 256 bytes: 286_008 / 256 = 1_117.21875 tokens
    assert cost.rollout_kv_per_token("actor", strategy) == 256
    assert cost.rollout_pool_tokens("actor", strategy) == pytest.approx(1117.21875, rel=1e-12)
    # lengths uniform on (0, 2] and (2, 4], half each: E[T] = 2, E[T^2] = 16/3;
    # mean live context 4 + (16/3) / (2*2) = 5.3333 tokens
    assert cost.live_context == pytest.approx(4 + 4 / 3, rel=1e-12)
    # floor(1_117.21875 / 5.3333) = floor(209.48) = 209 < n = 300 < max_num_seqs 1024
    assert cost.effective_concurrency("actor", strategy) == 209
    # max_num_seqs below what the pool holds caps it; so do the replica's sequences
    assert cost.effective_concurrency("actor", rollout(0.5, 100)) == 100
    halves = Strategy(2, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1024)
    assert cost.effective_concurrency("actor", halves) == 150  # ceil(300 / 2) sequences


def test_a_pool_too_small_for_max_num_seqs_slows_the_rollout():
    """u 0.217 holds 2 of the 4 sequences at once, u 0.22 all 4: the smaller share is slower.

    Both run max_num_seqs 4 on n = 4 sequences of S + T = 4 + 4 tokens (live context
    S + E[T^2]/(2 E[T]) = 4 + 16/8 = 6 tokens), no workspace:
    * u 0.217: pool 217_000 - 212_992 = 4_008 bytes = 15.66 tokens, floor(15.66 / 6) = 2;
    * u 0.22: pool 7_008 bytes = 27.375 tokens, floor(27.375 / 6) = 4.
    The times are those of test_cost_v2.py::test_rollout_saturated_phase_then_tail for
    2 and 4 sequences in flight (the GPU's size enters no time):
    * c = 2: prefill in 2 chunks of M = 8 tokens, 2 * 2.356224e-6 = 4.712448e-6 s; a
      saturated phase of (4 - 2) * 4 / 2 = 4 rounds of 2 sequences at context 6,
      4 * (180_224 + 256*6*2) / 5e8 = 1.466368e-3 s; the last 2 sequences at contexts
      5..8, (182_784 + 183_296 + 183_808 + 184_320) / 5e8 = 1.468416e-3 s;
      total 2.939496448e-3 s;
    * c = 4: one prefill chunk of M = 16, 3.806208e-6 s; 4 sequences at contexts 5..8,
      (185_344 + 186_368 + 187_392 + 188_416) / 5e8 = 1.49504e-3 s; total 1.498846208e-3 s.
    """
    cost = CostModel(parse_instance(small(), "small"))
    tight, ample = rollout(0.217, 4), rollout(0.22, 4)
    assert cost.rollout_pool_bytes("actor", tight) == pytest.approx(4_008, rel=1e-9)
    assert cost.rollout_pool_bytes("actor", ample) == pytest.approx(7_008, rel=1e-9)
    assert cost.effective_concurrency("actor", tight) == 2
    assert cost.effective_concurrency("actor", ample) == 4
    slow = cost.run_time(GENERATE, (1, 1, 1), tight)
    fast = cost.run_time(GENERATE, (1, 1, 1), ample)
    assert slow == pytest.approx(2.939496448e-3, rel=1e-12)
    assert fast == pytest.approx(1.498846208e-3, rel=1e-12)


def test_the_engine_refuses_a_pool_without_one_sequence_of_the_maximum_length():
    """vLLM's check: a pool below one S + T sequence, or none at all, does not start.

    One sequence of S + T = 8 tokens needs 8 * 256 = 2_048 bytes of KV cache.
    * u 0.214: pool 214_000 - 212_992 = 1_008 bytes (3.9 tokens): 1_040 bytes short;
    * u 0.2: 200_000 bytes do not even hold the weights: pool -12_992, 15_040 short.
    """
    cost = CostModel(parse_instance(small(), "small"))
    assert cost.rollout_shortfall("actor", rollout(0.214, 4)) == pytest.approx(1_040, rel=1e-9)
    assert cost.rollout_refusal("actor", rollout(0.214, 4)) == (
        "the rollout engine would not start: at gpu_memory_utilization 0.214 its KV pool "
        "holds 3 tokens per GPU, less than one S + T = 8-token sequence (1,040 bytes short)"
    )
    assert cost.rollout_shortfall("actor", rollout(0.2, 4)) == pytest.approx(15_040, rel=1e-9)
    assert cost.rollout_refusal("actor", rollout(0.2, 4)) == (
        "the rollout engine would not start: at gpu_memory_utilization 0.2 the weights "
        "(212,992 bytes) and workspace (0 bytes) leave no KV pool in its 200,000 bytes per "
        "GPU (15,040 bytes short)"
    )
    # 2_048 bytes exactly: u = (212_992 + 2_048) / 1e6 = 0.21504 starts
    assert cost.rollout_refusal("actor", rollout(0.21504, 4)) is None
    assert cost.effective_concurrency("actor", rollout(0.21504, 4)) == 1  # 8 tokens / 6


def test_refused_rollouts_are_left_out_of_the_candidates():
    """Only the rollout whose engine starts is a candidate; the directory counts the other."""
    directory = CandidateDirectory(
        parse_instance(small(gpu_memory_utilization=[0.214, 0.217], max_num_seqs=[4]), "s")
    )
    rollouts = [c.strategy for c in directory.options[0][(1, 1, 1)]]
    assert rollouts == [rollout(0.217, 4)]
    assert directory.refused == 1
    refused = directory.candidate(0, (1, 1, 1), rollout(0.214, 4))
    assert not refused.starts and refused.shortfall == pytest.approx(1_040, rel=1e-9)
    assert directory.refusal(refused).startswith("the rollout engine would not start")


def test_the_engine_share_must_fit_the_usable_memory():
    """u * M above memory_per_gpu * (1 - memory_reserve) does not fit, even alone."""
    data = small(gpu_memory_utilization=[0.9, 0.95], max_num_seqs=[4])
    data["hardware"]["memory_reserve"] = 0.1
    directory = CandidateDirectory(parse_instance(data, "s"))
    # usable 0.9 * 1e6 = 900_000 bytes: 0.9 takes 900_000 (fits), 0.95 takes 950_000
    assert [c.strategy.gpu_memory_utilization for c in directory.options[0][(1, 1, 1)]] == [0.9]
    assert directory.candidate(0, (1, 1, 1), rollout(0.9, 4)).memory == pytest.approx(9e5)


def test_an_instance_whose_rollouts_all_refuse_is_infeasible_naming_why(cli, tmp_path):
    data = small(gpu_memory_utilization=[0.214], max_num_seqs=[4])
    problem = Problem.from_instance(parse_instance(data, "small"))
    # (actor.train's 16P = 1.7 MB of states do not fit the 1 MB GPU either)
    assert "actor.generate" in [name for name, _ in problem.unplaceable()]
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, _ = cli("check", path)
    assert code == 1
    assert "1 rollouts left out (the engine's KV pool holds no sequence of S + T tokens)" in out
    assert (
        "INFEASIBLE: actor.generate fits on no block: at its best (dp1 pp1 tp1 u0.214 s4) the "
        "rollout engine would not start: at gpu_memory_utilization 0.214 its KV pool holds 3 "
        "tokens per GPU, less than one S + T = 8-token sequence (1,040 bytes short)"
    ) in out.splitlines()


def _small_plan(**rollout_fields: Any) -> dict[str, Any]:
    return {
        "staleness": {"actor": 0},
        "vertices": {
            "actor.generate": {"block": ONE_GPU, "dp": 1, "pp": 1, "tp": 1, **rollout_fields},
            "reference.infer": {"block": ONE_GPU, "dp": 1, "pp": 1, "tp": 1, "microbatches": 1},
            "actor.train": {"block": ONE_GPU, "dp": 1, "pp": 1, "tp": 1, "microbatches": 1},
        },
    }


def test_a_plan_asking_for_a_refused_rollout_is_infeasible(cli, tmp_path):
    """plan_from_json names the vertex and the shortfall; the command line exits 1."""
    data = small(gpu_memory_utilization=[0.214, 0.217], max_num_seqs=[4])
    directory = CandidateDirectory(parse_instance(data, "small"))
    plan = _small_plan(gpu_memory_utilization=0.214, max_num_seqs=4)
    with pytest.raises(InfeasiblePlanError) as caught:
        plan_from_json(plan, directory)
    assert caught.value.path == "plan.vertices.actor.generate"
    assert "(1,040 bytes short)" in caught.value.message
    started = plan_from_json(_small_plan(gpu_memory_utilization=0.217, max_num_seqs=4), directory)
    assert started.placements[0].strategy == rollout(0.217, 4)
    instance, plan_file = tmp_path / "small.yaml", tmp_path / "plan.json"
    instance.write_text(yaml.safe_dump(data), encoding="utf-8")
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    code, out, err = cli("simulate", instance, plan_file)
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        "INFEASIBLE: plan.vertices.actor.generate: the rollout engine would not start: at "
        "gpu_memory_utilization 0.214 its KV pool holds 3 tokens per GPU, less than one "
        "S + T = 8-token sequence (1,040 bytes short)"
    ]


# -- older plan and instance files ---------------------------------------------------------

TINY_DPO = INSTANCES / "tiny_dpo_2gpu.yaml"
BOTH = {"origin": [0, 0, 0], "extent": [1, 1, 2]}


def _tiny_plan(**rollout_fields: Any) -> dict[str, Any]:
    """A tiny_dpo_2gpu plan with the given rollout fields (everything on both GPUs)."""
    return {
        "staleness": {"actor": 0},
        "vertices": {
            "actor.generate": {"block": BOTH, "dp": 1, "pp": 1, "tp": 2, **rollout_fields},
            "actor.infer": {"block": BOTH, "dp": 2, "pp": 1, "tp": 1, "microbatches": 1},
            "reference.infer": {"block": BOTH, "dp": 2, "pp": 1, "tp": 1, "microbatches": 1},
            "actor.train": {"block": BOTH, "dp": 1, "pp": 1, "tp": 2, "microbatches": 2},
        },
    }


def test_an_old_concurrency_is_max_num_seqs_at_the_largest_utilization():
    """``concurrency: 8`` reads as max_num_seqs 8 at the largest of
    placement.gpu_memory_utilization (0.2, 0.3, 0.4, 0.5): 0.5, the pool holding most."""
    directory = Problem.load(str(TINY_DPO)).directory
    plan = plan_from_json(_tiny_plan(concurrency=8), directory)
    assert plan.placements[0].strategy == Strategy(
        1, 1, 2, 1, gpu_memory_utilization=0.5, max_num_seqs=8
    )
    # a fraction given beside it is kept
    kept = plan_from_json(_tiny_plan(concurrency=8, gpu_memory_utilization=0.2), directory)
    assert kept.placements[0].strategy.gpu_memory_utilization == 0.2
    with pytest.raises(PlanError) as caught:
        plan_from_json(_tiny_plan(concurrency=8, max_num_seqs=8), directory)
    assert caught.value.path == "plan.vertices.actor.generate.concurrency"
    assert caught.value.message == "is the old name of max_num_seqs: give max_num_seqs only"


def test_an_old_placement_concurrency_is_the_max_num_seqs_list():
    data = read_yaml_file(TINY_DPO)
    data["placement"]["concurrency"] = data["placement"].pop("max_num_seqs")
    instance = parse_instance(data, "old")
    assert instance.placement.max_num_seqs == (8, 32)
    assert instance.placement.gpu_memory_utilization == (0.2, 0.3, 0.4, 0.5)
    assert any(
        "placement.concurrency is read as placement.max_num_seqs" in w for w in instance.warnings
    )
    data["placement"]["max_num_seqs"] = [8]
    with pytest.raises(InstanceError) as caught:
        parse_instance(data, "both")
    assert caught.value.path == "placement.concurrency"
    assert "give max_num_seqs only" in caught.value.message


# -- bad input: one line naming the field, exit code 2 ------------------------------------

BAD_PLACEMENT = [
    ({"gpu_memory_utilization": [0]}, "placement.gpu_memory_utilization[0]", "got 0"),
    ({"gpu_memory_utilization": [0.5, 1.01]}, "placement.gpu_memory_utilization[1]", "1.01"),
    ({"gpu_memory_utilization": [-0.5]}, "placement.gpu_memory_utilization[0]", "-0.5"),
    ({"gpu_memory_utilization": ["high"]}, "placement.gpu_memory_utilization[0]", "'high'"),
    ({"gpu_memory_utilization": [True]}, "placement.gpu_memory_utilization[0]", "True"),
    ({"gpu_memory_utilization": []}, "placement.gpu_memory_utilization", "non-empty list"),
    ({"gpu_memory_utilization": 0.5}, "placement.gpu_memory_utilization", "non-empty list"),
    ({"max_num_seqs": [0]}, "placement.max_num_seqs[0]", "must be a positive integer, got 0"),
    ({"max_num_seqs": [8, -2]}, "placement.max_num_seqs[1]", "must be a positive integer"),
    (
        {"pin": {"actor.generate": {"gpu_memory_utilization": 1.5}}},
        "placement.pin.actor.generate.gpu_memory_utilization",
        "must be a number in (0, 1], got 1.5",
    ),
    (
        {"pin": {"actor.generate": {"max_num_seqs": 0}}},
        "placement.pin.actor.generate.max_num_seqs",
        "must be a positive integer, got 0",
    ),
]


@pytest.mark.parametrize(("change", "field", "words"), BAD_PLACEMENT)
def test_bad_rollout_placement_is_one_line_exit_2(cli, tmp_path, change, field, words):
    data = read_yaml_file(TINY_DPO)
    data["placement"].update(change)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = cli("check", path)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ")
    assert words in lines[0]
    if field.endswith("]") and "gpu_memory_utilization" in field:
        assert "must be a number in (0, 1]" in lines[0]


BAD_PLAN = [
    ({"gpu_memory_utilization": 0, "max_num_seqs": 8}, "gpu_memory_utilization", "got 0"),
    ({"gpu_memory_utilization": 1.2, "max_num_seqs": 8}, "gpu_memory_utilization", "got 1.2"),
    ({"gpu_memory_utilization": "0.5", "max_num_seqs": 8}, "gpu_memory_utilization", "'0.5'"),
    ({"gpu_memory_utilization": 0.5, "max_num_seqs": 0}, "max_num_seqs", "got 0"),
    ({"gpu_memory_utilization": 0.5, "max_num_seqs": -1}, "max_num_seqs", "got -1"),
    ({"concurrency": 0}, "concurrency", "got 0"),
]


@pytest.mark.parametrize(("fields", "field", "words"), BAD_PLAN)
def test_bad_rollout_plan_fields_are_one_line_exit_2(cli, tmp_path, fields, field, words):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_tiny_plan(**fields)), encoding="utf-8")
    code, out, err = cli("simulate", TINY_DPO, plan)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: plan.vertices.actor.generate.{field}: ")
    assert words in lines[0]
