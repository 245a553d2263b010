"""Mixture-of-experts and multi-head latent attention fields of ``models.<role>``.

A model is a mixture of experts (MoE) iff it gives ``experts``; its MoE
layers then hold a router, ``experts`` routed experts of width
``expert_ffn_dim`` of which a token uses ``experts_per_token``, and
``shared_experts`` always-on experts, while its first ``dense_layers`` layers
keep a dense feed-forward block of ``ffn_dim`` (docs/instance.md#mixture-of-experts-models).
``attention: mla`` replaces grouped-query attention by DeepSeek's multi-head
latent attention with its five ranks. :func:`mixture_problem` checks that the
fields agree with each other and :func:`dense_contradiction` refuses MoE or
MLA fields written over a dense preset or config; the parameter counts they
imply are in :mod:`rlplan.rpeg.model.parameters`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.fields import NONNEGATIVE_INT, POSITIVE_INT, Field, one_of

#: Attention kinds: grouped-query (the default) or multi-head latent attention.
GQA, MLA = "gqa", "mla"
ATTENTION_KINDS = (GQA, MLA)

#: The mixture-of-experts fields (all optional; a model is MoE iff ``experts`` is given).
MOE_FIELDS = (
    Field("experts", POSITIVE_INT, None, "Routed experts per MoE layer (dense model: not given)"),
    Field("experts_per_token", POSITIVE_INT, None, "Experts each token is routed to (top-k)"),
    Field("expert_ffn_dim", POSITIVE_INT, None, "Feed-forward width of one routed expert"),
    Field("shared_experts", NONNEGATIVE_INT, 0, "Always-on experts per MoE layer"),
    Field(
        "shared_expert_ffn_dim",
        POSITIVE_INT,
        None,
        "Total width of the shared experts (default: shared_experts * expert_ffn_dim)",
    ),
    Field("dense_layers", NONNEGATIVE_INT, 0, "Leading layers with a dense feed-forward block"),
)
#: The attention kind and the multi-head latent attention ranks.
MLA_FIELDS = (
    Field("attention", one_of(ATTENTION_KINDS, "gqa or mla"), GQA, "Attention kind"),
    Field("q_lora_rank", POSITIVE_INT, None, "MLA query compression rank (none: no compression)"),
    Field("kv_lora_rank", POSITIVE_INT, None, "MLA key/value latent rank"),
    Field("qk_rope_head_dim", POSITIVE_INT, None, "MLA rotary part of a query/key head"),
    Field("qk_nope_head_dim", POSITIVE_INT, None, "MLA non-rotary part of a query/key head"),
    Field("v_head_dim", POSITIVE_INT, None, "MLA value head width"),
)
#: The keys only a mixture of experts may give.
MOE_ONLY_KEYS = tuple(field.key for field in MOE_FIELDS if field.key != "experts")
#: The MLA ranks every ``attention: mla`` model needs (``q_lora_rank`` is optional).
MLA_REQUIRED = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
MLA_RANKS = ("q_lora_rank", *MLA_REQUIRED)


def mixture_problem(values: dict[str, Any]) -> InstanceError | None:
    """The first disagreement among a model's MoE and MLA fields (None: they agree).

    Parameters
    ----------
    values
        The model's fields by key (as :class:`~rlplan.rpeg.schema.models.ModelSpec` holds them).

    Returns
    -------
    InstanceError | None
        Naming the field (relative to the model entry): an MoE field without
        ``experts``, a missing ``experts_per_token`` or ``expert_ffn_dim``,
        ``experts_per_token`` above ``experts``, ``dense_layers`` not below
        ``layers``, a ``shared_expert_ffn_dim`` without shared experts, an MLA
        rank on a ``gqa`` model, or an ``mla`` model without its ranks.
    """
    experts = values.get("experts")
    if experts is None:
        for key in MOE_ONLY_KEYS:
            if values.get(key) not in (None, 0):
                return InstanceError(key, "applies to mixture-of-experts models: give experts too")
    else:
        for key in ("experts_per_token", "expert_ffn_dim"):
            if values.get(key) is None:
                return InstanceError(key, f"missing: a model with {experts} experts needs it")
        if values["experts_per_token"] > experts:
            return InstanceError(
                "experts_per_token",
                f"{values['experts_per_token']} exceeds the {experts} experts a token can use",
            )
        if values.get("dense_layers", 0) >= values["layers"]:
            return InstanceError(
                "dense_layers",
                f"{values['dense_layers']} leaves none of the {values['layers']} layers "
                "a mixture of experts",
            )
        if values.get("shared_expert_ffn_dim") is not None and not values.get("shared_experts"):
            return InstanceError(
                "shared_expert_ffn_dim", "given without shared_experts (the width of none)"
            )
    return _attention_problem(values)


def _attention_problem(values: dict[str, Any]) -> InstanceError | None:
    """An MLA rank on a ``gqa`` model, or an ``mla`` model missing a required rank."""
    if values.get("attention", GQA) == GQA:
        for key in MLA_RANKS:
            if values.get(key) is not None:
                return InstanceError(key, "an MLA rank: set attention: mla (or remove it)")
        return None
    for key in MLA_REQUIRED:
        if values.get(key) is None:
            return InstanceError(key, "missing: attention mla needs it")
    return None


def mixture_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The MoE and MLA fields of a shape worth writing out (none for a dense GQA model).

    The MoE fields are written only when ``experts`` is given, the MLA fields
    only for ``attention: mla``; unset optional fields (None) are left out, so
    a dense preset or config gives exactly the fields it gave before.
    """
    written: dict[str, Any] = {}
    if values.get("experts") is not None:
        for field in MOE_FIELDS:
            if values.get(field.key, field.default) is not None:
                written[field.key] = values.get(field.key, field.default)
    if values.get("attention", GQA) == MLA:
        written["attention"] = MLA
        for key in MLA_RANKS:
            if values.get(key) is not None:
                written[key] = values[key]
    return written


def dense_contradiction(
    base: Mapping[str, Any], written: Mapping[str, Any], source: str
) -> InstanceError | None:
    """An MoE or MLA field written over the shape of a dense or grouped-query model.

    Parameters
    ----------
    base
        The fields a preset or config gives.
    written
        The fields written beside it.
    source
        What gave ``base`` (the preset's name, the config file's).

    Returns
    -------
    InstanceError | None
        Naming the first written field (relative to the model entry) that
        makes a dense ``base`` a mixture of experts or a ``gqa`` one an MLA
        model; None when nothing contradicts (overriding an MoE preset's own
        fields is fine).
    """
    if base.get("experts") is None:
        for field in MOE_FIELDS:
            if written.get(field.key) not in (None, 0):
                return InstanceError(
                    field.key,
                    f"{source} is a dense model; for a mixture of experts name an MoE preset "
                    "or config, or write the whole shape without one",
                )
    if base.get("attention", GQA) != MLA:
        for key in ("attention", *MLA_RANKS):
            if written.get(key) not in (None, GQA):
                return InstanceError(
                    key,
                    f"{source} has grouped-query attention; for multi-head latent attention "
                    "name an MLA preset or config, or write the whole shape without one",
                )
    return None
