"""The ``engine`` section: facts about the RL framework that runs the step.

Fields are declared in :data:`ENGINE_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe, did_you_mean
from rlplan.rpeg.schema.checks import check_keys, mapping
from rlplan.rpeg.schema.fields import (
    BOOLEAN,
    FRACTION_OPEN_LOW,
    NONNEGATIVE_FLOAT,
    POSITIVE_FLOAT,
    Field,
    ValueType,
    check_fields,
    keys,
    one_of,
    read_fields,
)

#: Rollout workspace per GPU, bytes: what the engine keeps inside its
#: gpu_memory_utilization share beside weights and KV pool. vLLM's memory
#: profile of Llama-3-8B on one H100 at utilisation 0.9: "model weights take
#: 14.96GiB / non_torch_memory 1.79GiB / PyTorch activation peak memory 1.26GiB"
#: (vllm-project/vllm pull request 10511, comment of 2024-12-14):
#: (1.79 + 1.26) x 2^30 = 3.27e9 bytes. CUDA graphs (1-3 GiB per GPU in vLLM's
#: own log line) were captured outside that budget in those versions and are
#: not counted (docs/cost-model.md#rollout-engine-memory).
DEFAULT_ROLLOUT_WORKSPACE = 3.27e9

#: Host memory the training states are offloaded to (docs/cost-model.md#colocation).
OFFLOAD_MEMORY = ("pinned", "pageable")
#: vLLM sleep levels of a colocated rollout engine (docs/cost-model.md#colocation).
SLEEP_LEVELS = (1, 2)


#: RL frameworks whose plan spaces ``engine.framework`` may name
#: (:mod:`rlplan.rpeg.model.frameworks`, docs/plan-space.md#framework-plan-spaces).
FRAMEWORK_NAMES = ("verl", "nemo-rl", "openrlhf", "slime")


def framework_name(value: Any, path: str) -> str | None:
    """``value`` checked as a framework name (None: the full plan space)."""
    if value is None:
        return None
    if not isinstance(value, str) or value.strip() not in FRAMEWORK_NAMES:
        hint = did_you_mean(value, FRAMEWORK_NAMES)
        raise InstanceError(
            path,
            f"unknown framework {describe(value)} (one of {', '.join(FRAMEWORK_NAMES)}){hint}",
        )
    return value.strip()


FRAMEWORK_NAME = ValueType(
    "a framework name (" + ", ".join(FRAMEWORK_NAMES) + ") or null",
    framework_name,
    lambda limit: {"enum": [*FRAMEWORK_NAMES, None]},
)


#: Bytes/s a level-1 sleep backs an engine's weights up at: vLLM allocates a
#: fresh pinned host buffer for them at every sleep (``CuMemAllocator.sleep``,
#: vllm/device_allocator/cumem.py), which is slower than the copy. Measured:
#: "CPU RAM consumed by backup ~22 GiB ... Sleep latency 10.57s" for Qwen3-8B
#: on an A100 (vllm-project/vllm pull request 48337, comment of 2026-07-15):
#: 22 x 2^30 / 10.57 = 2.235e9 bytes/s. The sleep takes the slower of this and
#: the device-to-host link (docs/cost-model.md#colocation).
DEFAULT_SLEEP_BACKUP_RATE = 2.235e9
#: Fraction of the pinned host-to-device link a level-1 wake-up reaches (one
#: synchronous copy per allocation). Same measurement: "Wake latency 2.19s" for
#: the 22 GiB backup, 10.79e9 bytes/s, of the A100's 25.13e9 bytes/s pinned
#: PCIe Gen4 link (the a100 preset's rate): 0.43.
DEFAULT_WAKE_LINK_FRACTION = 0.43

ENGINE_FIELDS = (
    Field(
        "framework",
        FRAMEWORK_NAME,
        None,
        "The RL framework whose plan space the plan must lie in (null: every plan)",
    ),
    Field("flash_attention", BOOLEAN, True, "Attention scores are never materialised"),
    Field("sequence_packing", BOOLEAN, True, "Train and infer work on real tokens, unpadded"),
    Field(
        "recompute_logprobs", BOOLEAN, True, "Old log-probs are recomputed by an actor.infer vertex"
    ),
    Field("reference_model", BOOLEAN, True, "A frozen reference model scores the samples (KL)"),
    Field("cuda_graphs", BOOLEAN, True, "The rollout engine replays decode steps as CUDA graphs"),
    Field(
        "rollout_workspace",
        NONNEGATIVE_FLOAT,
        DEFAULT_ROLLOUT_WORKSPACE,
        "Memory per GPU the rollout engine needs beside weights and KV pool",
    ),
    Field(
        "offload_memory",
        one_of(OFFLOAD_MEMORY, "pinned or pageable"),
        "pinned",
        "Host memory offloaded training states live in: pinned or pageable",
    ),
    Field(
        "sleep_level",
        one_of(SLEEP_LEVELS, "1 or 2"),
        1,
        "vLLM sleep level of a colocated rollout: 1 keeps its weights in host memory, 2 drops them",
    ),
    Field(
        "sleep_backup_rate",
        POSITIVE_FLOAT,
        DEFAULT_SLEEP_BACKUP_RATE,
        "Bytes/s a level-1 sleep backs the engine's weights up at (pinned allocation and copy)",
    ),
    Field(
        "wake_link_fraction",
        FRACTION_OPEN_LOW,
        DEFAULT_WAKE_LINK_FRACTION,
        "Fraction of the pinned host-to-device rate a level-1 wake-up reaches",
    ),
)
ENGINE_KEYS = keys(ENGINE_FIELDS)


@dataclass(frozen=True)
class EngineConfig:
    """The ``engine`` section: facts about the RL framework (docs/instance.md).

    Attributes
    ----------
    framework
        The RL framework the plan is for (``verl``, ``nemo-rl``, ``openrlhf``,
        ``slime``): the plan space is narrowed to what it can express
        (:mod:`rlplan.rpeg.model.frameworks`); ``None``, the default, keeps
        every plan.
    flash_attention
        Attention scores are never materialised (default in verl, OpenRLHF
        and NeMo RL: their configs enable flash attention by default).
    sequence_packing
        Train and infer work on real tokens (verl ``use_remove_padding``, NeMo
        RL ``sequence_packing``); without it every sequence is padded to S+T.
    recompute_logprobs
        Old log-probs are recomputed by an ``actor.infer`` vertex (verl's
        ``compute_log_prob``, NeMo RL's ``get_logprobs``, OpenRLHF's
        ``make_experience``).
    rollout_workspace
        Bytes per GPU the rollout engine needs beside weights and KV pool.
    reference_model
        Whether a frozen reference model scores the samples (a KL term).
        KL-free recipes (DAPO, Dr. GRPO; verl with ``use_kl_loss`` and
        ``use_kl_in_reward`` false) drop ``reference.infer``; online DPO
        always needs it.
    cuda_graphs
        The rollout engine replays decode steps as CUDA graphs (vLLM's
        default); ``false`` is vLLM's ``enforce_eager`` (verl's rollout
        default until 2025), which adds ``hardware.eager_layer_overhead`` per
        layer to every decode step.
    offload_memory
        Whether offloaded training states live in pinned or pageable host
        memory, which sets the host rates their transfers use. Pinned by
        default: verl's offload helpers copy with ``.to("cpu",
        non_blocking=True)`` (pinned destination) or ``.cpu().pin_memory()``
        (volcengine/verl verl/utils/fsdp_utils.py, verl/utils/megatron_utils.py);
        NeMo RL's ``offload_before_refit``/``offload_after_refit`` move them
        with a plain ``.to("cpu")``, pageable (NVIDIA-NeMo/RL
        nemo_rl/models/policy/megatron_policy_worker.py).
    sleep_level
        vLLM sleep level of a colocated rollout engine. Level 1 copies the
        weights to host memory and back (NeMo RL ``self.llm.sleep(level=1)``,
        nemo_rl/models/generation/vllm/vllm_worker.py; OpenRLHF
        openrlhf/trainer/ray/vllm_engine.py); level 2 drops them and the
        refit reloads them (verl with vLLM >= 0.8.5,
        verl/third_party/vllm/__init__.py ``VLLM_SLEEP_LEVEL = 2``).
    sleep_backup_rate, wake_link_fraction
        How fast a level-1 sleep backs the weights up (bytes/s; the slower of
        this and the device-to-host link applies) and what fraction of the
        pinned host-to-device link its wake-up reaches (measured values by
        default, :data:`DEFAULT_SLEEP_BACKUP_RATE`).
    """

    framework: str | None = None
    flash_attention: bool = True
    sequence_packing: bool = True
    recompute_logprobs: bool = True
    rollout_workspace: float = DEFAULT_ROLLOUT_WORKSPACE
    reference_model: bool = True
    cuda_graphs: bool = True
    offload_memory: str = "pinned"
    sleep_level: int = 1
    sleep_backup_rate: float = DEFAULT_SLEEP_BACKUP_RATE
    wake_link_fraction: float = DEFAULT_WAKE_LINK_FRACTION

    def __post_init__(self) -> None:
        check_fields(self, ENGINE_FIELDS, "engine")


def parse_engine(data: Any) -> EngineConfig:
    """Build :class:`EngineConfig` from the optional ``engine`` section."""
    if data is None:
        return EngineConfig()
    section = mapping(data, "engine")
    check_keys(section, ENGINE_KEYS, "engine")
    return EngineConfig(**read_fields(section, ENGINE_FIELDS, "engine"))
