"""Named models for ``models.<role>: {preset: NAME}`` (docs/instance.md#presets-and-hf_config).

A preset copies the shape of a published model: the dense rows the fields of
its Hugging Face ``config.json``, the mixture-of-experts rows (Qwen3-MoE,
DeepSeek-V3, Kimi-K2, GLM-4.5) also their experts and, for DeepSeek-V3 and
Kimi-K2, their multi-head latent attention ranks
(docs/instance.md#mixture-of-experts-models). :func:`shape_fields` turns a
shape into ``models.<role>`` fields; :mod:`rlplan.rpeg.schema.hf_config`
builds the same fields from a config file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, did_you_mean
from rlplan.rpeg.schema.mixture import GQA, MLA, MLA_RANKS, MOE_FIELDS, mixture_fields


@dataclass(frozen=True)
class ModelPreset:
    """The shape of a published model, as its Hugging Face ``config.json`` gives it.

    Attributes
    ----------
    name
        Preset name as written in ``models.<role>.preset``.
    repository
        The Hugging Face repository whose ``config.json`` the shape is taken
        from (``huggingface.co/<repository>/blob/main/config.json``).
    layers, hidden_dim, ffn_dim, vocab_size
        ``num_hidden_layers``, ``hidden_size``, ``intermediate_size``, ``vocab_size``.
    attention_heads, kv_heads, head_dim
        ``num_attention_heads``, ``num_key_value_heads`` and ``head_dim``
        (``hidden_size / num_attention_heads`` where the config has none;
        ``v_head_dim`` for multi-head latent attention).
    tied_embeddings
        ``tie_word_embeddings``.
    experts, experts_per_token, expert_ffn_dim, shared_experts, shared_expert_ffn_dim, dense_layers
        The mixture of experts (None and 0 for a dense model):
        ``num_experts`` / ``n_routed_experts``, ``num_experts_per_tok``,
        ``moe_intermediate_size``, ``n_shared_experts`` (their total width,
        None: ``shared_experts * expert_ffn_dim``) and the leading dense
        layers (``first_k_dense_replace``).
    attention, q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim
        ``gqa`` or ``mla`` and the MLA ranks (None for grouped-query attention).
    """

    name: str
    repository: str
    layers: int
    hidden_dim: int
    ffn_dim: int
    vocab_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    tied_embeddings: bool
    experts: int | None = None
    experts_per_token: int | None = None
    expert_ffn_dim: int | None = None
    shared_experts: int = 0
    shared_expert_ffn_dim: int | None = None
    dense_layers: int = 0
    attention: str = GQA
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None

    @property
    def is_moe(self) -> bool:
        """Whether the preset is a mixture of experts."""
        return self.experts is not None

    def fields(self) -> dict[str, Any]:
        """The ``models.<role>`` fields this preset fills (see :func:`shape_fields`)."""
        mixture = {key: getattr(self, key) for key in (*MIXTURE_KEYS, "attention")}
        return shape_fields(
            layers=self.layers,
            hidden_dim=self.hidden_dim,
            ffn_dim=self.ffn_dim,
            vocab_size=self.vocab_size,
            attention_heads=self.attention_heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            tied_embeddings=self.tied_embeddings,
            mixture=mixture,
        )


#: The MoE fields and MLA ranks a preset or config may carry.
MIXTURE_KEYS = (*(field.key for field in MOE_FIELDS), *MLA_RANKS)


def shape_fields(
    *,
    layers: int,
    hidden_dim: int,
    ffn_dim: int,
    vocab_size: int,
    attention_heads: int,
    kv_heads: int,
    head_dim: int,
    tied_embeddings: bool,
    mixture: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A model shape as ``models.<role>`` fields.

    ``attention_heads`` is written only when the query width
    ``attention_heads * head_dim`` differs from ``hidden_dim`` (as in Qwen3);
    otherwise the schema derives it, so a preset gives the same parsed model
    as the hand-written fields. The ``mixture`` fields (experts, MLA ranks)
    are written only for a mixture of experts or an MLA model
    (:func:`~rlplan.rpeg.schema.mixture.mixture_fields`), so a dense shape
    gives exactly the fields it always gave.

    Returns
    -------
    dict[str, Any]
        ``layers``, ``hidden_dim``, ``ffn_dim``, ``vocab_size``, ``head_dim``,
        ``kv_heads``, ``gated_ffn`` (true: every model here has a SwiGLU
        feed-forward block), ``tied_embeddings`` and, when needed,
        ``attention_heads`` and the MoE and MLA fields.
    """
    values: dict[str, Any] = {
        "layers": layers,
        "hidden_dim": hidden_dim,
        "ffn_dim": ffn_dim,
        "vocab_size": vocab_size,
        "head_dim": head_dim,
        "kv_heads": kv_heads,
        "gated_ffn": True,
        "tied_embeddings": tied_embeddings,
    }
    if attention_heads * head_dim != hidden_dim:
        values["attention_heads"] = attention_heads
    values.update(mixture_fields(mixture or {}))
    return values


# Each row copies huggingface.co/<repository>/blob/main/config.json: name,
# repository, then num_hidden_layers, hidden_size, intermediate_size,
# vocab_size, num_attention_heads, num_key_value_heads, head_dim (hidden_size
# / num_attention_heads where the config has none), tie_word_embeddings.
_MODEL_ROWS = (
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B", 32, 4096, 14336, 128256, 32, 8, 128, False),
    ("llama-3.1-70b", "meta-llama/Llama-3.1-70B", 80, 8192, 28672, 128256, 64, 8, 128, False),
    # Llama-3 (the shipped instances' models): the Llama-3.1 shapes.
    ("llama-3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 14336, 128256, 32, 8, 128, False),
    ("llama-3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 28672, 128256, 64, 8, 128, False),
    ("llama-3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 8192, 128256, 32, 8, 64, True),
    ("llama-3.2-3b", "meta-llama/Llama-3.2-3B", 28, 3072, 8192, 128256, 24, 8, 128, True),
    ("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", 24, 896, 4864, 151936, 14, 2, 64, True),
    ("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B", 28, 1536, 8960, 151936, 12, 2, 128, True),
    ("qwen2.5-3b", "Qwen/Qwen2.5-3B", 36, 2048, 11008, 151936, 16, 2, 128, True),
    ("qwen2.5-7b", "Qwen/Qwen2.5-7B", 28, 3584, 18944, 152064, 28, 4, 128, False),
    ("qwen2.5-14b", "Qwen/Qwen2.5-14B", 48, 5120, 13824, 152064, 40, 8, 128, False),
    ("qwen2.5-32b", "Qwen/Qwen2.5-32B", 64, 5120, 27648, 152064, 40, 8, 128, False),
    ("qwen2.5-72b", "Qwen/Qwen2.5-72B", 80, 8192, 29568, 152064, 64, 8, 128, False),
    # Qwen2.5-Math-7B has the Qwen2.5-7B shape.
    ("qwen2.5-math-7b", "Qwen/Qwen2.5-Math-7B", 28, 3584, 18944, 152064, 28, 4, 128, False),
    # Qwen3: explicit head_dim 128, so the query width heads * 128 may differ
    # from hidden_size (4096 vs 2560 for Qwen3-4B, 8192 vs 5120 for Qwen3-32B).
    ("qwen3-4b", "Qwen/Qwen3-4B", 36, 2560, 9728, 151936, 32, 8, 128, True),
    ("qwen3-8b", "Qwen/Qwen3-8B", 36, 4096, 12288, 151936, 32, 8, 128, False),
    ("qwen3-14b", "Qwen/Qwen3-14B", 40, 5120, 17408, 151936, 40, 8, 128, False),
    ("qwen3-32b", "Qwen/Qwen3-32B", 64, 5120, 25600, 151936, 64, 8, 128, False),
)

# The mixtures of experts. No config.json of these models is in the public
# stores read; every field below is read in two framework copies of the
# configs, named per row: [MB] NVIDIA-NeMo/Megatron-Bridge @62f4704b
# src/megatron/bridge/models/qwen/qwen_provider.py (Qwen3MoEModelProvider,
# ..30B_A3B, ..235B_A22B) and src/megatron/bridge/models/deepseek/
# deepseek_provider.py (DeepSeekProvider, DeepSeekV3Provider); [SL]
# THUDM/slime @624b824a scripts/models/qwen3-30B-A3B.sh, qwen3-235B-A22B.sh,
# deepseek-v3.sh, kimi-k2.sh, glm4.5-355B-A32B.sh (Megatron arguments of the
# Hugging Face configs); [DS] deepseek-ai/DeepSeek-V3 @9b4e978
# inference/configs/config_671B.json; [QR] QwenLM/Qwen3 @7a2f61f
# Qwen3_Technical_Report.pdf Table 2 (layers, heads Q/KV, 128/8 experts) and
# section 2 ("excludes shared experts"); [KM] MoonshotAI/Kimi-K2 @c6157be
# README.md "Model Summary"; transformers' Glm4MoeModel ignores
# model.layers.92 (the MTP layer) of GLM-4.5's 92 + 1
# (huggingface/transformers src/transformers/models/glm4_moe/modeling_glm4_moe.py
# @a0699c97). Multi-token prediction layers are no part of the models here
# (NeMo RL and slime train without them). An MLA model's head_dim is its
# v_head_dim, its kv_heads its query heads (num_key_value_heads of the configs).
_MOE_PRESETS = (
    # [MB, SL, QR]: 48 layers, d 2048, dense FFN 6144 (unused: every layer is MoE,
    # mlp_only_layers [] / decoder_sparse_step 1, slime FIRST_K_DENSE_REPLACE=0),
    # 32 heads / 4 KV of kv_channels 128, 128 experts of 768, top-8, vocab 151936, untied.
    ModelPreset(
        "qwen3-30b-a3b",
        "Qwen/Qwen3-30B-A3B",
        48,
        2048,
        6144,
        151936,
        32,
        4,
        128,
        False,
        experts=128,
        experts_per_token=8,
        expert_ffn_dim=768,
    ),
    # [MB, SL, QR]: 94 layers, d 4096, dense FFN 12288 (unused), 64 heads / 4 KV of 128,
    # 128 experts of 1536, top-8, vocab 151936, untied.
    ModelPreset(
        "qwen3-235b-a22b",
        "Qwen/Qwen3-235B-A22B",
        94,
        4096,
        12288,
        151936,
        64,
        4,
        128,
        False,
        experts=128,
        experts_per_token=8,
        expert_ffn_dim=1536,
    ),
    # [DS, MB, SL]: 61 layers (the MTP module left out), d 7168, the first 3 dense with
    # FFN 18432 (n_dense_layers / first_k_dense_replace), 128 heads, 256 routed experts
    # of 2048 and 1 shared, top-8, MLA q_lora 1536, kv_lora 512, rope 64, nope 128,
    # v 128, vocab 129280, untied (MB share_embeddings_and_output_weights False).
    ModelPreset(
        "deepseek-v3",
        "deepseek-ai/DeepSeek-V3",
        61,
        7168,
        18432,
        129280,
        128,
        128,
        128,
        False,
        experts=256,
        experts_per_token=8,
        expert_ffn_dim=2048,
        shared_experts=1,
        dense_layers=3,
        attention=MLA,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
    ),
    # [SL, KM]: DeepSeek-V3's architecture with 64 heads, 384 routed experts of 2048
    # and 1 shared, top-8, 1 dense layer (FFN 18432), the same MLA ranks [SL],
    # vocab 163840 [SL] ("160K" [KM]), untied [SL].
    ModelPreset(
        "kimi-k2",
        "moonshotai/Kimi-K2-Instruct",
        61,
        7168,
        18432,
        163840,
        64,
        64,
        128,
        False,
        experts=384,
        experts_per_token=8,
        expert_ffn_dim=2048,
        shared_experts=1,
        dense_layers=1,
        attention=MLA,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
    ),
    # [SL]: 3 dense + 89 MoE layers, d 5120, dense FFN 12288, 96 heads / 8 KV of 128
    # (query width 12288), 160 routed experts of 1536 and 1 shared of 1536, top-8,
    # vocab 151552, untied (the QKV biases and partial rotary are left out).
    ModelPreset(
        "glm-4.5",
        "zai-org/GLM-4.5",
        92,
        5120,
        12288,
        151552,
        96,
        8,
        128,
        False,
        experts=160,
        experts_per_token=8,
        expert_ffn_dim=1536,
        shared_experts=1,
        dense_layers=3,
    ),
)
_MODELS = (*(ModelPreset(*row) for row in _MODEL_ROWS), *_MOE_PRESETS)

#: Model presets by name.
MODEL_PRESETS: dict[str, ModelPreset] = {preset.name: preset for preset in _MODELS}


def normalise(name: str) -> str:
    """Lower case, ``_`` and spaces as ``-``."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def preset_name(value: Any, path: str, what: str) -> str:
    """``value`` normalised as a preset name; an error unless it is non-empty text."""
    if not isinstance(value, str) or not value.strip():
        raise InstanceError(path, f"must be the name of a {what} preset, got {value!r}")
    return normalise(value)


def model_preset(value: Any, path: str) -> ModelPreset:
    """The model preset ``value`` names.

    Case and a Hugging Face organisation prefix are ignored
    (``Qwen/Qwen2.5-7B`` is ``qwen2.5-7b``), and so is an ``-Instruct``
    suffix: instruction-tuned models have their base model's shape.

    Raises
    ------
    InstanceError
        For an unknown name, with the closest one and every known one.
    """
    name = preset_name(value, path, "model")
    name = name.rsplit("/", 1)[-1]
    name = name.removeprefix("meta-")
    if name.endswith("-instruct"):
        name = name.removesuffix("-instruct")
    preset = MODEL_PRESETS.get(name)
    if preset is None:
        raise InstanceError(
            path,
            f"unknown model preset {value!r}{did_you_mean(name, MODEL_PRESETS)} "
            f"(known: {', '.join(MODEL_PRESETS)})",
        )
    return preset
