"""The ``models`` section's entries: the shape of a decoder-only transformer.

Fields are declared in :data:`MODEL_FIELDS` (:mod:`rlplan.rpeg.schema.fields`);
``preset`` (a name of :data:`rlplan.rpeg.schema.presets.MODEL_PRESETS`) or
``hf_config`` (a Hugging Face ``config.json``) fill the fields not written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.checks import check_keys, mapping, positive_int, require
from rlplan.rpeg.schema.fields import BOOLEAN, POSITIVE_INT, Field, keys, read_fields
from rlplan.rpeg.schema.policy import KNOWN_ROLES, REQUIRED_ROLES
from rlplan.rpeg.schema.presets import expand_model

#: The shape of ``models.<role>``; the first four are required unless a
#: preset or ``hf_config`` gives them.
MODEL_FIELDS = (
    Field("layers", POSITIVE_INT, description="Transformer layers (num_hidden_layers)"),
    Field("hidden_dim", POSITIVE_INT, description="Hidden size (hidden_size)"),
    Field("ffn_dim", POSITIVE_INT, description="Feed-forward size (intermediate_size)"),
    Field("vocab_size", POSITIVE_INT, description="Vocabulary size"),
    Field("head_dim", POSITIVE_INT, 128, "Width of one attention head"),
    Field("kv_heads", POSITIVE_INT, None, "Key/value heads (default: the query heads)"),
    Field("gated_ffn", BOOLEAN, True, "Whether the feed-forward block is gated (SwiGLU)"),
    Field(
        "attention_heads",
        POSITIVE_INT,
        None,
        "Query heads when their width differs from hidden_dim (default: hidden_dim / head_dim)",
    ),
    Field("tied_embeddings", BOOLEAN, False, "Whether the output head shares the embedding"),
)
#: Every key of ``models.<role>``.
MODEL_KEYS = ("preset", "hf_config", *keys(MODEL_FIELDS))


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only transformer.

    Attributes
    ----------
    layers, hidden_dim, ffn_dim, vocab_size, head_dim
        The usual shape parameters.
    kv_heads
        Key/value heads (grouped-query attention); defaults to the head count.
    gated_ffn
        Whether the feed-forward block is gated (three matrices, SwiGLU).
    attention_heads
        Query heads when the query width ``attention_heads * head_dim``
        differs from ``hidden_dim`` (Qwen3: 64 heads of 128 on a hidden size
        of 5120); None (the default) means ``hidden_dim / head_dim``. A value
        equal to that is stored as None, so both spellings are one model.
    tied_embeddings
        Whether the language-model head shares the input embedding's
        weights (Hugging Face ``tie_word_embeddings``): such a model stores
        ``V*d`` parameters fewer.
    """

    layers: int
    hidden_dim: int
    ffn_dim: int
    vocab_size: int
    head_dim: int = 128
    kv_heads: int | None = None
    gated_ffn: bool = True
    attention_heads: int | None = None
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("layers", "hidden_dim", "ffn_dim", "vocab_size", "head_dim"):
            positive_int(getattr(self, name), name)
        if self.attention_heads is not None:
            positive_int(self.attention_heads, "attention_heads")
            if self.attention_heads * self.head_dim == self.hidden_dim:
                object.__setattr__(self, "attention_heads", None)
        if self.attention_heads is None and self.hidden_dim % self.head_dim:
            raise InstanceError(
                "hidden_dim",
                f"{self.hidden_dim} is not divisible by head_dim {self.head_dim} "
                "(give attention_heads when the query width differs from hidden_dim)",
            )
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        positive_int(self.kv_heads, "kv_heads")
        if self.heads % self.kv_heads:
            raise InstanceError(
                "kv_heads", f"{self.kv_heads} does not divide the head count {self.heads}"
            )

    @property
    def heads(self) -> int:
        """Attention (query) heads: ``attention_heads``, else ``hidden_dim / head_dim``."""
        if self.attention_heads is not None:
            return self.attention_heads
        return self.hidden_dim // self.head_dim

    @property
    def q_width(self) -> int:
        """Width of the query and attention output ``heads * head_dim`` (``hidden_dim`` mostly)."""
        return self.heads * self.head_dim


def parse_model(data: Any, path: str, base_dir: str | os.PathLike[str] | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from ``models.<role>``.

    Parameters
    ----------
    data
        The mapping as written: shape fields, or a ``preset`` name of
        :data:`rlplan.rpeg.schema.presets.MODEL_PRESETS` or an ``hf_config`` path, which
        the other fields override.
    path
        Its field path (``models.actor``).
    base_dir
        Folder a relative ``hf_config`` path is relative to (the instance
        file's); None for the current folder.
    """
    section = mapping(data, path)
    check_keys(section, MODEL_KEYS, path)
    values = read_fields(expand_model(section, path, base_dir), MODEL_FIELDS, path)
    try:
        return ModelSpec(**values)
    except InstanceError as exc:
        raise InstanceError(f"{path}.{exc.path}", exc.message) from None


def parse_models(
    data: Any, algorithm: str, base_dir: str | os.PathLike[str] | None = None
) -> tuple[dict[str, ModelSpec], list[str]]:
    """Build the models of the ``models`` section that ``algorithm`` uses.

    Every role given is validated; a role the algorithm does not use is
    dropped with a warning. The reference model is the actor's architecture.

    Parameters
    ----------
    data
        The ``models`` section: role -> shape (see :func:`parse_model`).
    algorithm
        The instance's algorithm (:data:`~rlplan.rpeg.schema.policy.REQUIRED_ROLES`).
    base_dir
        Folder relative ``hf_config`` paths are relative to.

    Returns
    -------
    tuple[dict[str, ModelSpec], list[str]]
        Role -> model (with ``reference``), and the warnings.
    """
    section = mapping(data, "models")
    check_keys(section, KNOWN_ROLES, "models")
    models: dict[str, ModelSpec] = {}
    warnings = []
    for role in REQUIRED_ROLES[algorithm]:
        models[role] = parse_model(require(section, role, "models"), f"models.{role}", base_dir)
    for role in section:
        if role not in models:
            parse_model(section[role], f"models.{role}", base_dir)
            warnings.append(f"warning: models.{role} is not used by {algorithm}; ignored")
    models["reference"] = models["actor"]
    return models, warnings
