"""Strategy dimensions: how a vertex may run on its block, each declared once.

A vertex's strategy is its structural parallelism (``dp``, ``pp``, ``tp``,
``microbatches``) and one value per :class:`Dimension` of
:data:`DIMENSIONS` (docs/plan-space.md). A dimension's declaration says
everything the rest of the code needs to know about it:

* its name: the :class:`~rlplan.rpeg.model.cost.Strategy` field, the
  plan-file key and the pin key (``placement.pin.<vertex>.<name>``), and the
  name of its candidate list ``placement.<list name>`` of the instance (the
  name itself unless the declaration gives another);
* the vertex kinds it applies to; elsewhere a strategy holds its
  :attr:`Dimension.default`, which is also what a plan file omitting it means;
* its values: a ``str`` enum (plan files and YAML keep the enum's strings), a
  flag, a positive count or a fraction in (0, 1], and the default candidate
  list;
* how reports and exporters name it (:attr:`Dimension.label`, and
  :attr:`Dimension.words` per value), and its tag in
  :meth:`~rlplan.rpeg.model.cost.Strategy.label`.

Classes whose fields follow the dimensions (the strategy, a vertex's pin, the
``placement`` section) take them from :func:`add_dimension_fields` when they
are defined.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rlplan.rpeg.templates import Kind


class Recompute(StrEnum):
    """Activation checkpointing of a train vertex."""

    NONE = "none"
    FULL = "full"


class Sharding(StrEnum):
    """How a train vertex shards its states over data-parallel ranks."""

    #: Optimizer states over dp (the distributed optimizer).
    ZERO1 = "zero1"
    #: Weights, gradients and optimizer states over dp (FSDP full shard).
    ZERO3 = "zero3"


#: Structural strategy fields (every vertex has them), in plan-file order.
STRUCTURAL_FIELDS = ("dp", "pp", "tp")
#: The two plan-file forms of micro-batching (train and infer vertices).
MICROBATCH_FIELDS = ("microbatches", "micro_batch_size")
#: Vertex kinds with microbatches.
MICROBATCH_KINDS = frozenset({Kind.TRAIN, Kind.INFER})
#: Sequences per micro-batch and replica when an instance gives neither
#: ``placement.microbatches`` nor ``placement.micro_batch_sizes``.
DEFAULT_MICRO_BATCH_SIZES = (1, 2, 4, 8)

#: Kinds in the order sentences name them ("train and infer vertices").
_KIND_WORDS_ORDER = (Kind.TRAIN, Kind.INFER, Kind.GENERATE)


def value_word(value: Any) -> str:
    """A strategy value as instances and plan files spell it (``true``, ``full``, ``0.8``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Dimension:
    """One strategy dimension.

    Attributes
    ----------
    name
        Strategy field, plan-file key, pin key and ``placement.<name>`` list.
    kinds
        Vertex kinds it applies to.
    values
        What a value is: a ``str`` enum class (its members), ``bool`` (a flag),
        ``int`` (a positive count) or ``float`` (a fraction in (0, 1]).
    default
        The value of vertices it does not apply to, and of plan files that omit it.
    candidates
        The default ``placement.<name>`` list.
    label
        How framework-vocabulary reports name it (a column of ``report.md``).
    tag
        Its part of :meth:`Strategy.label <rlplan.rpeg.model.cost.Strategy.label>`
        when the value is not the default.
    words
        Framework words per value (None: the value itself).
    shards_over_dp
        Values that shard the weights over the data-parallel ranks (they
        enter the weight layout).
    list_name
        The key of its candidate list, ``placement.<list_name>`` (None: the name).
    written_at_default
        Whether plan files write the value when it is the default (False: a
        plan file shows it only where it is used, so plans of models that have
        no use for it read as before).
    mixture_only
        Whether only mixture-of-experts models may take a value other than the
        default (expert parallelism: a dense model has no experts).
    """

    name: str
    kinds: frozenset[Kind]
    values: type
    default: Any
    candidates: tuple[Any, ...]
    label: str
    tag: Callable[[Any], str]
    words: Mapping[Any, str] | None = None
    shards_over_dp: frozenset[Any] = field(default_factory=frozenset)
    list_name: str | None = None
    written_at_default: bool = True
    mixture_only: bool = False

    @property
    def list_key(self) -> str:
        """The key of its candidate list in the ``placement`` section."""
        return self.list_name or self.name

    @property
    def placement_key(self) -> str:
        """The instance's candidate list, ``placement.<list name>``."""
        return f"placement.{self.list_key}"

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """Every value it may take, in declaration order (None: a count or a fraction)."""
        if self.values is bool:
            return (False, True)
        if self.values in (int, float):
            return None
        return tuple(self.values)

    @property
    def numeric(self) -> bool:
        """Whether its values are numbers read as given (a count or a fraction), not choices."""
        return self.values in (int, float)

    def applies_to(self, kind: Kind) -> bool:
        """Whether vertices of ``kind`` have this dimension."""
        return kind in self.kinds

    @property
    def applies_words(self) -> str:
        """Where it applies, e.g. ``train and infer vertices only``."""
        return kinds_words(self.kinds)

    def choice_words(self, joiner: str = ", ") -> str:
        """Its choices as written in instances and plan files, e.g. ``none, full``."""
        choices = self.choices
        assert choices is not None, f"{self.name} takes a number, not a choice"
        return joiner.join(value_word(choice) for choice in choices)

    def value_words(self, value: Any) -> str:
        """A value in framework words (the value itself without :attr:`words`)."""
        if self.words is None:
            return value_word(value)
        return self.words[value]


def kinds_words(kinds: frozenset[Kind]) -> str:
    """Vertex kinds in words, e.g. ``train and infer vertices only``."""
    names = [kind.value for kind in _KIND_WORDS_ORDER if kind in kinds]
    return f"{' and '.join(names)} vertices only"


#: Every strategy dimension beside the structural fields, in plan-file order
#: (plan files write the rollout's two only on generate vertices, and the
#: expert and context parallel degrees, declared last, only where they are not 1).
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        name="recompute",
        kinds=frozenset({Kind.TRAIN}),
        values=Recompute,
        default=Recompute.NONE,
        candidates=(Recompute.NONE, Recompute.FULL),
        label="recompute",
        tag=lambda value: "recompute",
        words={Recompute.NONE: "off", Recompute.FULL: "full activation checkpointing"},
    ),
    Dimension(
        name="sharding",
        kinds=frozenset({Kind.TRAIN}),
        values=Sharding,
        default=Sharding.ZERO1,
        candidates=(Sharding.ZERO1, Sharding.ZERO3),
        label="sharding",
        tag=str,
        words={
            Sharding.ZERO1: "ZeRO-1 / distributed optimizer",
            Sharding.ZERO3: "ZeRO-3 / FSDP full shard",
        },
        shards_over_dp=frozenset({Sharding.ZERO3}),
    ),
    Dimension(
        name="offload",
        kinds=frozenset({Kind.TRAIN, Kind.INFER}),
        values=bool,
        default=False,
        candidates=(False, True),
        label="offload",
        tag=lambda value: "offload",
    ),
    Dimension(
        name="gpu_memory_utilization",
        kinds=frozenset({Kind.GENERATE}),
        values=float,
        # 0: not a rollout (vLLM refuses 0, CacheConfig.gpu_memory_utilization is gt=0, le=1).
        default=0.0,
        # The fraction of each GPU the rollout engine takes for its weights, KV
        # pool and workspace (docs/cost-model.md#memory), as the frameworks set it:
        # 0.5 verl (volcengine/verl verl/trainer/config/rollout/rollout.yaml,
        # actor_rollout_ref.rollout.gpu_memory_utilization), 0.6 NeMo RL
        # (NVIDIA-NeMo/RL examples/configs/grpo_math_1B.yaml,
        # policy.generation.vllm_cfg.gpu_memory_utilization), 0.9 vLLM's default
        # (vllm-project/vllm vllm/engine/arg_utils.py, EngineArgs; its newest
        # vllm/config/cache.py raises it to 0.92), 0.95 OpenRLHF (OpenRLHF/OpenRLHF
        # openrlhf/cli/train_ppo_ray.py, --vllm_gpu_memory_utilization); 0.8 is what the
        # published NeMo RL async and verl DAPO recipes set (instances/published/).
        candidates=(0.5, 0.6, 0.8, 0.9, 0.95),
        label="gpu_memory_utilization",
        tag=lambda value: f"u{value:g}",
    ),
    Dimension(
        name="max_num_seqs",
        kinds=frozenset({Kind.GENERATE}),
        values=int,
        default=0,
        # The engine's cap on running sequences: vLLM's default is 1024 on GPUs of
        # 70 GiB or more (A100 aside) and 256 elsewhere (vllm-project/vllm
        # vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults); verl's
        # verl/trainer/config/rollout/rollout.yaml has had both (1024, 256 at b178a3cd).
        candidates=(256, 1024),
        label="max_num_seqs",
        tag=lambda value: f"s{value}",
    ),
    Dimension(
        name="ep",
        kinds=frozenset({Kind.TRAIN, Kind.INFER, Kind.GENERATE}),
        values=int,
        default=1,
        # Expert parallel degree (docs/plan-space.md#expert-and-context-parallelism):
        # powers of two up to 256, the routed experts of DeepSeek-V3 and Kimi-K2;
        # a value is kept only where it divides the model's experts and fits the
        # vertex's layout (rlplan.rpeg.schema.parallel_layout).
        candidates=(1, 2, 4, 8, 16, 32, 64, 128, 256),
        label="expert_parallel",
        tag=lambda value: f"ep{value}",
        list_name="expert_parallel",
        written_at_default=False,
        mixture_only=True,
    ),
    Dimension(
        name="etp",
        kinds=frozenset({Kind.TRAIN, Kind.INFER}),
        values=int,
        default=1,
        # Expert tensor parallel degree, a divisor of tp: 1 (NeMo RL's and slime's
        # recipes) up to tp, Megatron's default (NVIDIA/Megatron-LM
        # megatron/training/arguments.py, validate_args: "if
        # args.expert_tensor_parallel_size is None: args.expert_tensor_parallel_size =
        # args.tensor_model_parallel_size").
        candidates=(1, 2, 4, 8),
        label="expert_tensor_parallel",
        tag=lambda value: f"etp{value}",
        list_name="expert_tensor_parallel",
        written_at_default=False,
        mixture_only=True,
    ),
    Dimension(
        name="cp",
        kinds=frozenset({Kind.TRAIN, Kind.INFER}),
        values=int,
        default=1,
        # Context parallel degree: off unless an instance lists more
        # (placement.context_parallel), so plan spaces of instances that do not
        # ask for it are unchanged; Qwen3-235B's long-context recipes use 2.
        candidates=(1,),
        label="context_parallel",
        tag=lambda value: f"cp{value}",
        list_name="context_parallel",
        written_at_default=False,
    ),
)


def dimension(name: str) -> Dimension:
    """The declared dimension called ``name`` (``KeyError`` when there is none)."""
    for declared in DIMENSIONS:
        if declared.name == name:
            return declared
    raise KeyError(name)


def shown_dimensions(strategies) -> tuple[Dimension, ...]:
    """The dimensions reports show for ``strategies``: those plan files always write,
    and the others where one of the strategies has a value other than the default."""
    strategies = tuple(strategies)
    return tuple(
        declared
        for declared in DIMENSIONS
        if declared.written_at_default
        or any(getattr(strategy, declared.name) != declared.default for strategy in strategies)
    )


def dimensions_of(kind: Kind) -> tuple[Dimension, ...]:
    """The dimensions vertices of ``kind`` have, in declaration order."""
    return tuple(declared for declared in DIMENSIONS if kind in declared.kinds)


def plan_fields(kind: Kind) -> tuple[str, ...]:
    """Strategy fields of a vertex of ``kind`` in the order plan files write them.

    The structural fields, micro-batching (train and infer), then the
    dimensions that apply to ``kind``. Pins take the same fields.
    """
    micro = MICROBATCH_FIELDS if kind in MICROBATCH_KINDS else ()
    return (*STRUCTURAL_FIELDS, *micro, *(d.name for d in dimensions_of(kind)))


def all_plan_fields() -> tuple[str, ...]:
    """Every strategy field of any kind, structural first, then the dimensions."""
    return (*STRUCTURAL_FIELDS, *MICROBATCH_FIELDS, *(d.name for d in DIMENSIONS))


def field_kinds(name: str) -> frozenset[Kind]:
    """The kinds that have strategy field ``name`` (structural fields: every kind)."""
    if name in STRUCTURAL_FIELDS:
        return frozenset(Kind)
    if name in MICROBATCH_FIELDS:
        return MICROBATCH_KINDS
    return dimension(name).kinds


def add_dimension_fields(
    make: Callable[[Dimension], tuple[str, Any]], before: str | None = None
) -> Callable[[type], type]:
    """A class decorator adding one annotated attribute per dimension (before ``@dataclass``).

    Parameters
    ----------
    make
        A dimension -> (annotation, default value) of its attribute.
    before
        The existing attribute the new ones go before (None: after all).

    Returns
    -------
    callable
        The decorator; it reads :data:`DIMENSIONS` when the class is defined.
    """

    def decorate(cls: type) -> type:
        existing = dict(inspect.get_annotations(cls))
        added = {}
        for declared in DIMENSIONS:
            annotation, default = make(declared)
            added[declared.name] = annotation
            setattr(cls, declared.name, default)
        ordered: dict[str, Any] = {}
        for name, annotation in existing.items():
            if name == before:
                ordered.update(added)
            ordered[name] = annotation
        if before is None or before not in existing:
            ordered.update(added)
        cls.__annotations__ = ordered
        return cls

    return decorate
