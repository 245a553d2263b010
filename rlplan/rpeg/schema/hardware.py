"""The ``hardware`` section: the cluster, its GPUs, links and cost-model knobs.

Fields are declared in :data:`HARDWARE_FIELDS` (:mod:`rlplan.rpeg.schema.fields`);
a ``preset`` key names a GPU of :data:`rlplan.rpeg.schema.presets.GPU_PRESETS`
whose figures fill the fields the section does not give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.checks import check_keys, mapping, positive_float
from rlplan.rpeg.schema.fields import (
    BANDWIDTH,
    FRACTION_OPEN_HIGH,
    FRACTION_OPEN_LOW,
    NONNEGATIVE_FLOAT,
    NUMBER,
    POSITIVE_FLOAT,
    POSITIVE_INT,
    Field,
    check_fields,
    keys,
    read_fields,
)
from rlplan.rpeg.schema.limits import check_cluster_size, check_range
from rlplan.rpeg.schema.presets import HOST_RATE_KEYS, PAGEABLE_SLOWDOWN, expand_hardware

#: Communication levels: inside a node (g), across nodes of a rack (n), across racks (r).
LEVELS = ("g", "n", "r")

# ----------------------------------------------------------------------------
# v2 defaults (docs/cost-model.md); each names its public source.
# ----------------------------------------------------------------------------

#: Ceiling of GEMM efficiency: the largest fraction of the datasheet's dense
#: BF16 peak a large GEMM reaches. Source: S. Bekman, *Machine Learning
#: Engineering*, "Maximum Achievable Matmul FLOPS" table
#: (github.com/stas00/ml-engineering, compute/accelerator/README.md): H100 SXM
#: 794.5 of 989 TFLOP/s (80.3 %), A100 SXM 271.2 of 312 (86.9 %); 0.8 is the
#: H100 figure rounded.
DEFAULT_GEMM_EFFICIENCY = 0.8
#: Host-GPU bandwidth per GPU without a preset: PCIe 4.0 x16, 32 GB/s raw per
#: direction (PCI-SIG PCIe 4.0 specification), 25.13 GB/s host-to-device
#: measured from pinned memory on an A100-SXM4-40GB (NVIDIA/nvbandwidth issue
#: 42) and about 25 GB/s device-to-host (issue 53); the figure the DeepSpeed
#: ZeRO-Offload paper (Ren et al. 2021) uses too. It is the pinned rate of both
#: directions below (``host_bandwidth``, when written, sets all four rates).
DEFAULT_HOST_BANDWIDTH = 25e9
#: Fixed cost of one rollout-engine decode step (scheduling, sampling,
#: detokenisation) and the fraction of HBM bandwidth a decode step reaches.
#: Source: vLLM 0.6.0, Llama-3.1-8B-Instruct on 1 x A100-80G, ShareGPT at 4
#: requests/s: median TPOT 14.14 ms (sgl-project/sglang
#: benchmark/benchmark_vllm_060/README.md). About 7 sequences are in flight,
#: so a step reads 16.1 GB of weights + about 0.3 GB of KV cache; at an
#: achievable 80 % of the 2.039 TB/s HBM (a typical fraction for streaming
#: kernels) that takes 10.0 ms, leaving 4.1 ms of fixed cost per step.
DEFAULT_DECODE_STEP_OVERHEAD = 4e-3
DEFAULT_DECODE_BW_EFF = 0.8
#: Time of non-GEMM kernels (attention, norms, activations, rotary, casts,
#: cross-entropy) per second of GEMM time in train and infer passes and
#: prefill. FITTED, not measured: no public kernel-level breakdown of a 7-8B
#: training step isolates it (the end-to-end MFU figures also hold the
#: communication, bubbles and optimizer the model prices apart, and the one
#: kernel-level study found, Karami et al. 2024, "Understanding the Performance
#: ... of Non-GEMM Operations", arXiv 2404.11788, measures inference and spans
#: 0.18-0.92 across models). The value minimises the squared log errors of the
#: published runs of instances/published/ (``python -m rlplan.compare.calibration``,
#: which also prints each run predicted with the value fitted without it;
#: docs/cost-model.md#fitted-knobs): 0.845 on the five shipped runs (with their
#: recipes' optimizer steps, workload.optimizer_steps), rounded.
DEFAULT_NON_GEMM_RATIO = 0.84
#: Extra seconds per decode step and model layer when the rollout engine runs
#: without CUDA graphs (``engine.cuda_graphs: false``, vLLM ``enforce_eager``):
#: kernel launches from Python. Source: Qwen2.5-Omni-7B thinker (a 28-layer
#: Qwen2.5-7B) on A800, TPOT about 22.5 ms eager against 13 ms with CUDA graphs
#: (vllm-project/vllm-omni issue 7960, 2026-09-22): 9.5 ms / 28 layers.
DEFAULT_EAGER_LAYER_OVERHEAD = 3.4e-4
#: Load imbalance of expert parallelism: the busiest GPU of an expert-parallel
#: group gets this many times the mean routed tokens (docs/cost-model.md).
#: Source: SGLang, "Deploying DeepSeek with PD Disaggregation and Large-scale
#: Expert Parallelism on 96 H100 GPUs" (lm-sys/lm-sys.github.io
#: blog/2025-05-05-large-scale-ep.md at 2db4e404, "Overall Throughput"):
#: DeepSeek-V3 prefill, EP32, 16,384 tokens per device, 50,302 tokens/s per node
#: with the default expert distribution, 59,337 with simulated perfect balance:
#: 1.18. Range: TensorRT-LLM's hottest EP32 rank gets 2.56 times the mean
#: without its load balancer, 1.11 with it (imbalance ratios 1.564 and 0.109,
#: NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/
#: blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md at 1d263f15, Table 1).
DEFAULT_MOE_IMBALANCE = 1.18
#: Fixed seconds per expert a GPU holds (E / ep), mixture-of-experts layer and pass
#: of a train or infer microbatch: Megatron's token dispatcher and expert layer
#: (routing, permutation, the per-expert work and the host-device synchronisation on
#: the token counts), which a microbatch of a few thousand tokens does not hide.
#: **Fitted** (docs/cost-model.md#the-moe-layers-fixed-time,
#: ``python -m rlplan.compare.calibration``) to the one MoE run that publishes phase
#: times: NeMo RL's Qwen3-30B-A3B GRPO recipe on 4 x 8 B200, policy training 56.85 s
#: and log-probs 15.04 s (NVIDIA-NeMo/RL branch sna/pr2964-hybridep17cf-20step-20260807
#: at 9c5e7ce8, experiment_logs/pr2964-20step-20260807/report/index.html, all-to-all
#: job 507045), which the model without it puts at 10.78 s and 2.80 s. Per MoE layer
#: and pass the two phases leave 7.50 ms and 7.97 ms, 16 experts a GPU (ep 8 of 128):
#: a fixed time, since the log-prob microbatch holds twice the train microbatch's
#: tokens. The fit gives 4.83e-4.
DEFAULT_MOE_EXPERT_OVERHEAD = 4.8e-4
#: Device memory no plan may use, whatever the hardware came from (a preset or
#: explicit fields): a fixed part per GPU and a fraction of its memory
#: (usable = memory_per_gpu x (1 - memory_reserve) - memory_reserve_bytes,
#: docs/cost-model.md).
#:
#: Fixed part, 1 GiB: the CUDA context of the training process and the buffers of
#: its NCCL communicator. NVIDIA/nccl-tests src/common.cu (``run``) sizes its
#: test buffers from the device memory less "1G for the rest", the empirical
#: CUDA and NCCL usage on HGX/DGX nodes (its maintainer in NVIDIA/nccl-tests
#: issue 198). Its parts: a PyTorch CUDA context takes 287,047,680 bytes with
#: lazy module loading, PyTorch's default since 1.13 (pytorch/pytorch pull
#: request 86509), and NCCL allocates a 4 MiB buffer per channel and peer for
#: its Simple protocol (``DEFAULT_BUFFSIZE`` in NVIDIA/nccl src/init.cc, the
#: ``NCCL_BUFFSIZE`` default) beside its LL and LL128 buffers. A run with more
#: communicators or a second process per GPU needs more (NVIDIA/nccl issue
#: 864: about 1.6 GB per GPU for one communicator, 6 GB for three or more).
DEFAULT_MEMORY_RESERVE_BYTES = float(1 << 30)
#: Fraction, 0.115: fragmentation of PyTorch's caching allocator, memory it holds
#: that no tensor uses. Guo et al., "GMLake: Efficient and Transparent GPU Memory
#: Defragmentation for Large-scale DNN Training with Virtual Memory Stitching",
#: ASPLOS 2024 (arXiv 2401.08156), abstract: defragmenting saves 9.2 GB on average
#: across eight LLMs trained with recomputation, offloading, ZeRO and LoRA on
#: 80 GB GPUs; 9.2 / 80 = 0.115.
DEFAULT_MEMORY_RESERVE = 0.115
#: Host rates per GPU without a preset (bytes/s): PCIe 4.0 x16 from pinned
#: memory, and pageable memory ``PAGEABLE_SLOWDOWN`` (2.4) times slower (its
#: source is in :mod:`rlplan.rpeg.schema.presets`).
DEFAULT_HOST_TO_DEVICE_PINNED = DEFAULT_HOST_BANDWIDTH
DEFAULT_HOST_TO_DEVICE_PAGEABLE = DEFAULT_HOST_BANDWIDTH / PAGEABLE_SLOWDOWN
DEFAULT_DEVICE_TO_HOST_PINNED = DEFAULT_HOST_BANDWIDTH
DEFAULT_DEVICE_TO_HOST_PAGEABLE = DEFAULT_HOST_BANDWIDTH / PAGEABLE_SLOWDOWN
#: Host memory per GPU without a preset (bytes); ``host_memory_per_node``
#: defaults to this times ``gpus_per_node``. 1 TB for 8 GPUs, the smallest
#: sourced figure of an 8-GPU training server (Inspur NF5488A5, 8 x A100 SXM:
#: mlcommons/training_results_v1.0 Inspur/systems/nf5488a5_pytorch.json,
#: "host_memory_capacity": "1TB"); H100 and H200 servers hold 2 TB.
DEFAULT_HOST_MEMORY_PER_GPU = 128e9
#: The four host rates (docs/cost-model.md#colocation): which one a transfer
#: uses depends on its direction and on whether its host buffer is pinned.
HOST_RATES = HOST_RATE_KEYS
_HOST_RATE_DEFAULTS = {
    "host_to_device_pinned": DEFAULT_HOST_TO_DEVICE_PINNED,
    "host_to_device_pageable": DEFAULT_HOST_TO_DEVICE_PAGEABLE,
    "device_to_host_pinned": DEFAULT_DEVICE_TO_HOST_PINNED,
    "device_to_host_pageable": DEFAULT_DEVICE_TO_HOST_PAGEABLE,
}

# ----------------------------------------------------------------------------
# Declarations
# ----------------------------------------------------------------------------

#: The cluster's shape and per-GPU figures (all required unless a preset fills them).
HARDWARE_REQUIRED = (
    Field("racks", POSITIVE_INT, description="Racks in the cluster"),
    Field("nodes_per_rack", POSITIVE_INT, description="Nodes in each rack"),
    Field("gpus_per_node", POSITIVE_INT, description="GPUs in each node"),
    Field("flops_per_gpu", POSITIVE_FLOAT, description="Dense BF16 peak of one GPU"),
    Field("memory_per_gpu", POSITIVE_FLOAT, description="Device memory of one GPU"),
    Field("memory_bandwidth", POSITIVE_FLOAT, description="Device memory bandwidth of one GPU"),
)

_MODES = {"coll": "collective", "p2p": "point-to-point"}
_LEVEL_WORDS = {"g": "inside a node", "n": "across nodes of a rack", "r": "across racks"}

#: Latency (``alpha_*``) and bandwidth (``beta_*``) per communication mode and level.
HARDWARE_COMM = tuple(
    Field(
        f"{kind}_{mode}_{level}",
        NONNEGATIVE_FLOAT if kind == "alpha" else BANDWIDTH,
        description=(
            f"{'Latency' if kind == 'alpha' else 'Bandwidth per GPU'} of a {_MODES[mode]} "
            f"transfer {_LEVEL_WORDS[level]}"
            + ("" if kind == "alpha" else "; a value below 1 is read as s/byte")
        ),
    )
    for mode in _MODES
    for kind in ("alpha", "beta")
    for level in LEVELS
)


def _knob(key: str, value: Any, default: float, description: str) -> Field:
    """An optional cost-model knob: read as a number, its domain checked by :class:`Hardware`."""
    return Field(key, value, default, description, read_as=NUMBER)


#: Cost-model knobs with their defaults.
HARDWARE_OPTIONAL = (
    _knob("gemm_m_half", NONNEGATIVE_FLOAT, 5.0, "GEMM rows at which efficiency is half"),
    _knob("gemm_k_half", NONNEGATIVE_FLOAT, 0.0, "GEMM depth at which efficiency is half"),
    _knob(
        "decode_bw_eff",
        FRACTION_OPEN_LOW,
        DEFAULT_DECODE_BW_EFF,
        "Fraction of memory bandwidth a decode step reaches",
    ),
    _knob("non_gemm_constant", NONNEGATIVE_FLOAT, 0.0, "Fixed non-GEMM time per pass"),
    _knob("non_gemm_scaling", NONNEGATIVE_FLOAT, 0.0, "Non-GEMM time per calibration batch"),
    _knob("non_gemm_batch_cal", POSITIVE_FLOAT, 64.0, "Calibration batch of non_gemm_scaling"),
    _knob(
        "memory_reserve",
        FRACTION_OPEN_HIGH,
        DEFAULT_MEMORY_RESERVE,
        "Fraction of device memory no plan may use (allocator fragmentation)",
    ),
    _knob(
        "memory_reserve_bytes",
        NONNEGATIVE_FLOAT,
        DEFAULT_MEMORY_RESERVE_BYTES,
        "Bytes per GPU no plan may use (CUDA context, NCCL buffers)",
    ),
    _knob(
        "gemm_efficiency",
        FRACTION_OPEN_LOW,
        DEFAULT_GEMM_EFFICIENCY,
        "Largest fraction of the peak a large GEMM reaches",
    ),
    _knob(
        "decode_step_overhead",
        NONNEGATIVE_FLOAT,
        DEFAULT_DECODE_STEP_OVERHEAD,
        "Fixed cost of one decode step",
    ),
    _knob(
        "non_gemm_ratio",
        NONNEGATIVE_FLOAT,
        DEFAULT_NON_GEMM_RATIO,
        "Non-GEMM kernel time per second of GEMM time",
    ),
    _knob(
        "eager_layer_overhead",
        NONNEGATIVE_FLOAT,
        DEFAULT_EAGER_LAYER_OVERHEAD,
        "Extra decode-step time per layer without CUDA graphs",
    ),
    _knob(
        "moe_imbalance",
        POSITIVE_FLOAT,
        DEFAULT_MOE_IMBALANCE,
        "Routed tokens of the busiest GPU of an expert-parallel group per mean",
    ),
    _knob(
        "moe_expert_overhead",
        NONNEGATIVE_FLOAT,
        DEFAULT_MOE_EXPERT_OVERHEAD,
        "Fixed time per expert a GPU holds, MoE layer and pass of a train or infer microbatch",
    ),
)
_DIRECTION_WORDS = {
    "host_to_device": "Host-to-GPU",
    "device_to_host": "GPU-to-host",
}
#: Host link and host memory (docs/cost-model.md#colocation). Unset (None)
#: until :class:`Hardware` fills them: ``host_bandwidth``, when written, is
#: every host rate the section does not write; otherwise a rate defaults to
#: its preset's value or to ``DEFAULT_*``.
HARDWARE_HOST = (
    _knob(
        "host_bandwidth",
        POSITIVE_FLOAT,
        None,
        "Every host rate at once (overrides the preset's host rates)",
    ),
    *(
        _knob(
            rate,
            POSITIVE_FLOAT,
            None,
            f"{_DIRECTION_WORDS[rate.rsplit('_', 1)[0]]} bytes/s per GPU from "
            f"{rate.rsplit('_', 1)[1]} host memory",
        )
        for rate in HOST_RATES
    ),
    _knob(
        "host_memory_per_node",
        POSITIVE_FLOAT,
        None,
        "Host memory of one node for offloaded states and sleeping engines",
    ),
)
#: Every declared ``hardware`` field, in the order the allowed keys are listed.
HARDWARE_FIELDS = (*HARDWARE_REQUIRED, *HARDWARE_COMM, *HARDWARE_OPTIONAL, *HARDWARE_HOST)
#: Every key of the section: ``preset`` and the declared fields.
HARDWARE_KEYS = ("preset", *keys(HARDWARE_FIELDS))
#: The order fields are read in: the shape and GPU figures, each level's
#: latency then bandwidth, the knobs.
_COMM_BY_KEY = {field.key: field for field in HARDWARE_COMM}
_READ_ORDER = (
    *HARDWARE_REQUIRED,
    *(
        _COMM_BY_KEY[f"{kind}_{mode}_{level}"]
        for mode in _MODES
        for level in LEVELS
        for kind in ("alpha", "beta")
    ),
    *HARDWARE_OPTIONAL,
    *HARDWARE_HOST,
)


@dataclass(frozen=True)
class Hardware:
    """A cluster of ``racks x nodes_per_rack x gpus_per_node`` identical GPUs.

    Communication parameters are stored per level ``g`` (inside a node),
    ``n`` (across nodes of a rack) and ``r`` (across racks); every ``beta`` is
    an inverse bandwidth in s/byte.
    """

    racks: int
    nodes_per_rack: int
    gpus_per_node: int
    flops_per_gpu: float
    memory_per_gpu: float
    memory_bandwidth: float
    alpha_coll: dict[str, float]
    beta_coll: dict[str, float]
    alpha_p2p: dict[str, float]
    beta_p2p: dict[str, float]
    gemm_m_half: float = 5.0
    gemm_k_half: float = 0.0
    decode_bw_eff: float = DEFAULT_DECODE_BW_EFF
    non_gemm_constant: float = 0.0
    non_gemm_scaling: float = 0.0
    non_gemm_batch_cal: float = 64.0
    memory_reserve: float = DEFAULT_MEMORY_RESERVE
    memory_reserve_bytes: float = DEFAULT_MEMORY_RESERVE_BYTES
    gemm_efficiency: float = DEFAULT_GEMM_EFFICIENCY
    decode_step_overhead: float = DEFAULT_DECODE_STEP_OVERHEAD
    non_gemm_ratio: float = DEFAULT_NON_GEMM_RATIO
    eager_layer_overhead: float = DEFAULT_EAGER_LAYER_OVERHEAD
    moe_imbalance: float = DEFAULT_MOE_IMBALANCE
    moe_expert_overhead: float = DEFAULT_MOE_EXPERT_OVERHEAD
    #: Written override of every host rate; None when not written. The rates and
    #: the host memory are None only until ``__post_init__`` fills them.
    host_bandwidth: float | None = None
    host_to_device_pinned: float = None  # type: ignore[assignment]
    host_to_device_pageable: float = None  # type: ignore[assignment]
    device_to_host_pinned: float = None  # type: ignore[assignment]
    device_to_host_pageable: float = None  # type: ignore[assignment]
    host_memory_per_node: float = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        check_fields(self, HARDWARE_REQUIRED[:3], "hardware")
        check_cluster_size(self.racks, self.nodes_per_rack, self.gpus_per_node)
        check_fields(self, HARDWARE_REQUIRED[3:], "hardware")
        for name in ("alpha_coll", "alpha_p2p"):
            for level in LEVELS:
                NONNEGATIVE_FLOAT.check(getattr(self, name)[level], f"hardware.{name}_{level}")
        for name in ("beta_coll", "beta_p2p"):
            for level in LEVELS:
                # Stored as s/byte: the range applies to its inverse.
                inverse = positive_float(
                    getattr(self, name)[level], f"hardware.{name}_{level}", limits=False
                )
                check_range(1.0 / inverse, f"hardware.{name}_{level}")
        check_fields(self, HARDWARE_OPTIONAL, "hardware")
        if self.usable_memory <= 0:
            raise InstanceError(
                "hardware.memory_reserve_bytes",
                f"{self.memory_reserve_bytes:g} bytes with memory_reserve "
                f"{self.memory_reserve:g} leave no usable memory of the "
                f"{self.memory_per_gpu:g} bytes per GPU",
            )
        self._fill_host()

    def _fill_host(self) -> None:
        """Fill the unset host rates (``host_bandwidth``, else the default) and host memory."""
        if self.host_bandwidth is not None:
            POSITIVE_FLOAT.check(self.host_bandwidth, "hardware.host_bandwidth")
        for rate in HOST_RATES:
            if getattr(self, rate) is None:
                fallback = self.host_bandwidth
                object.__setattr__(
                    self, rate, _HOST_RATE_DEFAULTS[rate] if fallback is None else fallback
                )
        if self.host_memory_per_node is None:
            default = DEFAULT_HOST_MEMORY_PER_GPU * self.gpus_per_node
            object.__setattr__(self, "host_memory_per_node", default)
        check_fields(self, HARDWARE_HOST[1:], "hardware")

    @property
    def num_gpus(self) -> int:
        """Total number of GPUs ``R*N*G``."""
        return self.racks * self.nodes_per_rack * self.gpus_per_node

    @property
    def gpus_per_rack(self) -> int:
        """GPUs in one rack ``N*G``."""
        return self.nodes_per_rack * self.gpus_per_node

    @property
    def usable_memory(self) -> float:
        """Bytes per GPU a plan may use.

        ``memory_per_gpu * (1 - memory_reserve) - memory_reserve_bytes``; with
        the defaults, 80e9 x 0.885 - 2**30 = 69.73e9 bytes of an 80 GB GPU.
        """
        return self.memory_per_gpu * (1.0 - self.memory_reserve) - self.memory_reserve_bytes


def parse_hardware(data: Any) -> Hardware:
    """Build :class:`Hardware` from the ``hardware`` section.

    A ``preset`` key names a GPU of :data:`rlplan.rpeg.schema.presets.GPU_PRESETS` whose
    figures fill the fields the section does not give.
    """
    section = mapping(data, "hardware")
    check_keys(section, HARDWARE_KEYS, "hardware")
    values = read_fields(expand_hardware(section), _READ_ORDER, "hardware")
    comm = {
        f"{kind}_{mode}": {level: values.pop(f"{kind}_{mode}_{level}") for level in LEVELS}
        for mode in _MODES
        for kind in ("alpha", "beta")
    }
    return Hardware(**values, **comm)
