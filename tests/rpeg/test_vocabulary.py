"""Plans in framework vocabulary (docs/outputs.md), checked against hand computations.

The instance is defined here (not read from ``instances/``) so that the
numbers below stay fixed: GRPO on one node of 4 GPUs, two tiny models
(2 layers, d=64, f=128, h=16, kv=2, V=256), 9 sequences per step of
4 prompt + 4 generated tokens.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from rlplan.outputs.vocabulary import framework_markdown, framework_view, staleness_words
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.schema.instance import parse_instance

_LINK = {"alpha": 0.0, "beta": 1e9}
_MODEL = {
    "layers": 2,
    "hidden_dim": 64,
    "ffn_dim": 128,
    "vocab_size": 256,
    "head_dim": 16,
    "kv_heads": 2,
}

#: GRPO on 1 x 1 x 4 GPUs of 100 MB each; rollout workspace 1 MB.
INSTANCE: dict[str, Any] = {
    "hardware": {
        "racks": 1,
        "nodes_per_rack": 1,
        "gpus_per_node": 4,
        "flops_per_gpu": 1e12,
        "memory_per_gpu": 1e8,
        "memory_reserve_bytes": 0,
        "memory_bandwidth": 1e9,
        **{
            f"{kind}_{family}_{level}": _LINK[kind]
            for kind in ("alpha", "beta")
            for family in ("coll", "p2p")
            for level in "gnr"
        },
        "gemm_m_half": 5.0,
        "gemm_k_half": 0.0,
        "decode_bw_eff": 0.5,
        "non_gemm_constant": 0.0,
        "non_gemm_scaling": 0.0,
    },
    "models": {"actor": dict(_MODEL), "reward": dict(_MODEL)},
    "workload": {
        "batch_size": 3,
        "samples_per_prompt": 3,
        "context_length": 4,
        "generation_length": 4,
    },
    "engine": {"rollout_workspace": 1e6},
    "policy": {"algorithm": "grpo"},
    "optimizer": {"k_eval": 1},
    "placement": {"min_block_gpus": 1},
}

#: Bytes of one GPU.
MEMORY_PER_GPU = 1e8


def _problem(k_eval: int = 1) -> Problem:
    data = copy.deepcopy(INSTANCE)
    data["optimizer"]["k_eval"] = k_eval
    return Problem.from_instance(parse_instance(data, name="vocabulary"))


def _block(problem: Problem, first: int, size: int):
    return problem.directory.cluster.block_index[((0, 0, first), (1, 1, size))]


def _plan(problem: Problem, layout: dict[str, tuple[int, int, Strategy]], staleness: int) -> Plan:
    """A plan from ``{vertex: (first GPU, GPU count, strategy)}``."""
    placements = []
    for vertex in problem.directory.template.vertices:
        first, size, strategy = layout[vertex.name]
        placements.append(Placement(_block(problem, first, size), strategy))
    return Plan(tuple(placements), make_staleness({"actor": staleness}))


#: Actor vertices on GPUs 0-1 (one block), reference on GPU 2, reward on GPU 3.
SPLIT = {
    "actor.generate": (0, 2, Strategy(1, 1, 2, gpu_memory_utilization=0.5, max_num_seqs=32)),
    "actor.infer": (0, 2, Strategy(2, 1, 1, microbatches=1)),
    "actor.train": (0, 2, Strategy(2, 1, 1, 2, recompute="full", sharding="zero3")),
    "reference.infer": (2, 1, Strategy(1, 1, 1, microbatches=2)),
    "reward.infer": (3, 1, Strategy(1, 1, 1, microbatches=4, offload=True)),
}


@pytest.fixture(scope="module")
def split_view() -> tuple[Problem, Plan, dict[str, Any]]:
    problem = _problem()
    plan = _plan(problem, SPLIT, staleness=0)
    return problem, plan, framework_view(problem, plan)


def test_micro_batch_size_per_gpu_in_sequences_and_tokens(split_view):
    """ceil(ceil(B*K/dp) / microbatches) sequences; tokens at E[S+T] = 4 + 4 = 8 each."""
    _, _, view = split_view
    vertices = view["vertices"]
    assert view["sequences_per_step"] == 9  # B*K = 3*3
    assert view["tokens_per_sequence"] == 8.0  # S + E[T] = 4 + 4 (no gen_quantiles)
    # actor.train: dp 2, 2 microbatches: ceil(ceil(9/2)/2) = ceil(5/2) = 3 sequences, 24 tokens.
    train = vertices["actor.train"]
    assert train["sequences_per_replica"] == 5
    assert (train["micro_batch_size_per_gpu"], train["micro_batch_tokens_per_gpu"]) == (3, 24.0)
    # actor.infer: dp 2, 1 microbatch: ceil(ceil(9/2)/1) = 5 sequences, 40 tokens.
    infer = vertices["actor.infer"]
    assert (infer["micro_batch_size_per_gpu"], infer["micro_batch_tokens_per_gpu"]) == (5, 40.0)
    # reference.infer: dp 1, 2 microbatches: ceil(ceil(9/1)/2) = ceil(9/2) = 5 sequences.
    assert vertices["reference.infer"]["micro_batch_size_per_gpu"] == 5
    # reward.infer: dp 1, 4 microbatches: ceil(9/4) = 3 sequences, 24 tokens.
    reward = vertices["reward.infer"]
    assert (reward["micro_batch_size_per_gpu"], reward["micro_batch_tokens_per_gpu"]) == (3, 24.0)
    assert "micro_batch_size_per_gpu" not in vertices["actor.generate"]


def test_rollout_memory_and_effective_concurrency_by_hand(split_view):
    """The plan's gpu_memory_utilization 0.5 and max_num_seqs 32 on tp 2; the KV pool is
    what 0.5 x 100 MB leaves after weights and workspace, and holds every sequence."""
    _, _, view = split_view
    rollout = view["vertices"]["actor.generate"]
    # Parameters: a layer is d(d + 2*kv*h) + d*d + 3*d*f = 64*128 + 4096 + 3*64*128 = 36864;
    # P = 2*36864 + V*d (embedding) + V*d (head) = 73728 + 16384 + 16384 = 106496.
    # Weights per GPU at tp 2: 2*P/2 = 106496 bytes.
    weights = 106496.0
    workspace = 1e6
    # KV pool: 0.5 * 1e8 - 106496 - 1e6 = 48_893_504 bytes.
    pool = 48_893_504.0
    assert rollout["rollout_memory_bytes"] == {
        "weights": weights,
        "kv_pool": pool,
        "workspace": workspace,
    }
    # KV per token over 2 layers at tp 2: 2*2*kv*h*2 / min(tp, kv) = 2*2*2*16*2/2 = 128
    # bytes: 48_893_504 / 128 = 381_980.5 tokens -> 381_980.
    assert rollout["kv_pool_tokens"] == 381_980
    # A live sequence holds S + E[T^2]/(2 E[T]) = 4 + 16/8 = 6 tokens: the pool holds
    # 63_663 of them, so c = min(max_num_seqs 32, the replica's 9 sequences, 63_663) = 9.
    assert rollout["effective_concurrency"] == 9
    assert rollout["gpu_memory_utilization"] == 0.5
    assert rollout["max_num_seqs"] == 32
    assert (rollout["tp"], rollout["pp"], rollout["dp"]) == (2, 1, 1)


def test_train_and_infer_settings_in_framework_words(split_view):
    _, _, view = split_view
    train = view["vertices"]["actor.train"]
    assert train["recompute"] == "full"
    assert train["sharding"] == "zero3"
    assert train["sharding_words"] == "ZeRO-3 / FSDP full shard"
    assert train["offload"] is False
    assert view["vertices"]["reward.infer"]["offload"] is True
    assert "sharding" not in view["vertices"]["reward.infer"]
    assert "offload" not in view["vertices"]["actor.generate"]
    assert view["vertices"]["reference.infer"]["gpus"] == [2]
    assert view["vertices"]["actor.train"]["gpus"] == [0, 1]


def test_colocated_and_concurrent_of_a_split_plan(split_view):
    """The actor shares GPUs 0-1; reference (GPU 2) and reward (GPU 3) run side by side."""
    problem, plan, view = split_view
    assert view["colocated"] == [
        {
            "vertices": ["actor.generate", "actor.infer", "actor.train"],
            "gpus": [0, 1],
            "same_block": True,
            "nested": True,
        }
    ]
    pairs = {tuple(pair["vertices"]): pair["overlap_s"] for pair in view["concurrent"]}
    # Both wait for actor.generate and the same p2p lag (level g), then start together:
    # they overlap for the shorter of their two run times.
    directory = problem.directory
    durations = {
        name: directory.candidate(
            directory.template.index(name),
            plan.placements[directory.template.index(name)].block.shape,
            plan.placements[directory.template.index(name)].strategy,
        ).time
        for name in ("reference.infer", "reward.infer")
    }
    assert pairs[("reference.infer", "reward.infer")] == pytest.approx(min(durations.values()))
    colocated = {"actor.generate", "actor.infer", "actor.train"}
    for first, second in pairs:
        assert not {first, second} <= colocated


def test_one_block_plan_is_one_colocated_group_and_nothing_concurrent():
    problem = _problem()
    layout = {name: (0, 4, strategy) for name, (_, _, strategy) in SPLIT.items()}
    layout["actor.generate"] = (
        0,
        4,
        Strategy(2, 1, 2, gpu_memory_utilization=0.5, max_num_seqs=64),
    )
    layout["actor.infer"] = (0, 4, Strategy(4, 1, 1, microbatches=1))
    layout["actor.train"] = (0, 4, Strategy(4, 1, 1, microbatches=1))
    layout["reference.infer"] = (0, 4, Strategy(4, 1, 1, microbatches=1))
    layout["reward.infer"] = (0, 4, Strategy(4, 1, 1, microbatches=1))
    view = framework_view(problem, _plan(problem, layout, staleness=0))
    assert view["colocated"] == [
        {
            "vertices": list(problem.directory.template.names),
            "gpus": [0, 1, 2, 3],
            "same_block": True,
            "nested": True,
        }
    ]
    assert view["concurrent"] == []


def test_nested_blocks_are_colocated_but_not_one_block():
    """Rollout on GPUs 0-3 and reference on GPU 2 share GPU 2: one group, two blocks."""
    problem = _problem()
    layout = dict(SPLIT)
    layout["actor.generate"] = (
        0,
        4,
        Strategy(2, 1, 2, gpu_memory_utilization=0.5, max_num_seqs=32),
    )
    view = framework_view(problem, _plan(problem, layout, staleness=0))
    assert len(view["colocated"]) == 1
    group = view["colocated"][0]
    assert group["vertices"] == list(problem.directory.template.names)
    assert group["gpus"] == [0, 1, 2, 3]
    assert group["same_block"] is False
    assert group["nested"] is True


def test_staleness_words():
    assert staleness_words(0) == "on-policy (synchronous)"
    assert staleness_words(1) == "one-step off-policy"
    assert staleness_words(2) == "two-step off-policy"
    assert staleness_words(5) == "5-step off-policy"


@pytest.mark.parametrize(
    ("steps", "words", "age"),
    [
        (0, "on-policy (synchronous)", "the latest weights"),
        (1, "one-step off-policy", "weights 1 step old"),
        (2, "two-step off-policy", "weights 2 steps old"),
    ],
)
def test_staleness_of_a_plan_names_the_stale_and_the_synchronous_users(steps, words, age):
    """actor.generate reads weights ``steps`` old; actor.infer always the latest."""
    problem = _problem(k_eval=3)
    view = framework_view(problem, _plan(problem, SPLIT, staleness=steps))
    actor = view["staleness"]["actor"]
    assert actor["steps"] == steps
    assert actor["words"] == words
    assert actor["stale_users"] == ["actor.generate"]
    assert actor["latest_weights_users"] == ["actor.infer"]
    assert actor["detail"] == (
        f"actor.generate uses {age}; actor.infer always uses the latest weights"
    )


def test_view_is_plain_json_and_renders(split_view):
    problem, plan, view = split_view
    assert json.loads(json.dumps(view, allow_nan=False)) == view
    given = framework_view(problem, plan, problem.simulator.simulate(plan))
    assert given == view
    text = "\n".join(framework_markdown(view))
    assert text.startswith("## Framework settings")
    assert "| actor.train | GPUs 0-1 | 1 | 1 | 2 | 3 / 24 (2 microbatches) |" in text
    assert "full activation checkpointing | ZeRO-3 / FSDP full shard | no |" in text
    assert "| actor.generate | GPUs 0-1 | 2 | 1 | 1 | — |" in text
    # gpu_memory_utilization 0.5, max_num_seqs 32, effective concurrency 9 (the replica's
    # sequences, test_rollout_memory_and_effective_concurrency_by_hand)
    assert "| 0.5 | 32 | 9 |" in text
    assert "| 5 / 40 (1 microbatch) |" in text
    assert "- GPUs 0-1: actor.generate, actor.infer, actor.train (one block)" in text
    assert "- reference.infer and reward.infer" in text
    assert "- actor: on-policy (synchronous) (staleness 0)" in text
    assert math.isfinite(view["vertices"]["actor.generate"]["gpu_memory_utilization"])
