"""Plausibility limits of the numeric instance fields.

Every number of an instance must be finite and lie within the physical range
below; values outside are refused (exit 2) with the field, the value and the
limit named. The ranges are wide (an order of magnitude or more around any
hardware or model that exists) and keep every computation bounded: a cluster
of at most :data:`MAX_GPUS` GPUs, at most :data:`MAX_K_EVAL` unrolled steps,
short candidate lists. The README's "Input limits" lists the same table.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rlplan.rpeg.errors import InstanceError


@dataclass(frozen=True)
class Range:
    """Closed interval ``[low, high]`` a field must lie in, and why.

    Attributes
    ----------
    low, high
        The bounds (inclusive).
    unit
        What the number counts, in a few words (shown in the error line).
    """

    low: float
    high: float
    unit: str


#: Largest cluster: racks x nodes_per_rack x gpus_per_node.
MAX_GPUS = 4096
#: Most GPU pools of one cluster (``hardware.pools``): a pool per GPU type.
MAX_POOLS = 16
#: Most steps a plan is evaluated over.
MAX_K_EVAL = 64
#: Most entries of a candidate list (micro-batches, max_num_seqs, staleness,
#: strategy choices): the defaults have 2 to 11; the plan space, and so the
#: time of ``check``, grows with their product.
MAX_LIST_ITEMS = 16
#: Most points of ``workload.gen_quantiles``.
MAX_QUANTILES = 64
#: Largest seed (CP-SAT and HiGHS take a signed 32-bit seed).
MAX_SEED = 2**31 - 1
#: Most worker threads of an exact solver.
MAX_THREADS = 1024
#: Longest time limit in seconds (a week).
MAX_TIME_LIMIT = 7 * 24 * 3600.0

#: Field (indices written ``[]``, model roles written ``*``) -> its range.
LIMITS: dict[str, Range] = {
    # Cluster shape: a node holds up to 256 GPUs (the largest NVLink domains,
    # e.g. GH200 NVL256); racks and nodes up to 1024; the product is capped below.
    "hardware.racks": Range(1, 1024, "racks"),
    "hardware.nodes_per_rack": Range(1, 1024, "nodes per rack"),
    "hardware.gpus_per_node": Range(1, 256, "GPUs per node"),
    # Per-GPU figures: 1 GFLOP/s to 100 PFLOP/s, 1 MB to 10 TB, 1 MB/s to 1 PB/s
    # (the low ends admit the small hand-checkable instances of the tests).
    "hardware.flops_per_gpu": Range(1e9, 1e17, "FLOP/s"),
    "hardware.memory_per_gpu": Range(1e6, 1e13, "bytes"),
    "hardware.memory_reserve_bytes": Range(0, 1e13, "bytes"),
    "hardware.memory_bandwidth": Range(1e6, 1e15, "bytes/s"),
    # Latencies up to one second; bandwidths (or their inverse) from 1 MB/s to 10 PB/s.
    "hardware.alpha_*": Range(0, 1, "seconds"),
    "hardware.beta_*": Range(1e6, 1e16, "bytes/s"),
    "hardware.host_bandwidth": Range(1e6, 1e16, "bytes/s"),
    "hardware.host_to_device_pinned": Range(1e6, 1e16, "bytes/s"),
    "hardware.host_to_device_pageable": Range(1e6, 1e16, "bytes/s"),
    "hardware.device_to_host_pinned": Range(1e6, 1e16, "bytes/s"),
    "hardware.device_to_host_pageable": Range(1e6, 1e16, "bytes/s"),
    # Host memory of a node: 1 MB (hand-checkable tests) to 1 PB (no server comes near:
    # the largest hold tens of TB).
    "hardware.host_memory_per_node": Range(1e6, 1e15, "bytes"),
    "hardware.gemm_m_half": Range(0, 1e7, "tokens"),
    "hardware.gemm_k_half": Range(0, 1e7, "elements"),
    "hardware.non_gemm_constant": Range(0, 1, "seconds"),
    "hardware.non_gemm_scaling": Range(0, 1e3, "seconds"),
    "hardware.non_gemm_batch_cal": Range(1e-3, 1e7, "sequences"),
    "hardware.decode_step_overhead": Range(0, 1, "seconds"),
    "hardware.non_gemm_ratio": Range(0, 100, "seconds per GEMM second"),
    "hardware.eager_layer_overhead": Range(0, 0.1, "seconds per layer"),
    # The busiest GPU of an expert-parallel group: at least the mean; published
    # measurements span 1.11 to 2.56 (rlplan/rpeg/schema/hardware.py).
    "hardware.moe_imbalance": Range(1, 100, "times the mean routed tokens"),
    "hardware.moe_expert_overhead": Range(0, 1, "seconds per expert held, MoE layer and pass"),
    # GPU pools (hardware.pools): a price per GPU-hour up to 10,000 (cloud
    # list prices of one GPU are a few units of any currency), and the link
    # between pools ranged as the cluster's own links.
    "hardware.pools[].price_per_gpu_hour": Range(0, 1e4, "price per GPU-hour"),
    "hardware.inter_pool.alpha_p2p": Range(0, 1, "seconds"),
    "hardware.inter_pool.beta_p2p": Range(1e6, 1e16, "bytes/s"),
    # Transformer shapes: up to 1024 layers, a hidden size of 131,072, a
    # feed-forward size of 1,048,576, a 10-million-token vocabulary.
    "model.layers": Range(1, 1024, "layers"),
    "model.hidden_dim": Range(1, 131072, "elements"),
    "model.ffn_dim": Range(1, 1048576, "elements"),
    "model.vocab_size": Range(1, 10_000_000, "tokens"),
    "model.head_dim": Range(1, 4096, "elements"),
    "model.kv_heads": Range(1, 4096, "heads"),
    "model.attention_heads": Range(1, 4096, "heads"),
    # Mixtures of experts: up to 4,096 routed experts (DeepSeek-V3 and Kimi-K2
    # have 256 and 384) and multi-head latent attention ranks up to 65,536.
    "model.experts": Range(1, 4096, "experts"),
    "model.experts_per_token": Range(1, 4096, "experts"),
    "model.expert_ffn_dim": Range(1, 1048576, "elements"),
    "model.shared_experts": Range(0, 4096, "experts"),
    "model.shared_expert_ffn_dim": Range(1, 1048576, "elements"),
    "model.dense_layers": Range(0, 1024, "layers"),
    "model.q_lora_rank": Range(1, 65536, "elements"),
    "model.kv_lora_rank": Range(1, 65536, "elements"),
    "model.qk_rope_head_dim": Range(1, 4096, "elements"),
    "model.qk_nope_head_dim": Range(1, 4096, "elements"),
    "model.v_head_dim": Range(1, 4096, "elements"),
    # A rule reward (models.reward, kind rule): up to an hour per sample (a
    # sandboxed test suite) and 65,536 workers.
    "model.seconds_per_sample": Range(0, 3600, "seconds per sample"),
    "model.workers": Range(1, 65536, "workers"),
    # Workload: up to a million prompts, 1024 samples each, a million-token
    # prompt and 131,072 generated tokens (the cost of a rollout grows with it).
    "workload.batch_size": Range(1, 1_000_000, "prompts"),
    "workload.samples_per_prompt": Range(1, 1024, "samples"),
    "workload.context_length": Range(1, 1_000_000, "tokens"),
    "workload.generation_length": Range(1, 131_072, "tokens"),
    "workload.gen_quantiles[][]": Range(1, 131_072, "tokens"),  # the lengths
    # Optimizer steps per RL step: published recipes take 1 to 16 (it must also divide B*K).
    "workload.optimizer_steps": Range(1, 65536, "optimizer steps"),
    # Search horizon and knobs.
    "optimizer.k_eval": Range(1, MAX_K_EVAL, "steps"),
    "optimizer.e_max": Range(1, 1e9, "evaluations"),
    "optimizer.e_struct": Range(1, 1e9, "evaluations"),
    "optimizer.k_x": Range(1, 1000, "candidates"),
    "optimizer.stag_window": Range(1, 1e9, "steps"),
    "optimizer.t_max": Range(1, 1e9, "iterations"),
    "optimizer.t_init": Range(0, 1e3, "temperature"),
    "optimizer.t_warm": Range(0, 1e3, "temperature"),
    "optimizer.t_min": Range(0, 1e3, "temperature"),
    "optimizer.score_eps": Range(0, 1, "relative score"),
    "optimizer.lambda_ac": Range(0, 1e3, "weight"),
    "optimizer.lambda_stale": Range(0, 1e3, "weight"),
    "optimizer.max_throughput_loss": Range(0, 1, "fraction"),
    "optimizer.staleness_candidates.*[]": Range(0, MAX_K_EVAL, "steps"),
    # Plan space: blocks up to the largest cluster, micro-batches and the rollout's
    # max_num_seqs (also under its old name, concurrency) up to 65,536.
    # gpu_memory_utilization is a fraction in (0, 1], checked where it is read.
    "placement.min_block_gpus": Range(1, MAX_GPUS, "GPUs"),
    "placement.microbatches[]": Range(1, 65536, "micro-batches"),
    "placement.micro_batch_sizes[]": Range(1, 65536, "sequences"),
    "placement.max_num_seqs[]": Range(1, 65536, "sequences"),
    # Expert, expert tensor and context parallel degrees up to 4,096 GPUs.
    "placement.expert_parallel[]": Range(1, 4096, "GPUs"),
    "placement.expert_tensor_parallel[]": Range(1, 4096, "GPUs"),
    "placement.context_parallel[]": Range(1, 4096, "GPUs"),
    "placement.concurrency[]": Range(1, 65536, "sequences"),
    "placement.pin.*.dp": Range(1, MAX_GPUS, "replicas"),
    "placement.pin.*.pp": Range(1, MAX_GPUS, "stages"),
    "placement.pin.*.tp": Range(1, 256, "GPUs"),
    "placement.pin.*.microbatches": Range(1, 65536, "micro-batches"),
    "placement.pin.*.max_num_seqs": Range(1, 65536, "sequences"),
    "placement.pin.*.ep": Range(1, 4096, "GPUs"),
    "placement.pin.*.etp": Range(1, 4096, "GPUs"),
    "placement.pin.*.cp": Range(1, 4096, "GPUs"),
    "placement.pin.staleness.*": Range(0, MAX_K_EVAL, "steps"),
    "engine.rollout_workspace": Range(0, 1e13, "bytes"),
    # solver.*: the rules of rlplan.rpeg.schema.solver_options (shared with the API and flags).
    "reference.step_time_s": Range(1e-6, 1e7, "seconds"),
    "reference.phases.*.measured_s": Range(1e-6, 1e7, "seconds"),
}

_MODEL_FIELDS = (
    "layers",
    "hidden_dim",
    "ffn_dim",
    "vocab_size",
    "head_dim",
    "kv_heads",
    "attention_heads",
    "experts",
    "experts_per_token",
    "expert_ffn_dim",
    "shared_experts",
    "shared_expert_ffn_dim",
    "dense_layers",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
)
_INDEX = re.compile(r"\[\d+\]")


def limit_key(path: str) -> str:
    """The :data:`LIMITS` key of a field path (``models.actor.layers`` -> ``model.layers``).

    Parameters
    ----------
    path
        A field path as error lines name it.

    Returns
    -------
    str
        The path with list indices as ``[]``, model roles, pinned vertices,
        staleness models and phase names as ``*``, and the
        ``alpha_*``/``beta_*`` communication fields grouped.
    """
    key = _INDEX.sub("[]", path)
    parts = key.split(".")
    if parts[0] == "models" and len(parts) >= 3:
        return "model." + ".".join(parts[2:])
    if len(parts) == 1 and parts[0] in _MODEL_FIELDS:
        return "model." + parts[0]
    pooled = parts[:2] == ["hardware", "pools[]"] and len(parts) == 3
    if pooled and parts[2] != "price_per_gpu_hour":
        # A pool's hardware field has the range of the one-type section's.
        return limit_key(f"hardware.{parts[2]}")
    if parts[0] == "hardware" and len(parts) == 2:
        for prefix in ("alpha_", "beta_"):
            if parts[1].startswith(prefix):
                return f"hardware.{prefix}*"
    if parts[0] == "optimizer" and len(parts) == 3 and parts[1] == "staleness_candidates":
        return "optimizer.staleness_candidates.*" + ("[]" if parts[2].endswith("[]") else "")
    if parts[:2] == ["placement", "pin"] and len(parts) >= 4:
        # Vertex names hold a dot (placement.pin.actor.train.tp).
        if parts[2] == "staleness":
            return "placement.pin.staleness.*"
        return f"placement.pin.*.{parts[-1]}"
    if parts[:2] == ["reference", "phases"] and len(parts) == 4:
        return f"reference.phases.*.{parts[3]}"
    return key


def _shown(value: float) -> str:
    """``value`` in a dozen characters at most (``1e+30``, ``4096``, ``2.5e-09``)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if abs(value) < 10**12 else f"{float(value):.3g}"
    return f"{value:.4g}"


def check_range(value: float, path: str, shown: str | None = None) -> None:
    """Refuse a finite ``value`` outside the plausible range of field ``path``.

    Fields without an entry in :data:`LIMITS` are not checked here (their
    readers check their own domain).

    Parameters
    ----------
    value
        The number as read.
    path
        Its field path.
    shown
        How to show the value when it was given in another form (a
        bandwidth given as its inverse).

    Raises
    ------
    InstanceError
        Naming the field, the value and the range.
    """
    limit = LIMITS.get(limit_key(path))
    if limit is None:
        return
    if not (isinstance(value, int) or math.isfinite(value)):
        raise InstanceError(path, f"must be a finite number, got {value}")
    if not limit.low <= value <= limit.high:
        raise InstanceError(
            path,
            f"{shown or _shown(value)} is outside the plausible range {_shown(limit.low)} to "
            f"{_shown(limit.high)} ({limit.unit}; see the README's input limits)",
        )


def check_list_size(values: list | tuple, path: str, limit: int = MAX_LIST_ITEMS) -> None:
    """Refuse a list of more than ``limit`` entries, naming the field and the limit."""
    if len(values) > limit:
        raise InstanceError(
            path, f"has {len(values)} entries, more than the limit of {limit} (see the README)"
        )


def check_cluster_size(racks: int, nodes_per_rack: int, gpus_per_node: int) -> None:
    """Refuse a cluster of more than :data:`MAX_GPUS` GPUs."""
    total = racks * nodes_per_rack * gpus_per_node
    if total > MAX_GPUS:
        raise InstanceError(
            "hardware",
            f"{racks} x {nodes_per_rack} x {gpus_per_node} = {total} GPUs is more than the "
            f"limit of {MAX_GPUS} GPUs (see the README's input limits)",
        )
