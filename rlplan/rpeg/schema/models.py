"""The ``models`` section's entries: the shape of a decoder-only transformer, or a rule.

Fields are declared in :data:`MODEL_FIELDS` (:mod:`rlplan.rpeg.schema.fields`);
``preset`` (a name of :data:`rlplan.rpeg.schema.model_presets.MODEL_PRESETS`) or
``hf_config`` (a Hugging Face ``config.json``) fill the fields not written.

An entry's ``kind`` is ``model`` (the default) or, for the reward only,
``rule``: a scoring function run on CPU workers (math verification, unit
tests) with the fields of :data:`RULE_FIELDS` (docs/instance.md, "Rule
rewards").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import (
    check_keys,
    mapping,
    nonnegative_float,
    positive_int,
    require,
)
from rlplan.rpeg.schema.fields import (
    BOOLEAN,
    NONNEGATIVE_FLOAT,
    POSITIVE_INT,
    Field,
    keys,
    read_fields,
)
from rlplan.rpeg.schema.mixture import GQA, MLA, MLA_FIELDS, MOE_FIELDS, mixture_problem
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
    *MOE_FIELDS,
    *MLA_FIELDS,
)
#: What a ``models.<role>`` entry is: a transformer (the default) or a rule.
MODEL_KIND, RULE_KIND = "model", "rule"
KINDS = (MODEL_KIND, RULE_KIND)
#: The one role a rule may stand for: every other role has weights to run or train.
RULE_ROLE = "reward"
#: Every key of a ``models.<role>`` transformer entry.
MODEL_KEYS = ("kind", "preset", "hf_config", *keys(MODEL_FIELDS))
#: The fields of a rule reward (``models.reward: {kind: rule, ...}``). verl's
#: NaiveRewardManager and DAPORewardManager score the batch in one loop in the
#: trainer's driver (volcengine/verl verl/workers/reward_manager/naive.py and
#: dapo.py, ``for i in range(len(data))``): one worker, the default. NeMo RL's
#: math environment splits the batch into ``env.math.num_workers`` chunks of
#: ceil(N / w) samples verified by as many Ray workers (NVIDIA-NeMo/RL v0.4.0
#: nemo_rl/environments/math_environment.py with utils.chunk_list_to_workers;
#: examples/configs/grpo_math_1B.yaml sets num_workers 8).
RULE_FIELDS = (
    Field(
        "seconds_per_sample",
        NONNEGATIVE_FLOAT,
        description="Seconds one worker takes to score one sample",
    ),
    Field("workers", POSITIVE_INT, 1, "Workers scoring samples in parallel"),
)
#: Every key of a rule entry.
RULE_KEYS = ("kind", *keys(RULE_FIELDS))


@dataclass(frozen=True)
class RuleReward:
    """A rule-based reward: a function scoring each sample on CPU workers.

    Attributes
    ----------
    seconds_per_sample
        Seconds one worker takes to score one sample (>= 0).
    workers
        Workers scoring in parallel; each takes an equal share of the samples.
    """

    seconds_per_sample: float
    workers: int = 1

    def __post_init__(self) -> None:
        nonnegative_float(self.seconds_per_sample, "seconds_per_sample")
        positive_int(self.workers, "workers")

    def stage_seconds(self, samples: int) -> float:
        """Seconds to score ``samples`` samples: ``ceil(samples / workers) * seconds_per_sample``.

        The samples are split into ``workers`` chunks of at most
        ``ceil(samples / workers)``; the stage ends with the largest chunk.
        """
        return math.ceil(samples / self.workers) * self.seconds_per_sample


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
    experts, experts_per_token, expert_ffn_dim, shared_experts, shared_expert_ffn_dim, dense_layers
        The mixture of experts (:mod:`rlplan.rpeg.schema.mixture`; ``experts``
        None: a dense model). ``shared_expert_ffn_dim`` defaults to
        ``shared_experts * expert_ffn_dim``.
    attention, q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim
        ``gqa`` or ``mla`` (multi-head latent attention) and the MLA ranks.
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

    def __post_init__(self) -> None:
        for name in ("layers", "hidden_dim", "ffn_dim", "vocab_size", "head_dim"):
            positive_int(getattr(self, name), name)
        problem = mixture_problem({name: getattr(self, name) for name in self.__dataclass_fields__})
        if problem is not None:
            raise problem
        if self.shared_experts and self.shared_expert_ffn_dim is None:
            object.__setattr__(
                self, "shared_expert_ffn_dim", self.shared_experts * self.expert_ffn_dim
            )
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
        """Mean width of the attention's score and value products per token.

        ``heads * head_dim`` (``hidden_dim`` mostly); under MLA the query-key
        heads are ``qk_nope_head_dim + qk_rope_head_dim`` wide and the value
        heads ``v_head_dim``, so their mean: ``heads * (qk + v) / 2``.
        """
        if self.attention == MLA:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            return self.heads * (qk + self.v_head_dim) // 2
        return self.heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        """Whether the model is a mixture of experts."""
        return self.experts is not None

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts: ``layers - dense_layers`` (0 for a dense model)."""
        return self.layers - self.dense_layers if self.is_moe else 0


def entry_kind(section: Any, path: str) -> str:
    """The ``kind`` of the ``models.<role>`` entry at ``path``: :data:`MODEL_KIND` unless given."""
    kind = mapping(section, path).get("kind")
    if kind is None:
        return MODEL_KIND
    if isinstance(kind, str) and kind in KINDS:
        return kind
    raise InstanceError(
        f"{path}.kind", f"unknown kind {describe(kind)} (allowed: {', '.join(KINDS)})"
    )


def parse_model(data: Any, path: str, base_dir: str | os.PathLike[str] | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from ``models.<role>``.

    Parameters
    ----------
    data
        The mapping as written: shape fields, or a ``preset`` name of
        :data:`rlplan.rpeg.schema.model_presets.MODEL_PRESETS` or an ``hf_config`` path, which
        the other fields override; ``kind``, if given, is ``model``.
    path
        Its field path (``models.actor``).
    base_dir
        Folder a relative ``hf_config`` path is relative to (the instance
        file's); None for the current folder.
    """
    section = mapping(data, path)
    if entry_kind(section, path) != MODEL_KIND:
        raise InstanceError(
            f"{path}.kind", f"a rule stands only for the reward (models.{RULE_ROLE}), not this role"
        )
    for key in keys(RULE_FIELDS):
        if key in section:
            raise InstanceError(
                f"{path}.{key}", "a field of a rule reward: add kind: rule (this entry is a model)"
            )
    check_keys(section, MODEL_KEYS, path)
    shape = {key: value for key, value in section.items() if key != "kind"}
    values = read_fields(expand_model(shape, path, base_dir), MODEL_FIELDS, path)
    try:
        return ModelSpec(**values)
    except InstanceError as exc:
        raise InstanceError(f"{path}.{exc.path}", exc.message) from None


def parse_rule(data: Any, path: str) -> RuleReward:
    """Build a :class:`RuleReward` from a ``models.reward`` entry of kind ``rule``.

    Raises
    ------
    InstanceError
        Naming a model field given to the rule, a missing or negative
        ``seconds_per_sample`` or a ``workers`` that is not a positive integer.
    """
    section = mapping(data, path)
    for key in section:
        if key in MODEL_KEYS and key != "kind":
            raise InstanceError(
                f"{path}.{key}",
                "a model field, but the reward is a rule (kind: rule takes "
                f"{', '.join(keys(RULE_FIELDS))})",
            )
    check_keys(section, RULE_KEYS, path)
    return RuleReward(**read_fields(section, RULE_FIELDS, path))


def parse_models(
    data: Any, algorithm: str, base_dir: str | os.PathLike[str] | None = None
) -> tuple[dict[str, ModelSpec], RuleReward | None, list[str]]:
    """Build the models of the ``models`` section that ``algorithm`` uses.

    Every role given is validated; a role the algorithm does not use is
    dropped with a warning. The reference model is the actor's architecture.

    Parameters
    ----------
    data
        The ``models`` section: role -> shape (see :func:`parse_model`), or
        for the reward a rule (see :func:`parse_rule`).
    algorithm
        The instance's algorithm (:data:`~rlplan.rpeg.schema.policy.REQUIRED_ROLES`).
    base_dir
        Folder relative ``hf_config`` paths are relative to.

    Returns
    -------
    tuple[dict[str, ModelSpec], RuleReward | None, list[str]]
        Role -> model (with ``reference``; without ``reward`` when it is a
        rule), the rule reward the algorithm uses (None: none, or a model),
        and the warnings.
    """
    section = mapping(data, "models")
    check_keys(section, KNOWN_ROLES, "models")
    models: dict[str, ModelSpec] = {}
    rule: RuleReward | None = None
    warnings = []
    for role in REQUIRED_ROLES[algorithm]:
        parsed = _parse_role(require(section, role, "models"), role, base_dir)
        if isinstance(parsed, RuleReward):
            rule = parsed
        else:
            models[role] = parsed
    for role in section:
        if role not in REQUIRED_ROLES[algorithm]:
            _parse_role(section[role], role, base_dir)
            warnings.append(f"warning: models.{role} is not used by {algorithm}; ignored")
    models["reference"] = models["actor"]
    return models, rule, warnings


def _parse_role(
    data: Any, role: str, base_dir: str | os.PathLike[str] | None
) -> ModelSpec | RuleReward:
    """The entry ``models.<role>``: a rule for a reward of kind ``rule``, else a model."""
    path = f"models.{role}"
    if role == RULE_ROLE and entry_kind(data, path) == RULE_KIND:
        return parse_rule(data, path)
    return parse_model(data, path, base_dir)
