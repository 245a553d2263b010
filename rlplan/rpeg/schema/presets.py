"""Named GPUs for instance files, and the entry points that expand presets and configs.

Three shortcuts fill instance fields so a user need not copy numbers by hand
(docs/instance.md):

* ``hardware: {preset: h100-sxm-80g, racks: 1, nodes_per_rack: 2,
  gpus_per_node: 8}`` fills ``flops_per_gpu``, ``memory_per_gpu``,
  ``memory_bandwidth``, the eighteen ``alpha_*`` / ``beta_*``
  communication figures, the four host rates of the GPU's host link and
  ``host_memory_per_node`` from :data:`GPU_PRESETS`;
* ``models.<role>: {preset: llama-3.1-8b}`` fills the shape from
  :data:`~rlplan.rpeg.schema.model_presets.MODEL_PRESETS`;
* ``models.<role>: {hf_config: path/to/config.json}`` reads the shape from a
  Hugging Face config file, offline (a relative path is relative to the
  instance file; :mod:`rlplan.rpeg.schema.hf_config`).

Any field written next to a preset or ``hf_config`` overrides the value it
would fill, except that mixture-of-experts or latent-attention fields cannot
turn a dense preset or config into a mixture (:func:`expand_model`). The
functions here only build the raw mapping of instance fields;
:mod:`rlplan.rpeg.schema.instance` validates the result like hand-written input.

Sources. Compute, memory and the intra-node link of every GPU are vendor
figures (the datasheet each preset names); BF16 figures are *dense* (the
datasheets' headline figures with sparsity halved). The inter-node figure is
the typical InfiniBand (or Ethernet) rail per GPU of such clusters, an
assumption unless stated, and the inter-rack figure is half of it (an
assumption, as in the shipped instances). Bandwidths are per direction.
Latencies (``alpha_*``) are typical NCCL small-message figures, estimates
rather than datasheet numbers; they are the ones the shipped instances use.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.hf_config import read_hf_config
from rlplan.rpeg.schema.mixture import dense_contradiction
from rlplan.rpeg.schema.model_presets import model_preset, preset_name

LEVELS = ("g", "n", "r")
#: The host rates a preset fills (the four ``hardware`` host-rate fields).
HOST_RATE_KEYS = (
    "host_to_device_pinned",
    "host_to_device_pageable",
    "device_to_host_pinned",
    "device_to_host_pageable",
)

#: Collective and point-to-point latencies (s) at levels g, n, r of GPUs
#: joined by NVLink 4 inside a node and NDR InfiniBand across nodes
#: (estimates: typical NCCL small-message figures; the shipped H100 and H20
#: instances use them).
NVLINK_ALPHA_COLL = (5e-6, 1e-5, 2e-5)
NVLINK_ALPHA_P2P = (3e-6, 8e-6, 1.5e-5)
#: The same for NVLink 3 and HDR InfiniBand (A100; estimates, a little higher;
#: the shipped A100 instances use them).
NVLINK3_ALPHA_COLL = (6e-6, 1.2e-5, 2.5e-5)
NVLINK3_ALPHA_P2P = (4e-6, 1e-5, 2e-5)
#: The same for GPUs that talk over PCIe inside a node (estimates; the
#: shipped RTX 4090 instances use them).
#: GB200 NVL72 latencies (estimates): level g inside a compute tray and level n
#: across the trays of a rack are both NVLink 5 (one NVLink Switch hop more
#: across trays, assumed a little above level g); level r is the InfiniBand rail
#: between racks, as NVLINK_ALPHA_*[2].
NVL72_ALPHA_COLL = (5e-6, 7e-6, 2e-5)
NVL72_ALPHA_P2P = (3e-6, 4e-6, 1.5e-5)
PCIE_ALPHA_COLL = (1e-5, 2e-5, 4e-5)
PCIE_ALPHA_P2P = (8e-6, 1.5e-5, 3e-5)


#: Pageable host memory moves this many times slower than pinned memory: the
#: largest transfers of the cudaMemcpy measurement in "Memory Transfer
#: Overhead" (University of Virginia, cs.virginia.edu/~mwb7w/cuda_support/
#: memory_transfer_overhead.html: "At the largest transfer sizes, pinned memory
#: provides approximately 2.4x higher" throughput; GTX 280, PCIe 2.0). An old
#: machine, the only published ratio found; PyTorch's pin_memory tutorial
#: (pytorch.org/tutorials/intermediate/pinmem_nonblock) gives the same order.
PAGEABLE_SLOWDOWN = 2.4


@dataclass(frozen=True)
class HostLink:
    """How a GPU reaches its node's host memory, per GPU and direction (bytes/s).

    Attributes
    ----------
    name
        The link (``PCIe Gen5 x16``).
    host_to_device, device_to_host
        Pinned-memory rates with every GPU of the node transferring at once;
        pageable memory is :data:`PAGEABLE_SLOWDOWN` times slower.
    source
        Where the figures come from.
    """

    name: str
    host_to_device: float
    device_to_host: float
    source: str

    def fields(self) -> dict[str, float]:
        """The four ``hardware`` host rates of this link."""
        return {
            "host_to_device_pinned": self.host_to_device,
            "host_to_device_pageable": self.host_to_device / PAGEABLE_SLOWDOWN,
            "device_to_host_pinned": self.device_to_host,
            "device_to_host_pageable": self.device_to_host / PAGEABLE_SLOWDOWN,
        }


#: PCIe Gen4 x16 to its own GPU: 25.13 GB/s host-to-device measured with
#: nvbandwidth host_to_device_memcpy_sm on an A100-SXM4-40GB at 512 MiB - 1 GiB
#: (NVIDIA/nvbandwidth issue 42); device-to-host about 25 GB/s on an A100 80GB
#: (NVIDIA/nvbandwidth issue 53: "D2H maintains ~25 GB/s").
PCIE_GEN4_X16 = HostLink(
    "PCIe Gen4 x16",
    25.13e9,
    25e9,
    "nvbandwidth measurements on A100 (NVIDIA/nvbandwidth issues 42 and 53)",
)
#: PCIe Gen4 x16 shared by two GPUs behind one PCIe switch (HGX A100 boards):
#: "over 11 GB/s per GPU when two GPUs that connected to the same NIC were under
#: test concurrently. If only one GPU was under test, the bandwidth was over 22
#: GB/s" (Inspur NF5488A5, 8 x A100 SXM; mlcommons/inference_results_v1.1
#: closed/Inspur/documentation/start_from_device/Start_From_Device.md). An RL
#: step moves every GPU's states at once, so the shared figure applies.
PCIE_GEN4_X16_SHARED = HostLink(
    "PCIe Gen4 x16, shared by a GPU pair",
    11e9,
    11e9,
    "Inspur NF5488A5 measurement with both GPUs of a PCIe switch active "
    "(mlcommons/inference_results_v1.1 Start_From_Device.md)",
)
#: PCIe Gen5 x16: 35.2 GB/s host-to-device and 52.8 GB/s device-to-host per GPU
#: with nvbandwidth's SM copy kernels on an 8-GPU H100 SXM cluster, "similar
#: results with H20 and H800" (NVIDIA/nvbandwidth issue 24, 2024-09-11).
PCIE_GEN5_X16 = HostLink(
    "PCIe Gen5 x16",
    35.2e9,
    52.8e9,
    "nvbandwidth measurements on 8 x H100 SXM, similar on H20 (NVIDIA/nvbandwidth issue 24)",
)
#: NVLink-C2C of Grace Hopper / Grace Blackwell: 346 GB/s host-to-device
#: measured on a GH200 with nvbandwidth (copy engine), device-to-host about 15 %
#: slower (NVIDIA/nvbandwidth issue 23: "For GH200, H2D is approximately 15%
#: faster than D2H"), of 450 GB/s per direction (NVIDIA Grace Hopper
#: architecture). The GB200 preset uses it: no measurement of a Grace Blackwell
#: tray's host link was found, and GB200 has the same NVLink-C2C.
NVLINK_C2C = HostLink(
    "NVLink-C2C",
    346e9,
    346e9 / 1.15,
    "nvbandwidth on GH200 (NVIDIA/nvbandwidth issue 23)",
)


@dataclass(frozen=True)
class GpuPreset:
    """Datasheet figures of one GPU and the links of a typical cluster of them.

    Attributes
    ----------
    name
        Preset name as written in ``hardware.preset``.
    title
        The product's full name.
    flops_per_gpu
        Dense BF16 tensor FLOP/s.
    memory_per_gpu
        Bytes of device memory.
    memory_bandwidth
        Device memory bytes/s.
    bandwidth
        Per-direction bytes/s inside a node (g), across nodes of a rack (n)
        and across racks (r); used for collectives and point-to-point alike.
    alpha_coll, alpha_p2p
        Latencies (s) at levels g, n, r.
    source
        Where the figures come from, and which are assumptions.
    host
        The host link of a typical server of this GPU (None: the defaults of
        :mod:`rlplan.rpeg.schema.hardware`).
    host_memory_per_gpu
        Host memory of such a server divided by its GPUs (bytes); the preset
        fills ``host_memory_per_node`` as this times ``gpus_per_node``.
    host_source
        Where the host figures come from.
    """

    name: str
    title: str
    flops_per_gpu: float
    memory_per_gpu: float
    memory_bandwidth: float
    bandwidth: tuple[float, float, float]
    alpha_coll: tuple[float, float, float]
    alpha_p2p: tuple[float, float, float]
    source: str
    host: HostLink | None = None
    host_memory_per_gpu: float | None = None
    host_source: str = ""

    def fields(self) -> dict[str, float]:
        """The ``hardware`` fields this preset fills, keyed as in the instance file.

        Returns
        -------
        dict[str, float]
            ``flops_per_gpu``, ``memory_per_gpu``, ``memory_bandwidth`` and
            ``alpha_coll_g`` ... ``beta_p2p_r`` (betas as bytes/s).
        """
        values: dict[str, float] = {
            "flops_per_gpu": self.flops_per_gpu,
            "memory_per_gpu": self.memory_per_gpu,
            "memory_bandwidth": self.memory_bandwidth,
        }
        for mode, alphas in (("coll", self.alpha_coll), ("p2p", self.alpha_p2p)):
            for index, level in enumerate(LEVELS):
                values[f"alpha_{mode}_{level}"] = alphas[index]
                values[f"beta_{mode}_{level}"] = self.bandwidth[index]
        if self.host is not None:
            values.update(self.host.fields())
        return values


_GPUS = (
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100):
    # H100 SXM BF16 1,979 TFLOP/s with sparsity = 989 dense; 80 GB HBM3 at
    # 3.35 TB/s; NVLink 900 GB/s bidirectional = 450 GB/s per direction.
    # Assumed: one 400 Gb/s NDR InfiniBand rail per GPU (the DGX H100 layout,
    # 8 x ConnectX-7) = 50 GB/s across nodes; half that across racks.
    GpuPreset(
        "h100-sxm-80g",
        "NVIDIA H100 SXM5 80GB",
        989e12,
        80e9,
        3.35e12,
        (450e9, 50e9, 25e9),
        NVLINK_ALPHA_COLL,
        NVLINK_ALPHA_P2P,
        "NVIDIA H100 datasheet (dense BF16, HBM3, NVLink 4); 400 Gb/s NDR IB per GPU and "
        "half of it across racks assumed",
        PCIE_GEN5_X16,
        256e9,
        "PCIe Gen5 x16 (nvbandwidth issue 24); 2 TB for 8 GPUs (Dell XE9680, 8 x H100 SXM: "
        "mlcommons/inference_results_v3.1 closed/Dell/systems/XE9680_H100_SXM_80GBx8_TRT.json, "
        '"host_memory_capacity": "2 TB")',
    ),
    # NVIDIA GB200 NVL72 specifications (nvidia.com/en-us/data-center/gb200-nvl72,
    # "Individual Blackwell GPU Specifications", GB200 column, figures with sparsity):
    # FP16/BF16 Tensor Core 5 PFLOPS = 2.5 PFLOP/s dense; 186 GB HBM3e at 8 TB/s;
    # fifth-generation NVLink 1.8 TB/s bidirectional = 900 GB/s per direction. A
    # node is one compute tray: 4 GPUs and 2 Grace CPUs with up to 480 GB LPDDR5X
    # each, 18 trays per NVL72 rack, one NVLink domain, so levels g and n are both
    # NVLink (multi-node NVLink enabled, as on an NVL72). Assumed: one 400 Gb/s
    # InfiniBand rail per GPU across racks = 50 GB/s.
    GpuPreset(
        "gb200-nvl72-186g",
        "NVIDIA GB200 NVL72 (B200 GPU of a GB200 superchip, 186GB)",
        2.5e15,
        186e9,
        8.0e12,
        (900e9, 900e9, 50e9),
        NVL72_ALPHA_COLL,
        NVL72_ALPHA_P2P,
        "NVIDIA GB200 NVL72 specifications (dense BF16 = half the sparse 5 PFLOPS, 186 GB "
        "HBM3e at 8 TB/s, NVLink 5 1.8 TB/s bidirectional); NVLink across the trays of a "
        "rack, and 400 Gb/s IB per GPU across racks, assumed",
        NVLINK_C2C,
        240e9,
        "NVLink-C2C as measured on GH200 (nvbandwidth issue 23); 960 GB per 4-GPU tray "
        "(2 Grace CPUs x 480 GB LPDDR5X, NVIDIA GB200 NVL72 specifications)",
    ),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200):
    # H200 SXM BF16 1,979 TFLOP/s with sparsity = 989 dense; 141 GB HBM3e at
    # 4.8 TB/s; NVLink 900 GB/s bidirectional = 450 GB/s per direction.
    # Assumed: 400 Gb/s NDR InfiniBand per GPU (DGX H200) = 50 GB/s; half across racks.
    GpuPreset(
        "h200-sxm-141g",
        "NVIDIA H200 SXM 141GB",
        989e12,
        141e9,
        4.8e12,
        (450e9, 50e9, 25e9),
        NVLINK_ALPHA_COLL,
        NVLINK_ALPHA_P2P,
        "NVIDIA H200 datasheet (dense BF16, HBM3e, NVLink 4); 400 Gb/s NDR IB per GPU and "
        "half of it across racks assumed",
        PCIE_GEN5_X16,
        256e9,
        "PCIe Gen5 x16 as the H100 (assumed: the same HGX board generation); 2 TB for 8 GPUs "
        "(mlcommons/inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json, "
        '"host_memory_capacity": "2 TB")',
    ),
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100):
    # BF16 312 TFLOP/s dense (624 with sparsity); A100 80GB SXM: HBM2e at
    # 2,039 GB/s; NVLink 3 600 GB/s bidirectional = 300 GB/s per direction.
    # Assumed: one 200 Gb/s HDR InfiniBand rail per GPU (the DGX A100 layout)
    # = 25 GB/s across nodes; half across racks.
    GpuPreset(
        "a100-sxm-80g",
        "NVIDIA A100 SXM4 80GB",
        312e12,
        80e9,
        2.039e12,
        (300e9, 25e9, 12.5e9),
        NVLINK3_ALPHA_COLL,
        NVLINK3_ALPHA_P2P,
        "NVIDIA A100 datasheet (dense BF16, HBM2e, NVLink 3); 200 Gb/s HDR IB per GPU and "
        "half of it across racks assumed",
        PCIE_GEN4_X16_SHARED,
        128e9,
        "PCIe Gen4 x16 shared by a GPU pair (Inspur NF5488A5 measurement); 1 TB for 8 GPUs "
        "(Inspur NF5488A5, 8 x A100-SXM4-80GB: mlcommons/training_results_v1.0 "
        'Inspur/systems/nf5488a5_pytorch.json, "host_memory_capacity": "1TB")',
    ),
    # The same datasheet, A100 40GB SXM: HBM2 at 1,555 GB/s; otherwise as above.
    GpuPreset(
        "a100-sxm-40g",
        "NVIDIA A100 SXM4 40GB",
        312e12,
        40e9,
        1.555e12,
        (300e9, 25e9, 12.5e9),
        NVLINK3_ALPHA_COLL,
        NVLINK3_ALPHA_P2P,
        "NVIDIA A100 datasheet (dense BF16, HBM2, NVLink 3); 200 Gb/s HDR IB per GPU and "
        "half of it across racks assumed",
        PCIE_GEN4_X16_SHARED,
        128e9,
        "PCIe Gen4 x16 shared by a GPU pair, as the 80 GB A100; 1 TB for 8 GPUs assumed as "
        "for the 80 GB HGX A100 server (no 40 GB server figure found)",
    ),
    # NVIDIA publishes no H20 datasheet in public; the figures verl uses:
    # 148 TFLOP/s dense BF16 (volcengine/verl verl/utils/flops_counter.py,
    # "H20": 148e12), 96 GB HBM3 at 4.0 TB/s and NVLink 900 GB/s bidirectional
    # = 450 GB/s per direction (willitrunai.com, H20 96GB page); the shipped
    # instances/published/verl_dapo_qwen25_math_7b_16_h20.yaml uses the same.
    # Assumed: 400 Gb/s InfiniBand per GPU = 50 GB/s; half across racks.
    GpuPreset(
        "h20-96g",
        "NVIDIA H20 96GB",
        148e12,
        96e9,
        4.0e12,
        (450e9, 50e9, 25e9),
        NVLINK_ALPHA_COLL,
        NVLINK_ALPHA_P2P,
        "no public NVIDIA datasheet: verl's flops_counter.py (148 TFLOP/s) and third-party "
        "specifications (96 GB HBM3, 4.0 TB/s, NVLink 900 GB/s); 400 Gb/s IB per GPU and "
        "half of it across racks assumed",
        PCIE_GEN5_X16,
        256e9,
        "PCIe Gen5 x16 (nvbandwidth issue 24 reports similar figures on H20); 2 TB for 8 GPUs "
        "assumed as for HGX H100/H200 servers (no H20 server figure found)",
    ),
    # NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s): BF16 tensor
    # 362.05 TFLOP/s dense (733 with sparsity); 48 GB GDDR6 at 864 GB/s; no
    # NVLink: PCIe Gen4 x16, 64 GB/s bidirectional = 32 GB/s raw per direction.
    # Assumed: about 25 GB/s achieved over PCIe (as for the RTX 4090 below);
    # 100 Gb/s Ethernet per GPU = 12.5 GB/s across nodes; half across racks.
    GpuPreset(
        "l40s-48g",
        "NVIDIA L40S 48GB",
        362.05e12,
        48e9,
        864e9,
        (25e9, 12.5e9, 6.25e9),
        PCIE_ALPHA_COLL,
        PCIE_ALPHA_P2P,
        "NVIDIA L40S datasheet (dense BF16, GDDR6, PCIe Gen4 x16 without NVLink); ~25 GB/s "
        "achieved over PCIe, 100 GbE per GPU and half of it across racks assumed",
        PCIE_GEN4_X16,
        100e9,
        "PCIe Gen4 x16 to each GPU (nvbandwidth issues 42 and 53); 400 GB for 4 GPUs (an AWS "
        '4 x L40S node\'s wandb-metadata.json: "memory": {"total": "400220504064"}, Hugging Face '
        "apjanco/es_qwen2_vl_pangea)",
    ),
    # NVIDIA Ada Lovelace GPU architecture whitepaper (RTX 4090): peak BF16
    # tensor with FP32 accumulate 165.2 TFLOP/s dense (330.4 with sparsity);
    # 24 GB GDDR6X at 1,008 GB/s; no NVLink: PCIe 4.0 x16 (32 GB/s raw per
    # direction). Assumed: ~25 GB/s achieved over PCIe, 100 GbE across nodes
    # (12.5 GB/s), half across racks; the shipped tiny instances use the same.
    GpuPreset(
        "rtx-4090-24g",
        "NVIDIA GeForce RTX 4090 24GB",
        165e12,
        24e9,
        1.008e12,
        (25e9, 12.5e9, 6.25e9),
        PCIE_ALPHA_COLL,
        PCIE_ALPHA_P2P,
        "NVIDIA Ada Lovelace whitepaper (dense BF16 with FP32 accumulate, GDDR6X, PCIe 4.0 "
        "x16); ~25 GB/s achieved over PCIe, 100 GbE per GPU and half of it across racks "
        "assumed",
        PCIE_GEN4_X16,
        32e9,
        "PCIe Gen4 x16 to each GPU (nvbandwidth issues 42 and 53); 32 GB of host memory per "
        "GPU assumed (a 256 GB workstation for 8 GPUs; no figure found)",
    ),
)

#: GPU presets by name.
GPU_PRESETS: dict[str, GpuPreset] = {preset.name: preset for preset in _GPUS}

#: Other spellings accepted for a GPU preset.
GPU_ALIASES: dict[str, str] = {
    "h100": "h100-sxm-80g",
    "h100-sxm": "h100-sxm-80g",
    "h100-80g": "h100-sxm-80g",
    "h200": "h200-sxm-141g",
    "gb200": "gb200-nvl72-186g",
    "gb200-nvl72": "gb200-nvl72-186g",
    "h200-sxm": "h200-sxm-141g",
    "a100": "a100-sxm-80g",
    "a100-80g": "a100-sxm-80g",
    "a100-sxm": "a100-sxm-80g",
    "a100-40g": "a100-sxm-40g",
    "h20": "h20-96g",
    "l40s": "l40s-48g",
    "rtx-4090": "rtx-4090-24g",
    "rtx4090": "rtx-4090-24g",
    "4090": "rtx-4090-24g",
}


def gpu_preset(value: Any, path: str = "hardware.preset") -> GpuPreset:
    """The GPU preset ``value`` names (a name of :data:`GPU_PRESETS` or an alias).

    Raises
    ------
    InstanceError
        For anything else, with the closest name and every known one.
    """
    name = preset_name(value, path, "GPU")
    name = GPU_ALIASES.get(name, name)
    preset = GPU_PRESETS.get(name)
    if preset is None:
        close = difflib.get_close_matches(name, [*GPU_PRESETS, *GPU_ALIASES], n=1, cutoff=0.6)
        hint = f"; did you mean {GPU_ALIASES.get(close[0], close[0])!r}?" if close else ""
        raise InstanceError(
            path, f"unknown GPU preset {value!r}{hint} (known: {', '.join(GPU_PRESETS)})"
        )
    return preset


def expand_hardware(section: Mapping[str, Any]) -> dict[str, Any]:
    """The ``hardware`` section with its ``preset`` (if any) replaced by the figures it names.

    Parameters
    ----------
    section
        The ``hardware`` mapping as written.

    Returns
    -------
    dict[str, Any]
        The preset's fields, overridden by every field written in ``section``.

    Raises
    ------
    InstanceError
        For an unknown preset name.
    """
    if section.get("preset") is None:
        return {key: value for key, value in section.items() if key != "preset"}
    preset = gpu_preset(section["preset"])
    values: dict[str, Any] = preset.fields()
    if section.get("host_bandwidth") is not None:
        # A written host_bandwidth stands for every host rate the section does
        # not write itself, the preset's included (docs/instance.md).
        for key in HOST_RATE_KEYS:
            values.pop(key, None)
    gpus = section.get("gpus_per_node")
    if preset.host_memory_per_gpu is not None and isinstance(gpus, int) and gpus > 0:
        values["host_memory_per_node"] = preset.host_memory_per_gpu * gpus
    values.update((key, value) for key, value in section.items() if key != "preset")
    return values


def expand_model(
    section: Mapping[str, Any], path: str, base_dir: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """A ``models.<role>`` mapping with its ``preset`` or ``hf_config`` replaced by the shape.

    Parameters
    ----------
    section
        The mapping as written.
    path
        Its field path (``models.actor``).
    base_dir
        Folder a relative ``hf_config`` path is relative to.

    Returns
    -------
    dict[str, Any]
        The shape the preset or config gives, overridden by every other
        field written in ``section``.

    Raises
    ------
    InstanceError
        For both ``preset`` and ``hf_config``, an unknown preset, an
        unusable config file, or an MoE or MLA field written beside a dense
        or grouped-query preset or config
        (:func:`~rlplan.rpeg.schema.mixture.dense_contradiction`).
    """
    preset, config = section.get("preset"), section.get("hf_config")
    if preset is not None and config is not None:
        raise InstanceError(f"{path}.hf_config", "give preset or hf_config, not both")
    written = {key: value for key, value in section.items() if key not in ("preset", "hf_config")}
    if preset is None and config is None:
        return written
    if preset is not None:
        named = model_preset(preset, f"{path}.preset")
        values, source = named.fields(), named.name
    else:
        values = read_hf_config(config, f"{path}.hf_config", base_dir)
        source = _config_name(config)
    problem = dense_contradiction(values, written, source)
    if problem is not None:
        raise InstanceError(f"{path}.{problem.path}", problem.message)
    values.update(written)
    return values


def _config_name(value: Any) -> str:
    """A short name of an ``hf_config`` entry for messages: ``Qwen3-8B/config.json``."""
    file = os.path.normpath(os.fspath(value))
    if os.path.basename(file) != "config.json":
        file = os.path.join(file, "config.json")
    folder = os.path.basename(os.path.dirname(file))
    return f"{folder}/config.json" if folder else "config.json"
