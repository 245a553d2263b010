"""Parameter counts: what a model stores and what a token uses (docs/cost-model.md#parameters).

A dense layer is attention plus a feed-forward block. A mixture-of-experts
layer is attention, a router (``d*E``), ``E`` routed experts of ``c*d*f_e``
and the shared experts (``c*d*f_s``), where ``c`` is 3 for gated
feed-forward blocks and 2 otherwise. The *total* parameters (what is stored,
trained, synced and offloaded) hold every expert; the *active* parameters
(what one token's FLOPs use) hold ``experts_per_token`` of them.

Attention is grouped-query (``d*(q + 2*kv*h) + q*d``) or multi-head latent
(:func:`attention_parameters`).
"""

from __future__ import annotations

from rlplan.rpeg.schema.mixture import MLA
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.templates import AC_MODEL


def gates(spec: ModelSpec) -> int:
    """Matrices of a feed-forward block: 3 gated (SwiGLU), else 2."""
    return 3 if spec.gated_ffn else 2


def attention_parameters(spec: ModelSpec) -> int:
    """Parameters of one layer's attention.

    Grouped-query: ``d*(q + 2*kv*h) + q*d`` with ``q = heads*h`` the query
    width. Multi-head latent (DeepSeek-V2/V3), with ``n`` heads, query-key
    heads ``r + o`` wide (rotary + the rest) and values ``v`` wide:

    * queries: ``d*c_q + c_q*n*(r+o)`` with a query rank ``c_q``, else ``d*n*(r+o)``;
    * keys and values: ``d*(c_kv + r) + c_kv*n*(o + v)`` (the latent and the
      shared rotary key, then its up-projections);
    * output: ``n*v*d``.

    Normalisation weights (a few thousand per layer) are left out.
    """
    d = spec.hidden_dim
    if spec.attention != MLA:
        q, kv, h = spec.q_width, spec.kv_heads, spec.head_dim
        return d * (q + 2 * kv * h) + q * d
    n, rope, nope, v = spec.heads, spec.qk_rope_head_dim, spec.qk_nope_head_dim, spec.v_head_dim
    if spec.q_lora_rank:
        queries = d * spec.q_lora_rank + spec.q_lora_rank * n * (rope + nope)
    else:
        queries = d * n * (rope + nope)
    keys_values = d * (spec.kv_lora_rank + rope) + spec.kv_lora_rank * n * (nope + v)
    return queries + keys_values + n * v * d


def dense_ffn_parameters(spec: ModelSpec) -> int:
    """Parameters of a dense feed-forward block: ``c*d*f``."""
    return gates(spec) * spec.hidden_dim * spec.ffn_dim


def expert_parameters(spec: ModelSpec) -> int:
    """Parameters of one routed expert: ``c*d*f_e`` (0 for a dense model)."""
    if not spec.is_moe:
        return 0
    return gates(spec) * spec.hidden_dim * spec.expert_ffn_dim


def shared_expert_parameters(spec: ModelSpec) -> int:
    """Parameters of a layer's shared experts: ``c*d*f_s`` (0 without any)."""
    if not spec.shared_experts:
        return 0
    return gates(spec) * spec.hidden_dim * spec.shared_expert_ffn_dim


def router_parameters(spec: ModelSpec) -> int:
    """Parameters of a layer's router: ``d*E`` (0 for a dense model)."""
    return spec.hidden_dim * spec.experts if spec.is_moe else 0


def layer_parameters(spec: ModelSpec) -> int:
    """Parameters of one dense layer: attention plus ``c*d*f``.

    ``d*(q + 2*kv*h) + q*d + c*d*f`` for grouped-query attention, so
    ``d*(d + 2*kv*h) + d*d + c*d*f`` for most models.
    """
    return attention_parameters(spec) + dense_ffn_parameters(spec)


def moe_layer_parameters(spec: ModelSpec) -> int:
    """Parameters of one MoE layer: attention, router, every routed and shared expert."""
    return (
        attention_parameters(spec)
        + router_parameters(spec)
        + spec.experts * expert_parameters(spec)
        + shared_expert_parameters(spec)
    )


def active_layer_parameters(spec: ModelSpec) -> int:
    """Parameters one token uses in an MoE layer: attention, router, k routed and the shared."""
    return (
        attention_parameters(spec)
        + router_parameters(spec)
        + spec.experts_per_token * expert_parameters(spec)
        + shared_expert_parameters(spec)
    )


def routed_parameters(spec: ModelSpec) -> int:
    """Parameters of every routed expert of the model: ``moe_layers*E*c*d*f_e``.

    The part expert parallelism shards (0 for a dense model).
    """
    if not spec.is_moe:
        return 0
    return spec.moe_layers * spec.experts * expert_parameters(spec)


def has_scalar_head(model: str) -> bool:
    """Critic and reward end in one value per token instead of the vocabulary."""
    return model in ("critic", "reward")


def has_value_head(model: str) -> bool:
    """The fused actor-critic ``ac`` (AC-share) ends in the vocabulary *and* a value head."""
    return model == AC_MODEL


def head_parameters(spec: ModelSpec, model: str) -> int:
    """Output head: ``V*d`` for the language models, ``d`` for scalar heads (critic, reward).

    The fused actor-critic ``ac`` has both: ``V*d + d`` (the actor's head
    plus a scalar value head, docs/templates.md).
    """
    if has_scalar_head(model):
        return spec.hidden_dim
    if has_value_head(model):
        return spec.vocab_size * spec.hidden_dim + spec.hidden_dim
    return spec.vocab_size * spec.hidden_dim


def _stored_head(spec: ModelSpec, model: str) -> int:
    """Head parameters stored beside the embedding (none for a tied language-model head)."""
    head = head_parameters(spec, model)
    if spec.tied_embeddings and not has_scalar_head(model):
        head -= spec.vocab_size * spec.hidden_dim
    return head


def body_parameters(spec: ModelSpec) -> int:
    """Parameters of every layer: dense layers and MoE layers."""
    if not spec.is_moe:
        return spec.layers * layer_parameters(spec)
    return spec.dense_layers * layer_parameters(spec) + spec.moe_layers * moe_layer_parameters(spec)


def parameter_count(spec: ModelSpec, model: str) -> int:
    """Total parameters ``P = layers + V*d + head`` (what is stored).

    With ``tied_embeddings`` the language models' head is the embedding
    itself (``P = layers + V*d``); it still costs its FLOPs
    (:func:`head_parameters`). Scalar heads (critic, reward, the value head
    of ``ac``) are never tied, so the fused actor-critic has
    ``P_actor + d`` parameters either way. A dense model's layers are
    ``L*P_l``.
    """
    return body_parameters(spec) + spec.vocab_size * spec.hidden_dim + _stored_head(spec, model)


def active_parameter_count(spec: ModelSpec, model: str) -> int:
    """Parameters one token uses: the total with only ``experts_per_token`` routed experts.

    Equal to :func:`parameter_count` for a dense model.
    """
    if not spec.is_moe:
        return parameter_count(spec, model)
    unused = spec.moe_layers * (spec.experts - spec.experts_per_token) * expert_parameters(spec)
    return parameter_count(spec, model) - unused
