"""Exports of a plan on two GPU pools: each role's node counts are its own pool's.

The plans are the full-space optima of tests/data/tiny_two_pools_grpo.yaml
and of two variants written here: rollout on pool ``wide``, training on pool
``fast`` (tests/solvers/test_pools_exact.py derives why). In the variant
``narrow`` pool ``wide`` is 2 nodes of 1 GPU, so its shape differs from pool 0's
(1 node of 2 GPUs): a key read from pool 0 instead of the rollout's pool shows.
``narrow_logprobs`` adds old log-probs (actor.infer) and vLLM's default
max_num_seqs, which OpenRLHF needs. Each export must set every role's nodes
and GPUs per node from its block, and name each role's pool and GPU type in a
comment line, since no framework pins a role to a GPU type by a setting.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplan.outputs.frameworks import export_config, framework_settings
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan
from rlplan.solvers import exhaustive
from rlplan.solvers.options import SolveOptions

TWO_POOLS = Path(__file__).resolve().parent.parent / "data" / "tiny_two_pools_grpo.yaml"
#: The variants: text replacements of the two-pool instance.
VARIANTS: dict[str, tuple[tuple[str, str], ...]] = {
    "two_pools": (),
    "narrow": (
        (
            "      name: wide\n",
            "      name: wide\n      nodes_per_rack: 2\n      gpus_per_node: 1\n",
        ),
    ),
}
VARIANTS["narrow_logprobs"] = VARIANTS["narrow"] + (
    ("recompute_logprobs: false", "recompute_logprobs: true"),
    ("max_num_seqs: [256]", "max_num_seqs: [128]"),
    (
        "    actor.train: {dp: 2, tp: 1}",
        "    actor.train: {dp: 2, tp: 1}\n    actor.infer: {dp: 2, tp: 1}",
    ),
)
FAST = "pool fast (400 TFLOP/s, 24 GB)"
WIDE = "pool wide (100 TFLOP/s, 24 GB)"


@functools.cache
def solved(variant: str, folder: str) -> tuple[Problem, Plan]:
    """The variant's problem and its full-space optimum (rollout on wide, training on fast)."""
    text = TWO_POOLS.read_text(encoding="utf-8")
    for old, new in VARIANTS[variant]:
        assert old in text
        text = text.replace(old, new)
    path = Path(folder) / f"{variant}.yaml"
    path.write_text(text, encoding="utf-8")
    problem = Problem.load(str(path))
    plan = exhaustive.solve(problem, SolveOptions(time_limit=60, threads=1, seed=0)).plan
    cluster = problem.directory.cluster
    names = problem.directory.template.names
    pools = {n: cluster.pool_name(p.block) for n, p in zip(names, plan.placements, strict=True)}
    assert pools["actor.generate"] == "wide" and pools["actor.train"] == "fast"
    return problem, plan


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("pools"))


def exported(folder: str, variant: str, framework: str) -> tuple[dict[str, Any], list[str]]:
    """The keys set and the comment lines of the variant's plan exported for ``framework``."""
    problem, plan = solved(variant, folder)
    export_config(problem, plan, framework, "plan.json")  # refuses a plan the framework can't run
    settings = framework_settings(problem, plan, framework, "plan.json")
    keys = {key: value for kind, key, value in settings.items if kind == "set"}
    comments = [text for kind, text, _ in settings.items if kind == "comment"]
    return keys, comments


def one(comments: list[str], words: str) -> str:
    """The one comment line holding ``words``."""
    found = [line for line in comments if words in line]
    assert len(found) == 1, (words, comments)
    return found[0]


def test_verl_resource_pools_take_each_role_s_pool(folder):
    keys, comments = exported(folder, "narrow", "verl")
    # The global pool is actor.train's block (fast: 1 node of 2), the rollout pool the
    # rollout's (wide: 2 nodes of 1 GPU), apart: separate_async.
    assert keys["trainer.nnodes"] == 1 and keys["trainer.n_gpus_per_node"] == 2
    assert keys["trainer.v1.trainer_mode"] == "separate_async"
    assert keys["actor_rollout_ref.hybrid_engine"] == "false"
    assert keys["actor_rollout_ref.rollout.nnodes"] == 2
    assert keys["actor_rollout_ref.rollout.n_gpus_per_node"] == 1
    line = one(comments, "resource pools by GPU pool")
    assert line.endswith(f"global pool on {FAST}, rollout pool on {WIDE}")
    line = one(comments, "verl cannot pin a resource pool to a GPU type")
    assert "volcengine/verl b178a3cd" in line
    assert 'the rollout pool\'s RayResourcePool with accelerator_type="wide"' in line
    assert "PR #7531" in one(comments, "accelerator_resource_key")
    assert "pools fast 1 x 1 x 2 (400 TFLOP/s, 24 GB), wide 1 x 2 x 1" in comments[0]


def test_nemo_rl_cluster_is_the_plan_s_nodes_over_both_pools(folder):
    keys, comments = exported(folder, "two_pools", "nemo-rl")
    # Generation apart on pool wide's node, training on pool fast's: NeMo RL's cluster is
    # 2 nodes of 2 GPUs, of which generation takes 1 (colocated.resources) and the policy
    # the other; no "not expressible" line about the policy's GPUs.
    assert keys["cluster.num_nodes"] == 2 and keys["cluster.gpus_per_node"] == 2
    assert keys["policy.generation.colocated.enabled"] is False
    assert keys["policy.generation.colocated.resources.num_nodes"] == 1
    assert keys["policy.generation.colocated.resources.gpus_per_node"] == 2
    assert not [line for line in comments if line.startswith("not expressible")]
    line = one(comments, "NeMo RL cannot pin a role to a GPU type")
    assert line.startswith(f"training (the policy's train cluster) on {FAST}, generation on {WIDE}")
    assert "NVIDIA-NeMo/RL v0.7.0 81aa43dd" in line
    text = export_config(*solved("two_pools", folder), "nemo-rl", "plan.json")
    assert yaml.safe_load(text)["cluster"] == {"num_nodes": 2, "gpus_per_node": 2}


def test_nemo_rl_refuses_pools_of_two_node_widths(folder):
    problem, plan = solved("narrow", folder)
    with pytest.raises(
        PlanError,
        match=r"actor\.train on 2 GPUs per node and actor\.generate on 1 breaks NeMo RL rule",
    ):
        export_config(problem, plan, "nemo-rl", "plan.json")


def test_slime_slots_follow_each_role_s_pool(folder):
    keys, comments = exported(folder, "narrow", "slime")
    # Actor on fast (1 node x 2), rollout on wide: 2 GPUs of 1 per node, not colocated.
    assert keys["--actor-num-nodes"] == 1 and keys["--actor-num-gpus-per-node"] == 2
    assert keys["--rollout-num-gpus"] == 2 and keys["--num-gpus-per-node"] == 1
    assert "--colocate" not in keys
    line = one(comments, "slime cannot pin a role to a GPU type")
    assert line.startswith(f"training (the actor) on {FAST}, the rollout on {WIDE}")
    assert "THUDM/slime v0.3.1 a6272da0" in line
    assert line.endswith("IP addresses rising pool by pool in the order fast, wide")
    assert "the plan uses 4 of its GPUs" in one(comments, "cluster: the nodes of pools")


def test_openrlhf_groups_take_each_role_s_pool(folder):
    keys, comments = exported(folder, "narrow_logprobs", "openrlhf")
    # The actor group (actor.train and actor.infer) on fast: 1 node of 2; two vLLM engines
    # of tp 1 on wide; no colocation flag.
    assert keys["--actor.num_nodes"] == 1 and keys["--actor.num_gpus_per_node"] == 2
    assert keys["--vllm.num_engines"] == 2 and keys["--vllm.tensor_parallel_size"] == 1
    assert "--train.colocate_all" not in keys
    line = one(comments, "OpenRLHF cannot pin a group to a GPU type")
    assert line.startswith(f"the vLLM engines on {WIDE}, the actor group on {FAST}")
    assert "OpenRLHF/OpenRLHF v0.11.0 3c3be623" in line
