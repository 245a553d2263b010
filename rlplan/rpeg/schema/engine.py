"""The ``engine`` section: facts about the RL framework that runs the step.

Fields are declared in :data:`ENGINE_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.schema.checks import check_keys, mapping
from rlplan.rpeg.schema.fields import (
    BOOLEAN,
    NONNEGATIVE_FLOAT,
    Field,
    check_fields,
    keys,
    read_fields,
)

#: Rollout workspace (CUDA graphs, activations, sampler) per GPU, bytes
#: (docs/cost-model.md; vLLM's profile run reserves about this much for an
#: 8B model beside weights and KV cache).
DEFAULT_ROLLOUT_WORKSPACE = 2e9

ENGINE_FIELDS = (
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
)
ENGINE_KEYS = keys(ENGINE_FIELDS)


@dataclass(frozen=True)
class EngineConfig:
    """The ``engine`` section: facts about the RL framework (docs/instance.md).

    Attributes
    ----------
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
    """

    flash_attention: bool = True
    sequence_packing: bool = True
    recompute_logprobs: bool = True
    rollout_workspace: float = DEFAULT_ROLLOUT_WORKSPACE
    reference_model: bool = True
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        check_fields(self, ENGINE_FIELDS, "engine")


def parse_engine(data: Any) -> EngineConfig:
    """Build :class:`EngineConfig` from the optional ``engine`` section."""
    if data is None:
        return EngineConfig()
    section = mapping(data, "engine")
    check_keys(section, ENGINE_KEYS, "engine")
    return EngineConfig(**read_fields(section, ENGINE_FIELDS, "engine"))
