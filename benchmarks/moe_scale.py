"""Plan-space size and build time on 256 GPUs with a DeepSeek-V3-shaped model:
``python -m benchmarks.moe_scale [--limit 5] [--node-blocks aligned|any]``.

The instance: 32 nodes of 8 H100 (the ``h100`` hardware preset), GRPO with 32
prompts x 16 samples, 105 prompt tokens and up to 1,431 generated, a rule
reward, ``placement.min_block_gpus`` 8 and the default plan-space lists (ep up to
256, etp up to 8). Its one rack of 32 nodes takes ``placement.node_blocks``
aligned unless ``--node-blocks any`` is given: the expert layouts are what the
benchmark watches, and every run of nodes (the instance format's default) makes
32 shapes of the 6, about five times the build time and 22 times the
assignments (docs/plan-space.md#devices-and-blocks). The model's fields are
written out (the MoE presets are not in the code base yet): DeepSeek-V3's
config.json (deepseek-ai/DeepSeek-V3 on Hugging Face): 61 layers, hidden
7168, intermediate 18432, vocabulary 129280, 128 heads, MLA with q_lora_rank
1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim
128; 256 routed experts of 2048, top 8, one shared expert,
first_k_dense_replace 3.

It prints:

* the strategies the rules would test by product-then-filter (every
  combination of every dimension's values, tp, pp and micro-batch count) and
  those :func:`~rlplan.rpeg.model.enumeration.enumerate_strategies` generates;
* the candidates that fit in memory and start (before dominance pruning) and
  those kept after it;
* the enumeration and directory build times (wall and CPU);
* the wall and CPU time of ``rlplan check`` in a fresh process.

Exits 1 when the check takes longer than ``--limit`` seconds of wall time. The
machine may be shared: compare the CPU time, and rerun before trusting a slow row.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from math import prod

from rlplan.rpeg.model.candidates import CandidateDirectory, dimension_values
from rlplan.rpeg.model.enumeration import enumerate_strategies
from rlplan.rpeg.schema.instance import Instance, parse_instance
from rlplan.rpeg.strategy import dimensions_of
from rlplan.rpeg.templates import Kind

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json): the fields the brief of this
#: benchmark fixes, written by hand until the deepseek-v3 preset exists.
DEEPSEEK_V3 = {
    "layers": 61,
    "hidden_dim": 7168,
    "ffn_dim": 18432,
    "vocab_size": 129280,
    "head_dim": 128,
    "attention_heads": 128,
    "attention": "mla",
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "experts": 256,
    "experts_per_token": 8,
    "expert_ffn_dim": 2048,
    "shared_experts": 1,
    "dense_layers": 3,
}


def document(node_blocks: str = "aligned") -> dict:
    """The 256-GPU DeepSeek-V3-shaped GRPO instance as a YAML (JSON) document."""
    return {
        "hardware": {"preset": "h100", "racks": 1, "nodes_per_rack": 32, "gpus_per_node": 8},
        "models": {
            "actor": dict(DEEPSEEK_V3),
            "reward": {"kind": "rule", "seconds_per_sample": 0.02, "workers": 8},
        },
        "workload": {
            "batch_size": 32,
            "samples_per_prompt": 16,
            "context_length": 105,
            "generation_length": 1431,
        },
        "policy": {"algorithm": "grpo"},
        "optimizer": {"k_eval": 2, "staleness_candidates": {"actor": [0, 1]}},
        "placement": {"min_block_gpus": 8, "node_blocks": node_blocks},
    }


def product_size(instance: Instance, directory: CandidateDirectory) -> int:
    """Strategies product-then-filter would test: every dimension's values x tp x pp x counts."""
    total = 0
    sequences = instance.workload.sequences
    for vertex in directory.template.vertices:
        values = prod(
            len(dimension_values(instance, vertex, d)) for d in dimensions_of(vertex.kind)
        )
        for shape in directory.cluster.shapes:
            if shape not in directory.allowed[directory.template.index(vertex.name)]:
                continue
            size = prod(shape)
            for tp in (2**i for i in range(size.bit_length()) if size % 2**i == 0):
                for pp in range(1, size // tp + 1):
                    if (size // tp) % pp:
                        continue
                    dp = size // (tp * pp)
                    replica = -(-sequences // dp)
                    counts = (
                        1
                        if vertex.kind is Kind.GENERATE
                        else len(instance.placement.microbatch_counts(replica))
                    )
                    total += values * counts
    return total


def timed(function):
    """``function()``, its wall and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = function()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def run_check(path: str) -> tuple[int, float, float]:
    """``rlplan check path`` in a new process: exit code, wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-m", "rlplan", "check", path], capture_output=True, env=env, check=False
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done.returncode, wall, cpu


def main(argv: list[str] | None = None) -> int:
    """Print the sizes and times; 1 when the check exceeds ``--limit`` seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=5.0, help="check wall-time limit (s)")
    parser.add_argument(
        "--node-blocks", choices=("aligned", "any"), default="aligned", help="placement.node_blocks"
    )
    args = parser.parse_args(argv)
    instance = parse_instance(document(args.node_blocks), "deepseek_v3_256_h100")
    directory, build_wall, build_cpu = timed(lambda: CandidateDirectory(instance))

    def enumerate_all() -> int:
        return sum(
            len(enumerate_strategies(instance, vertex, shape))
            for index, vertex in enumerate(directory.template.vertices)
            for shape in directory.allowed[index]
        )

    generated, enumerate_wall, enumerate_cpu = timed(enumerate_all)
    cluster = directory.cluster
    rows = [
        f"instance        {instance.name}: {instance.hardware.num_gpus} GPUs, "
        f"{len(cluster.blocks)} blocks, {len(cluster.shapes)} shapes",
        f"product         {product_size(instance, directory):,} strategies "
        "product-then-filter would test",
        f"enumerated      {generated:,} valid strategies generated "
        f"({enumerate_wall:.2f} s wall, {enumerate_cpu:.2f} s CPU)",
        f"before pruning  {directory.fitting:,} fit in memory and start "
        f"({directory.refused:,} rollouts refused)",
        f"after pruning   {directory.size:,} candidates kept, "
        f"{directory.assignment_count():,} (vertex, block, strategy) assignments",
        f"directory       {build_wall:.2f} s wall, {build_cpu:.2f} s CPU",
    ]
    print("\n".join(rows))
    with tempfile.TemporaryDirectory(prefix="moe-scale-") as folder:
        path = os.path.join(folder, "deepseek_v3_256_h100.yaml")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document(args.node_blocks), handle)
        code, wall, cpu = run_check(path)
    print(
        f"rlplan check    exit {code}, {wall:.2f} s wall, {cpu:.2f} s CPU (limit {args.limit:g} s)"
    )
    return 0 if code == 0 and wall <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
