"""Reading a Hugging Face ``config.json`` as ``models.<role>`` fields, offline.

``models.<role>: {hf_config: path/to/config.json}`` reads the shape of a dense
model (Llama, Qwen2, Qwen3 ...) and of the mixtures of experts whose config
classes are known here (docs/instance.md#mixture-of-experts-models):

* ``qwen3_moe`` and ``qwen2_moe``: ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``mlp_only_layers`` and ``decoder_sparse_step``
  (a layer is dense when it is listed in ``mlp_only_layers`` or when
  ``(i + 1) % decoder_sparse_step != 0``: huggingface/transformers
  src/transformers/models/qwen3_moe/modeling_qwen3_moe.py, Qwen3MoeDecoderLayer,
  and qwen2_moe/modeling_qwen2_moe.py alike); Qwen2-MoE adds one shared expert
  of ``shared_expert_intermediate_size`` (Qwen2MoeSparseMoeBlock.shared_expert);
* ``deepseek_v2``, ``deepseek_v3`` and ``kimi_k2`` (Kimi-K2 "reuses the
  DeepSeekV3CausalLM architecture" and sets ``model_type: kimi_k2``:
  MoonshotAI/Kimi-K2 docs/deploy_guidance.md @c6157be): ``n_routed_experts``,
  ``n_shared_experts`` (of ``moe_intermediate_size`` each),
  ``first_k_dense_replace`` and the multi-head latent attention ranks;
* ``glm4_moe`` (GLM-4.5): the same expert keys with grouped-query attention
  (layers from ``first_k_dense_replace`` on are MoE, the shared experts are
  ``moe_intermediate_size * n_shared_experts`` wide: transformers
  src/transformers/models/glm4_moe/modeling_glm4_moe.py @a0699c97,
  Glm4MoeDecoderLayer and Glm4MoeMoE). Its partial rotary embedding does not
  change a parameter count.

Another configuration with experts is refused in one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.model_presets import shape_fields

#: ``config.json`` keys that mark a mixture of experts.
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")


def config_int(config: Mapping[str, Any], key: str, path: str, source: str) -> int:
    """The positive integer ``config[key]``.

    Raises
    ------
    InstanceError
        Naming ``<path>.<key>`` when it is missing or not a positive integer.
    """
    value = config.get(key)
    if value is None:
        raise InstanceError(f"{path}.{key}", f"missing in {source}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InstanceError(
            f"{path}.{key}", f"must be a positive integer in {source}, got {value!r}"
        )
    return value


def _optional_int(config: Mapping[str, Any], key: str, path: str, source: str) -> int | None:
    """``config[key]`` as a positive integer, None when missing or null."""
    return None if config.get(key) is None else config_int(config, key, path, source)


def _count(config: Mapping[str, Any], key: str, path: str, source: str, default: int = 0) -> int:
    """``config[key]`` as a non-negative integer (``default`` when missing or null)."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InstanceError(
            f"{path}.{key}", f"must be a non-negative integer in {source}, got {value!r}"
        )
    return value


def read_hf_config(
    value: Any, path: str, base_dir: str | os.PathLike[str] | None
) -> dict[str, Any]:
    """The ``models.<role>`` fields of a Hugging Face ``config.json``, read offline.

    Reads ``num_hidden_layers``, ``hidden_size``, ``intermediate_size``,
    ``vocab_size``, ``num_attention_heads`` (all required),
    ``num_key_value_heads`` (default: the attention heads), ``head_dim``
    (default ``hidden_size / num_attention_heads``) and
    ``tie_word_embeddings`` (default false, the default of the Llama, Qwen2
    and Qwen3 config classes), and for a known mixture of experts its
    experts and attention (module docstring). A multimodal config's
    ``text_config`` is read when the top level has no ``num_hidden_layers``.

    Parameters
    ----------
    value
        The ``hf_config`` entry: a path to ``config.json`` or to the folder
        holding it.
    path
        Field path of the entry (``models.actor.hf_config``) for errors.
    base_dir
        Folder a relative ``value`` is relative to (the instance file's);
        None for the current folder.

    Returns
    -------
    dict[str, Any]
        The fields :func:`~rlplan.rpeg.schema.model_presets.shape_fields` builds.

    Raises
    ------
    InstanceError
        For a file that cannot be read or is not a JSON object, a missing or
        non-positive field (named ``<path>.<config key>``), a hidden size the
        heads do not divide without ``head_dim``, dense layers that are not
        the leading ones, or a mixture of experts of another model type.
    """
    file = _config_file(value, path, base_dir)
    data = _load_config(file, path)
    config = data
    if "num_hidden_layers" not in data and isinstance(data.get("text_config"), dict):
        config = data["text_config"]
    source = os.path.basename(file)
    mixture = _mixture(config, path, source)
    return _config_shape(config, data, path, source, mixture)


def _config_file(value: Any, path: str, base_dir: str | os.PathLike[str] | None) -> str:
    """The file an ``hf_config`` entry names: ``config.json`` inside a folder, ``~`` expanded.

    Raises
    ------
    InstanceError
        For an entry that is not a non-empty path.
    """
    if not isinstance(value, str | os.PathLike) or not os.fspath(value).strip():
        raise InstanceError(path, f"must be the path of a Hugging Face config.json, got {value!r}")
    file = os.path.expanduser(os.fspath(value))
    if base_dir is not None and not os.path.isabs(file):
        file = os.path.join(os.fspath(base_dir), file)
    if os.path.isdir(file):
        file = os.path.join(file, "config.json")
    return file


def _load_config(file: str, path: str) -> dict[str, Any]:
    """The JSON object in ``file`` (at most 1 MiB).

    Raises
    ------
    InstanceError
        For a file that is too large, cannot be read or is not a JSON object.
    """
    try:
        if os.path.getsize(file) > 1 << 20:
            raise InstanceError(path, f"{file} is too large to be a config.json")
        with open(file, encoding="utf-8") as stream:
            data = json.load(stream)
    except OSError as exc:
        raise InstanceError(path, f"cannot read {file}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise InstanceError(path, f"{file} is not a JSON file: {first}") from None
    if not isinstance(data, dict):
        raise InstanceError(path, f"{file} must hold a JSON object")
    return data


def _config_shape(
    config: Mapping[str, Any],
    data: Mapping[str, Any],
    path: str,
    source: str,
    mixture: dict[str, Any],
) -> dict[str, Any]:
    """The model shape of a (text) config; ``data`` is the whole file, for a top-level tie.

    An MLA model's ``head_dim`` is its ``v_head_dim`` (its query-key heads
    are wider; the ranks give every width).

    Raises
    ------
    InstanceError
        For a missing or non-positive field, a hidden size the heads do not
        divide without ``head_dim``, or a ``tie_word_embeddings`` that is not a boolean.
    """
    layers = config_int(config, "num_hidden_layers", path, source)
    hidden = config_int(config, "hidden_size", path, source)
    ffn = config_int(config, "intermediate_size", path, source)
    vocab = config_int(config, "vocab_size", path, source)
    heads = config_int(config, "num_attention_heads", path, source)
    kv_heads = heads
    if config.get("num_key_value_heads") is not None:
        kv_heads = config_int(config, "num_key_value_heads", path, source)
    if mixture.get("attention") == MLA:
        head_dim = mixture["v_head_dim"]
    elif config.get("head_dim") is not None:
        head_dim = config_int(config, "head_dim", path, source)
    elif hidden % heads:
        raise InstanceError(
            f"{path}.head_dim",
            f"missing in {source}, and hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads}",
        )
    else:
        head_dim = hidden // heads
    tied = config.get("tie_word_embeddings", data.get("tie_word_embeddings", False))
    if not isinstance(tied, bool):
        raise InstanceError(
            f"{path}.tie_word_embeddings", f"must be true or false in {source}, got {tied!r}"
        )
    if mixture.get("dense_layers", 0) >= layers:
        raise InstanceError(
            f"{path}.num_hidden_layers",
            f"{layers} in {source} leaves no layer after the {mixture['dense_layers']} dense ones",
        )
    return shape_fields(
        layers=layers,
        hidden_dim=hidden,
        ffn_dim=ffn,
        vocab_size=vocab,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        tied_embeddings=tied,
        mixture=mixture,
    )


def _mixture(config: Mapping[str, Any], path: str, source: str) -> dict[str, Any]:
    """The MoE and MLA fields of a config (empty for a dense grouped-query model).

    Raises
    ------
    InstanceError
        For a mixture of experts of a model type not read here, or a bad expert field.
    """
    model_type = config.get("model_type")
    reader = _READERS.get(model_type) if isinstance(model_type, str) else None
    if reader is not None:
        return reader(config, path, source)
    for key in MOE_KEYS:
        if config.get(key):
            known = ", ".join(_READERS)
            raise InstanceError(
                f"{path}.{key}",
                f"{source} describes a mixture of experts of model_type {model_type!r}, "
                f"which is not read (read: {known}); write its fields instead",
            )
    return {}


def _qwen_moe(config: Mapping[str, Any], path: str, source: str) -> dict[str, Any]:
    """Qwen3-MoE (and the routed part of Qwen2-MoE): experts and the leading dense layers."""
    if not config.get("num_experts"):
        return {}  # num_experts 0: every layer dense (the config class's convention)
    layers = config_int(config, "num_hidden_layers", path, source)
    return {
        "experts": config_int(config, "num_experts", path, source),
        "experts_per_token": config_int(config, "num_experts_per_tok", path, source),
        "expert_ffn_dim": config_int(config, "moe_intermediate_size", path, source),
        "dense_layers": _qwen_dense_layers(config, layers, path, source),
    }


def _qwen2_moe(config: Mapping[str, Any], path: str, source: str) -> dict[str, Any]:
    """Qwen2-MoE: Qwen3-MoE's fields plus one shared expert of its own width."""
    values = _qwen_moe(config, path, source)
    shared = _count(config, "shared_expert_intermediate_size", path, source)
    if values and shared:
        values.update(shared_experts=1, shared_expert_ffn_dim=shared)
    return values


def _qwen_dense_layers(config: Mapping[str, Any], layers: int, path: str, source: str) -> int:
    """How many leading layers are dense (``mlp_only_layers``, ``decoder_sparse_step``).

    Raises
    ------
    InstanceError
        When the dense layers are not the leading ones (the schema's
        ``dense_layers`` describes only those), or for a malformed field.
    """
    listed = config.get("mlp_only_layers") or []
    if not isinstance(listed, list) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in listed
    ):
        raise InstanceError(
            f"{path}.mlp_only_layers",
            f"must be a list of layer indices below {layers} in {source}, got {listed!r}",
        )
    step = 1
    if config.get("decoder_sparse_step") is not None:
        step = config_int(config, "decoder_sparse_step", path, source)
    dense = sorted({i for i in range(layers) if i in listed or (i + 1) % step})
    if dense != list(range(len(dense))):
        key = "decoder_sparse_step" if step != 1 else "mlp_only_layers"
        raise InstanceError(
            f"{path}.{key}",
            f"makes layers {_layer_words(dense)} of {source} dense; only leading dense "
            "layers are modelled (dense_layers)",
        )
    return len(dense)


def _layer_words(indices: list[int]) -> str:
    """``0, 1, 3`` (at most eight indices, then ``...``)."""
    shown = ", ".join(str(i) for i in indices[:8])
    return shown + (", ..." if len(indices) > 8 else "")


def _routed(config: Mapping[str, Any], path: str, source: str) -> dict[str, Any]:
    """DeepSeek-V2/V3, Kimi-K2 and GLM-4.5's experts: routed, shared, leading dense layers."""
    if config.get("n_routed_experts") is None:
        return {}  # the DeepSeek config classes' dense model
    if _count(config, "moe_layer_freq", path, source, default=1) != 1:
        raise InstanceError(
            f"{path}.moe_layer_freq",
            f"must be 1 in {source}: only leading dense layers are modelled (dense_layers)",
        )
    if config.get("first_k_dense_replace") is None:
        raise InstanceError(f"{path}.first_k_dense_replace", f"missing in {source}")
    return {
        "experts": config_int(config, "n_routed_experts", path, source),
        "experts_per_token": config_int(config, "num_experts_per_tok", path, source),
        "expert_ffn_dim": config_int(config, "moe_intermediate_size", path, source),
        "shared_experts": _count(config, "n_shared_experts", path, source),
        "dense_layers": _count(config, "first_k_dense_replace", path, source),
    }


def _deepseek(config: Mapping[str, Any], path: str, source: str) -> dict[str, Any]:
    """DeepSeek-V2/V3 and Kimi-K2: the experts and the multi-head latent attention ranks."""
    values = _routed(config, path, source)
    values["attention"] = MLA
    values["q_lora_rank"] = _optional_int(config, "q_lora_rank", path, source)
    for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
        values[key] = config_int(config, key, path, source)
    return values


#: The config readers by ``model_type``.
_READERS: dict[str, Callable[[Mapping[str, Any], str, str], dict[str, Any]]] = {
    "qwen3_moe": _qwen_moe,
    "qwen2_moe": _qwen2_moe,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "kimi_k2": _deepseek,
    "glm4_moe": _routed,
}
