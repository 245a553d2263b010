"""Pins (what-if): parts of a plan the user fixes, ``placement.pin`` in the instance.

A pin fixes any subset of a vertex's block (``origin`` and/or ``extent``, as in
plan files), its ``dp``/``pp``/``tp``, its micro-batching (``microbatches`` or
``micro_batch_size``), ``recompute``, ``sharding``, ``offload``,
``gpu_memory_utilization``, ``max_num_seqs``, the expert, expert tensor and
context parallel degrees ``ep``, ``etp`` and ``cp``, and any trained model's
staleness::

    placement:
      pin:
        actor.generate: {tp: 1, dp: 16}     # rollout on tp 1 across all GPUs
        actor.train: {recompute: full, block: {extent: [1, 2, 8]}}
        staleness: {actor: 1}

Pins are applied once, where the plan space is defined, so every backend
inherits them:

* strategy pins are a filter of :func:`rlplan.rpeg.model.candidates.strategy_problem` (so
  of :func:`rlplan.rpeg.model.candidates.enumerate_strategies` and of plan files), through
  :func:`rlplan.rpeg.model.pinning.pin_strategy_problem`;
* block pins are an allowed-block filter of the candidate directory
  (:meth:`rlplan.rpeg.model.candidates.CandidateDirectory.blocks`), which every consumer
  of blocks reads, through :func:`rlplan.rpeg.model.pinning.block_pin_problem`;
* staleness pins narrow ``optimizer.staleness_candidates`` when the instance
  is parsed.

A pinned value outside the plan-space lists of ``placement`` (or of
``optimizer.staleness_candidates``), an unknown vertex or field, or a field
that does not apply to the vertex's kind is a one-line
:class:`~rlplan.rpeg.errors.InstanceError` naming its path
(``placement.pin.actor.generate.tp: ...``). A pin the plan space cannot
satisfy (no strategy, or none that fits in memory) is an infeasibility,
diagnosed like any other (:func:`pin_words` names it).

This module parses pins and checks them against the instance; applying them
to blocks and strategies is :mod:`rlplan.rpeg.model.pinning`'s. The pinnable
strategy fields are those of plan files (:func:`rlplan.rpeg.strategy.plan_fields`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from rlplan.rpeg.errors import InstanceError, describe, did_you_mean
from rlplan.rpeg.schema.checks import (
    boolean,
    check_keys,
    mapping,
    nonnegative_int,
    positive_int,
    unit_fraction,
)
from rlplan.rpeg.schema.geometry import block_words, plan_space_blocks
from rlplan.rpeg.schema.parallel_layout import dense_pin_problem
from rlplan.rpeg.strategy import (
    DIMENSIONS,
    STRUCTURAL_FIELDS,
    Dimension,
    add_dimension_fields,
    all_plan_fields,
    field_kinds,
    kinds_words,
    plan_fields,
    value_word,
)
from rlplan.rpeg.templates import Kind, build_template

if TYPE_CHECKING:
    from rlplan.rpeg.schema.engine import EngineConfig
    from rlplan.rpeg.schema.hardware import Hardware
    from rlplan.rpeg.schema.instance import PlacementConfig
    from rlplan.rpeg.schema.models import ModelSpec
    from rlplan.rpeg.schema.optimizer import OptimizerConfig

#: Pin fields per vertex kind, in the order plan files write them.
STRATEGY_FIELDS: dict[Kind, tuple[str, ...]] = {kind: plan_fields(kind) for kind in Kind}
_ALL_FIELDS = ("block", *all_plan_fields())


def _pin_annotation(declared: Dimension) -> tuple[str, None]:
    return (f"{declared.values.__name__} | None", None)


@dataclass(frozen=True)
@add_dimension_fields(_pin_annotation)
class VertexPin:
    """The pinned fields of one vertex (``None``: free).

    Attributes
    ----------
    origin, extent
        The block's origin and extent (rack, node, gpu) as in plan files.
    dp, pp, tp, microbatches, micro_batch_size
        Structural strategy fields as in plan files; ``micro_batch_size`` is
        sequences per microbatch and replica, ``ceil(ceil(B*K/dp) / microbatches)``.
    recompute, sharding, offload, gpu_memory_utilization, max_num_seqs, ep, etp, cp
        One field per dimension of :data:`rlplan.rpeg.strategy.DIMENSIONS`.
    """

    origin: tuple[int, int, int] | None = None
    extent: tuple[int, int, int] | None = None
    dp: int | None = None
    pp: int | None = None
    tp: int | None = None
    microbatches: int | None = None
    micro_batch_size: int | None = None

    def pinned(self) -> dict[str, Any]:
        """The pinned fields by name (``origin``/``extent`` for the block), in field order."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass(frozen=True)
class Pins:
    """Every pin of an instance (``placement.pin``); empty by default.

    Attributes
    ----------
    vertices
        ``(vertex name, pin)`` pairs in template order.
    staleness
        ``(model, staleness)`` pairs of the pinned trained models.
    """

    vertices: tuple[tuple[str, VertexPin], ...] = ()
    staleness: tuple[tuple[str, int], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.vertices or self.staleness)

    def vertex(self, name: str) -> VertexPin | None:
        """The pin of vertex ``name`` (None when it has none)."""
        for pinned, pin in self.vertices:
            if pinned == name:
                return pin
        return None

    def pinned_fields(self, name: str) -> frozenset[str]:
        """Names of the fields pinned on vertex ``name`` (``block`` for origin or extent)."""
        pin = self.vertex(name)
        if pin is None:
            return frozenset()
        names = set(pin.pinned())
        if names & {"origin", "extent"}:
            names -= {"origin", "extent"}
            names.add("block")
        return frozenset(names)

    def staleness_of(self, model: str) -> int | None:
        """The pinned staleness of ``model`` (None when free)."""
        return dict(self.staleness).get(model)


def pin_words(pin: VertexPin) -> str:
    """A pin as it is written in the instance, e.g. ``{tp: 1, dp: 16}``."""
    parts = []
    for name, value in pin.pinned().items():
        shown = list(value) if isinstance(value, tuple) else value_word(value)
        parts.append(f"{name}: {shown}")
    return "{" + ", ".join(parts) + "}"


def _triple(raw: Any, path: str, minimum: int) -> tuple[int, int, int]:
    if (
        not isinstance(raw, list | tuple)
        or len(raw) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in raw)
    ):
        kind = "positive integers" if minimum > 0 else "integers >= 0"
        raise InstanceError(path, f"must be three {kind} [rack, node, gpu], got {describe(raw)}")
    return (raw[0], raw[1], raw[2])


def _parse_block(
    raw: Any, path: str, hardware: Hardware, placement: PlacementConfig
) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """Origin and extent of a block pin; each must match some block of the plan space."""

    section = mapping(raw, path)
    check_keys(section, ("origin", "extent"), path)
    if not section:
        raise InstanceError(path, "pin origin, extent or both")
    origin = (
        None if section.get("origin") is None else _triple(section["origin"], f"{path}.origin", 0)
    )
    extent = (
        None if section.get("extent") is None else _triple(section["extent"], f"{path}.extent", 1)
    )
    blocks = plan_space_blocks(
        hardware.racks,
        hardware.nodes_per_rack,
        hardware.gpus_per_node,
        placement.min_block_gpus,
        placement.node_blocks,
    )
    matching = [
        (block_origin, block_extent)
        for block_origin, block_extent in blocks
        if (origin is None or block_origin == origin) and (extent is None or block_extent == extent)
    ]
    if not matching:
        where = f"{path}.extent" if origin is None else f"{path}.origin" if extent is None else path
        described = " ".join(
            f"{key} {list(value)}"
            for key, value in (("origin", origin), ("extent", extent))
            if value
        )
        raise InstanceError(
            where,
            f"no block of the plan space has {described} (blocks are "
            f"{block_words(placement.node_blocks)}, or the whole "
            f"{hardware.racks}x{hardware.nodes_per_rack}x{hardware.gpus_per_node} cluster"
            + (
                f", at least {placement.min_block_gpus} GPUs"
                if placement.min_block_gpus > 1
                else ""
            )
            + ")",
        )
    return origin, extent


def _in_list(value: Any, allowed: tuple[Any, ...] | None, path: str, listed: str) -> None:
    if allowed is not None and value not in allowed:
        shown = ", ".join(value_word(a) for a in allowed)
        raise InstanceError(path, f"{value_word(value)} is not among {listed} ({shown})")


def _check_fields(section: Mapping[str, Any], path: str, kind: Kind) -> None:
    """Refuse unknown fields and fields of other vertex kinds; require at least one."""
    allowed = ("block", *plan_fields(kind))
    for key in section:
        if key in allowed:
            continue
        if key == "concurrency":
            raise InstanceError(
                f"{path}.{key}",
                "was renamed: pin max_num_seqs (the rollout engine's cap on running sequences) "
                "and, if wanted, gpu_memory_utilization",
            )
        if key in _ALL_FIELDS:
            raise InstanceError(f"{path}.{key}", f"applies to {kinds_words(field_kinds(key))}")
        raise InstanceError(
            f"{path}.{key}",
            f"unknown field{did_you_mean(key, _ALL_FIELDS)} (allowed: {', '.join(allowed)})",
        )
    if not section:
        raise InstanceError(path, f"pin at least one field ({', '.join(allowed)})")


def _parse_micro_batching(
    section: Mapping[str, Any], path: str, placement: PlacementConfig
) -> dict[str, int]:
    """The pinned ``microbatches`` or ``micro_batch_size`` (not both), from the plan space."""
    values = {
        name: positive_int(section[name], f"{path}.{name}")
        for name in ("microbatches", "micro_batch_size")
        if section.get(name) is not None
    }
    if len(values) == 2:
        raise InstanceError(
            f"{path}.micro_batch_size", "pin microbatches or micro_batch_size, not both"
        )
    forms = (("microbatches", "microbatches"), ("micro_batch_size", "micro_batch_sizes"))
    for name, listed in forms:
        if name in values:
            _in_list(
                values[name], getattr(placement, listed), f"{path}.{name}", f"placement.{listed}"
            )
    return values


def _parse_dimension(raw: Any, path: str, declared: Dimension, placement: PlacementConfig) -> Any:
    """A pinned value of ``declared``: well-formed and among its ``placement`` candidates."""
    if declared.values is int:
        value = positive_int(raw, path)
    elif declared.values is float:
        value = unit_fraction(raw, path, open_low=True, open_high=False)
    elif declared.values is bool:
        value = boolean(raw, path)
    else:
        if raw not in declared.choices:
            raise InstanceError(
                path, f"must be one of {declared.choice_words()}, got {describe(raw)}"
            )
        value = declared.values(raw)
    _in_list(value, getattr(placement, declared.name), path, declared.placement_key)
    return value


def _parse_vertex(
    raw: Any,
    path: str,
    kind: Kind,
    hardware: Hardware,
    placement: PlacementConfig,
    spec: ModelSpec | None = None,
) -> VertexPin:
    """One vertex's pin; ``spec`` is its model (to refuse expert degrees on a dense one)."""
    section = mapping(raw, path)
    _check_fields(section, path, kind)
    values: dict[str, Any] = {}
    if section.get("block") is not None:
        values["origin"], values["extent"] = _parse_block(
            section["block"], f"{path}.block", hardware, placement
        )
    for name in STRUCTURAL_FIELDS:
        if section.get(name) is not None:
            values[name] = positive_int(section[name], f"{path}.{name}")
    values.update(_parse_micro_batching(section, path, placement))
    for declared in DIMENSIONS:
        if section.get(declared.name) is not None:
            where = f"{path}.{declared.name}"
            values[declared.name] = _parse_dimension(
                section[declared.name], where, declared, placement
            )
            problem = (
                None
                if spec is None
                else dense_pin_problem(spec, declared.name, values[declared.name])
            )
            if problem is not None:
                raise InstanceError(where, problem)
    return VertexPin(**values)


def parse_pins(
    raw: Any,
    algorithm: str,
    engine: EngineConfig,
    hardware: Hardware,
    placement: PlacementConfig,
    optimizer: OptimizerConfig,
    *,
    rule_reward: bool = False,
    models: Mapping[str, ModelSpec] | None = None,
) -> Pins:
    """Build :class:`Pins` from ``placement.pin`` and check it against the plan space.

    Parameters
    ----------
    raw
        The ``placement.pin`` mapping (None: no pins).
    algorithm, engine
        Decide the template's vertices.
    hardware, placement, optimizer
        The plan space pinned values must lie in.
    rule_reward
        Whether the reward is a rule: its template has no ``reward.infer``.
    models
        The instance's models: when given, a pinned ep or etp other than 1 on
        a vertex of a dense model is refused
        (:func:`rlplan.rpeg.schema.parallel_layout.dense_pin_problem`).

    Returns
    -------
    Pins
        Vertex pins in template order and staleness pins.

    Raises
    ------
    InstanceError
        Naming the path of an unknown vertex, model or field, a malformed
        value, or a value outside the plan-space lists.
    """
    if raw is None:
        return Pins()
    section = mapping(raw, "placement.pin")
    template = build_template(
        algorithm,
        engine.recompute_logprobs,
        engine.reference_model,
        reward_delay=0.0 if rule_reward else None,
    )
    names = template.names
    for key in section:
        if key != "staleness" and key not in names:
            raise InstanceError(
                f"placement.pin.{key}",
                f"the {algorithm} instance has no such vertex"
                f"{did_you_mean(key, (*names, 'staleness'))} "
                f"(allowed: {', '.join(names)}, staleness)",
            )
    vertices = tuple(
        (
            vertex.name,
            _parse_vertex(
                section[vertex.name],
                f"placement.pin.{vertex.name}",
                vertex.kind,
                hardware,
                placement,
                None if models is None else models.get(vertex.model),
            ),
        )
        for vertex in template.vertices
        if section.get(vertex.name) is not None
    )
    staleness: list[tuple[str, int]] = []
    if section.get("staleness") is not None:
        stale = mapping(section["staleness"], "placement.pin.staleness")
        trained = template.trained_models
        for model, value in stale.items():
            path = f"placement.pin.staleness.{model}"
            if model not in trained:
                raise InstanceError(
                    path,
                    f"{algorithm} trains no such model{did_you_mean(model, trained)} "
                    f"(trained: {', '.join(trained)})",
                )
            steps = nonnegative_int(value, path)
            _in_list(
                steps,
                optimizer.staleness_candidates[model],
                path,
                f"optimizer.staleness_candidates.{model}",
            )
            staleness.append((model, steps))
    return Pins(vertices, tuple(sorted(staleness)))


def narrowed_staleness(
    candidates: Mapping[str, tuple[int, ...]], pins: Pins
) -> dict[str, tuple[int, ...]]:
    """``optimizer.staleness_candidates`` with each pinned model reduced to its pin."""
    narrowed = dict(candidates)
    for model, steps in pins.staleness:
        narrowed[model] = (steps,)
    return narrowed
