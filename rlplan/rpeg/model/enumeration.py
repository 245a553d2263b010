"""Which strategies a vertex may take on a block shape: the rules and their enumeration.

:func:`strategy_problem` is the rule (docs/plan-space.md#strategies): it says
why one strategy is outside the plan space, for plan files and pins.
:func:`enumerate_strategies` lists the strategies it accepts without testing
every combination of every dimension: it walks the structural degrees (tp, cp,
pp, dp), takes only the expert layouts (ep, etp) valid on each
(:func:`rlplan.rpeg.schema.parallel_layout.expert_layouts`, cached per model)
and only the micro-batch counts valid for the replica, and crosses them with
the other dimensions' listed values. What it yields is exactly the set the
rule accepts (tests/rpeg/test_moe_plan_space.py compares it with the rule applied to
the full product), in the order of that product.
"""

from __future__ import annotations

import itertools

from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.frameworks import FRAMEWORKS, Framework
from rlplan.rpeg.model.pinning import pin_strategy_problem
from rlplan.rpeg.schema.instance import Instance, PlacementConfig
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.parallel_layout import (
    LAYOUT_DIMENSIONS,
    context_problem,
    expert_layouts,
    expert_problem,
)
from rlplan.rpeg.strategy import DIMENSIONS, Dimension, dimensions_of, value_word
from rlplan.rpeg.templates import Kind, Vertex


def _powers_of_two_dividing(value: int) -> list[int]:
    result, power = [], 1
    while value % power == 0 and power <= value:
        result.append(power)
        power *= 2
    return result


def framework_of(instance: Instance) -> Framework | None:
    """The framework whose plan space ``instance`` is restricted to (None: the full space)."""
    name = instance.engine.framework
    return None if name is None else FRAMEWORKS[name]


def strategy_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
) -> str | None:
    """Why ``strategy`` is outside the plan space of ``vertex`` on ``shape`` (None if inside).

    The plan space is that of the ``placement`` lists narrowed by the
    vertex's pin (``placement.pin``, :mod:`rlplan.rpeg.schema.pins`): a strategy breaking
    a pinned field (or on a block shape other than a pinned extent) is
    outside it, so :func:`enumerate_strategies`, the candidate directory,
    every backend and plan files all honour strategy pins.
    """
    problem = _list_problem(instance, vertex, shape, strategy)
    if problem is not None:
        return problem
    return _narrowing_problem(instance, vertex, shape, strategy)


def _narrowing_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
) -> str | None:
    """Why the vertex's pin or the framework's rules leave ``strategy`` out (None: neither)."""
    pin = instance.placement.pin.vertex(vertex.name)
    if pin is not None:
        broken = pin_strategy_problem(pin, shape, strategy, instance.workload.sequences)
        if broken is not None:
            return f"placement.pin.{vertex.name}: {broken}"
    framework = framework_of(instance)
    if framework is not None:
        broken = framework.strategy_problem(vertex.name, vertex.kind, strategy)
        if broken is not None:
            return f"engine.framework: {broken}"
    return None


def _list_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], strategy: Strategy
) -> str | None:
    """Why ``strategy`` is outside the plan space of the ``placement`` lists (pins aside)."""
    spec = instance.models[vertex.model]
    size = shape[0] * shape[1] * shape[2]
    dp, pp, tp, mb = strategy.dp, strategy.pp, strategy.tp, strategy.microbatches
    if min(dp, pp, tp, mb, strategy.cp, strategy.ep, strategy.etp) < 1:
        return "dp, pp, tp, cp, ep, etp and microbatches must be positive"
    if strategy.gpus != size:
        return f"dp*cp*pp*tp = {strategy.gpus} differs from the block's {size} GPUs"
    problem = _structure_problem(instance, vertex, shape, dp, pp, tp)
    if problem is None:
        problem = expert_problem(spec, vertex.kind, dp, tp, strategy.cp, strategy.ep, strategy.etp)
    if problem is None:
        problem = context_problem(strategy.cp, instance.workload.total_length)
    if problem is not None:
        return problem
    replica = -(-instance.workload.sequences // dp)
    if vertex.kind is Kind.GENERATE:
        if mb != 1:
            return "a rollout has no microbatches (max_num_seqs and its KV pool batch it)"
    else:
        steps = instance.workload.optimizer_steps if vertex.kind is Kind.TRAIN else 1
        problem = _microbatch_problem(instance.placement, mb, replica, steps)
        if problem is not None:
            return problem
    for declared in _listed_dimensions(instance, vertex, spec):
        listed = getattr(instance.placement, declared.name)
        problem = _dimension_problem(declared, vertex.kind, listed, strategy)
        if problem is not None:
            return problem
    return None


def _structure_problem(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int], dp: int, pp: int, tp: int
) -> str | None:
    """Why (dp, pp, tp) breaks the tensor, head, layer or sequence rule (None: none does)."""
    spec = instance.models[vertex.model]
    problem = _tensor_problem(spec, vertex.kind, shape, tp)
    if problem is not None:
        return problem
    if spec.heads % tp:
        return f"tp {tp} does not divide the {spec.heads} attention heads of the {vertex.model}"
    if pp > spec.layers:
        return f"pp {pp} exceeds the {spec.layers} layers of the {vertex.model}"
    if dp > instance.workload.sequences:
        return f"dp {dp} exceeds the {instance.workload.sequences} sequences of a step"
    return None


def _listed_dimensions(instance: Instance, vertex: Vertex, spec: ModelSpec) -> list[Dimension]:
    """The dimensions whose value must be one of its ``placement`` list (or its default).

    A dimension a framework sets itself is checked by the framework's rule
    (:func:`strategy_problem` names the value); a dense model's expert
    dimensions are 1, which :func:`~rlplan.rpeg.schema.parallel_layout.expert_problem` checks.
    """
    framework = framework_of(instance)
    return [
        declared
        for declared in DIMENSIONS
        if not (
            framework is not None
            and framework.fixed_values(vertex.name, vertex.kind, declared.name)
        )
        and not (declared.mixture_only and not spec.is_moe)
    ]


def _tensor_problem(
    spec: ModelSpec, kind: Kind, shape: tuple[int, int, int], tp: int
) -> str | None:
    """Why ``tp`` is outside the plan space on ``shape`` (None: inside).

    tp is a power of two dividing the block's node width; a rollout of a
    mixture of experts may also span whole nodes (published DeepSeek-V3
    rollouts run vLLM at tp 32 over 4 nodes), tp a multiple of the node width
    dividing the block (docs/plan-space.md#expert-and-context-parallelism).
    """
    size = shape[0] * shape[1] * shape[2]
    if not tp & (tp - 1):
        if shape[2] % tp == 0:
            return None
        if kind is Kind.GENERATE and spec.is_moe and tp % shape[2] == 0 and size % tp == 0:
            return None
    return f"tp {tp} must be a power of two dividing the block's node width {shape[2]}"


def tensor_degrees(spec: ModelSpec, kind: Kind, shape: tuple[int, int, int]) -> list[int]:
    """Every tp of the plan space on ``shape`` (before the head and layer checks)."""
    size = shape[0] * shape[1] * shape[2]
    return [
        tp for tp in _powers_of_two_dividing(size) if _tensor_problem(spec, kind, shape, tp) is None
    ]


def dimension_values(instance: Instance, vertex: Vertex, declared: Dimension) -> tuple:
    """The values of ``declared`` the plan space gives ``vertex``: its ``placement`` list,
    or the values a framework sets itself (a ``fixed`` rule of ``engine.framework``)."""
    framework = framework_of(instance)
    if framework is not None:
        fixed = framework.fixed_values(vertex.name, vertex.kind, declared.name)
        if fixed is not None:
            return fixed
    return getattr(instance.placement, declared.name)


def _microbatch_problem(
    placement: PlacementConfig, mb: int, replica: int, steps: int = 1
) -> str | None:
    """Why ``mb`` microbatches of ``replica`` sequences are outside the ``placement`` lists.

    A train vertex's ``steps`` (``workload.optimizer_steps``) mini-batches
    each take ``mb / steps`` of the replica's microbatches, so ``mb`` must be a
    multiple of ``steps``; infer and generate vertices pass 1.
    """
    if mb > replica:
        return f"microbatches {mb} exceed the {replica} sequences per replica"
    if mb % steps:
        return (
            f"microbatches {mb} per replica are no multiple of workload.optimizer_steps "
            f"{steps} (each optimizer step trains an equal share of them)"
        )
    if mb not in placement.microbatch_counts(replica):
        if placement.microbatches is not None:
            allowed = ", ".join(map(str, placement.microbatches))
            return f"microbatches {mb} not among placement.microbatches ({allowed})"
        allowed = ", ".join(map(str, placement.micro_batch_sizes or ()))
        return (
            f"{mb} microbatches of {replica} sequences match no "
            f"placement.micro_batch_sizes ({allowed})"
        )
    return None


def _dimension_problem(
    declared: Dimension, kind: Kind, allowed: tuple, strategy: Strategy
) -> str | None:
    """Why ``strategy``'s value of ``declared`` is outside the plan space of a ``kind`` vertex.

    A dimension that does not apply to the kind must keep its default; one
    that does must take a value of ``allowed`` (its ``placement`` list, or a
    framework's fixed values: :func:`dimension_values`).
    """
    value = getattr(strategy, declared.name)
    if not declared.applies_to(kind):
        if value != declared.default:
            return f"{declared.name} applies to {declared.applies_words}"
        return None
    if value not in allowed:
        shown = f"'{value}'" if isinstance(value, str) else value_word(value)
        listed = ", ".join(value_word(choice) for choice in allowed)
        return f"{declared.name} {shown} not among {declared.placement_key} ({listed})"
    return None


def enumerate_strategies(
    instance: Instance, vertex: Vertex, shape: tuple[int, int, int]
) -> list[Strategy]:
    """Every strategy of the plan space (pins included) for ``vertex`` on a block of ``shape``.

    The strategies :func:`strategy_problem` accepts, in the order of the
    product of the dimensions' values (declaration order), then tp, pp and
    the micro-batch count; only valid structural degrees, expert layouts and
    micro-batch counts are generated.
    """
    pin = instance.placement.pin.vertex(vertex.name)
    if pin is not None and pin.extent is not None and tuple(shape) != pin.extent:
        return []
    spec = instance.models[vertex.model]
    applying = [declared.name for declared in dimensions_of(vertex.kind)]
    choices = {
        declared.name: _choices(instance, vertex, spec, declared)
        for declared in dimensions_of(vertex.kind)
    }
    position = {name: {value: i for i, value in enumerate(choices[name])} for name in applying}
    free = [name for name in applying if name not in LAYOUT_DIMENSIONS]
    settings = [
        dict(zip(free, combination, strict=True))
        for combination in itertools.product(*(choices[name] for name in free))
    ]
    ep_values, etp_values, cp_values = (choices.get(name, (1,)) for name in LAYOUT_DIMENSIONS)
    total = instance.workload.total_length
    cp_values = tuple(cp for cp in cp_values if context_problem(cp, total) is None)
    narrowed = pin is not None or framework_of(instance) is not None
    # Strategies per (setting, ep, etp, cp), each list in (tp, pp, microbatches) order.
    buckets: dict[tuple[int, int, int, int], list[Strategy]] = {}
    for tp, cp, pp, dp in _structures(instance, vertex, shape, cp_values):
        counts = _microbatch_counts(instance, vertex.kind, dp)
        for ep, etp in expert_layouts(spec, vertex.kind, dp, tp, cp, ep_values, etp_values):
            for number, setting in enumerate(settings):
                bucket = buckets.setdefault((number, ep, etp, cp), [])
                for mb in counts:
                    strategy = Strategy(dp, pp, tp, mb, ep=ep, etp=etp, cp=cp, **setting)
                    if narrowed and _narrowing_problem(instance, vertex, shape, strategy):
                        continue
                    bucket.append(strategy)

    def product_position(key: tuple[int, int, int, int]) -> tuple[int, ...]:
        values = {**settings[key[0]], "ep": key[1], "etp": key[2], "cp": key[3]}
        return tuple(position[name][values[name]] for name in applying)

    return [strategy for key in sorted(buckets, key=product_position) for strategy in buckets[key]]


def _choices(instance: Instance, vertex: Vertex, spec: ModelSpec, declared: Dimension) -> tuple:
    """The values of ``declared`` to enumerate for ``vertex`` (a dense model: no experts)."""
    if declared.mixture_only and not spec.is_moe:
        return (declared.default,)
    return tuple(dimension_values(instance, vertex, declared))


def _structures(instance: Instance, vertex: Vertex, shape: tuple[int, int, int], cps: tuple):
    """Every (tp, cp, pp, dp) with ``dp*cp*pp*tp`` the block's GPUs that the tensor, head,
    layer and sequence rules allow (:func:`_structure_problem`)."""
    spec = instance.models[vertex.model]
    size = shape[0] * shape[1] * shape[2]
    sequences = instance.workload.sequences
    for tp in tensor_degrees(spec, vertex.kind, shape):
        if spec.heads % tp:
            continue
        for cp in cps:
            if size % (tp * cp):
                continue
            rest = size // (tp * cp)
            for pp in range(1, min(rest, spec.layers) + 1):
                if rest % pp == 0 and rest // pp <= sequences:
                    yield tp, cp, pp, rest // pp


def _microbatch_counts(instance: Instance, kind: Kind, dp: int) -> tuple[int, ...]:
    """The micro-batch counts of the plan space for a ``kind`` vertex at data parallel ``dp``."""
    if kind is Kind.GENERATE:
        return (1,)
    placement = instance.placement
    replica = -(-instance.workload.sequences // dp)
    steps = instance.workload.optimizer_steps if kind is Kind.TRAIN else 1
    return tuple(
        mb
        for mb in placement.microbatch_counts(replica)
        if _microbatch_problem(placement, mb, replica, steps) is None
    )
