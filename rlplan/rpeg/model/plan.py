"""Plans: a (block, strategy) per vertex, a staleness per trained model, a run order.

The plan file (JSON) is the contract between every solver, the simulator and
users; :func:`plan_from_json` checks a file against an instance and names the
first problem it finds.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Any

from rlplan.rpeg.errors import InfeasiblePlanError, PlanError, did_you_mean
from rlplan.rpeg.errors import describe as _short
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.candidates import CandidateDirectory, strategy_problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.pinning import block_pin_problem
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import Instance
from rlplan.rpeg.schema.limits import MAX_K_EVAL
from rlplan.rpeg.schema.parallel_layout import layout_field_problem
from rlplan.rpeg.strategy import (
    DIMENSIONS,
    MICROBATCH_KINDS,
    Dimension,
    all_plan_fields,
    dimensions_of,
)
from rlplan.rpeg.templates import AC_MODEL, FUSED, REWARD_VERTEX, SEPARATE, Kind, Vertex


@dataclass(frozen=True, slots=True)
class Placement:
    """Where and how one vertex runs."""

    block: Block
    strategy: Strategy


@dataclass(frozen=True)
class Plan:
    """A complete plan.

    Attributes
    ----------
    placements
        One placement per template vertex, in template order.
    staleness
        Staleness per trained model.
    order
        Optional run order as (vertex index, step) pairs; ``None`` lets the
        simulator use its deterministic list order.

    A plan of the fused actor-critic (AC-share) template of PPO
    (:mod:`rlplan.rpeg.templates`) is recognised by its staleness, which then
    names the fused model ``ac`` alone (:attr:`fused`); its placements
    follow that template (``ac.infer``, ``ac.train``). Plan files record
    the template as ``"template": "separate" | "ac_share"``.
    """

    placements: tuple[Placement, ...]
    staleness: tuple[tuple[str, int], ...]
    order: tuple[tuple[int, int], ...] | None = None

    @property
    def fused(self) -> bool:
        """Whether the plan uses the fused actor-critic (AC-share) template."""
        return staleness_fused(self.staleness)

    @property
    def template(self) -> str:
        """The plan's template name: ``separate`` or ``ac_share``."""
        return FUSED if self.fused else SEPARATE

    @property
    def staleness_map(self) -> dict[str, int]:
        """Staleness as a dict."""
        return dict(self.staleness)

    def with_placement(self, vertex: int, placement: Placement) -> Plan:
        """A copy with one vertex moved (the order is dropped)."""
        placements = list(self.placements)
        placements[vertex] = placement
        return Plan(tuple(placements), self.staleness, None)

    def with_staleness(self, model: str, value: int) -> Plan:
        """A copy with one model's staleness changed (the order is dropped)."""
        staleness = tuple((m, value if m == model else s) for m, s in self.staleness)
        return Plan(self.placements, staleness, None)

    def with_order(self, order: tuple[tuple[int, int], ...] | None) -> Plan:
        """A copy with another run order."""
        return replace(self, order=order)


def staleness_fused(staleness: tuple[tuple[str, int], ...]) -> bool:
    """Whether a plan with ``staleness`` uses the fused (AC-share) template: it names ``ac``."""
    return any(model == AC_MODEL for model, _ in staleness)


def make_staleness(values: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """Canonical (sorted) staleness tuple."""
    return tuple(sorted(values.items()))


def vertex_to_json(
    directory: CandidateDirectory, vertex: int, placement: Placement
) -> dict[str, Any]:
    """One vertex's placement in plan-file form, every field that applies to it explicit
    (the expert and context parallel degrees only where they are not 1)."""
    strategy = placement.strategy
    kind = directory.template.vertices[vertex].kind
    entry: dict[str, Any] = {
        "block": block_to_json(directory, placement.block),
        "dp": strategy.dp,
        "pp": strategy.pp,
        "tp": strategy.tp,
    }
    if kind in MICROBATCH_KINDS:
        entry["microbatches"] = strategy.microbatches
        entry["micro_batch_size"] = directory.cost.microbatch_sequences(strategy)
    for declared in dimensions_of(kind):
        value = getattr(strategy, declared.name)
        if declared.written_at_default or value != declared.default:
            entry[declared.name] = _plain(value)
    return entry


def block_to_json(directory: CandidateDirectory, block: Block) -> dict[str, Any]:
    """A block as plan files write it: its pool's name first on a cluster of several pools."""
    if not directory.cluster.pooled:
        return block.to_json()
    return {"pool": directory.cluster.pool_name(block), **block.to_json()}


def _plain(value: Any) -> Any:
    """A strategy value as JSON writes it (an enum member as its string)."""
    return str(value) if isinstance(value, str) else value


def plan_to_json(plan: Plan, directory: CandidateDirectory) -> dict[str, Any]:
    """The plan as the JSON document of the specification (section 7, v2 fields).

    The document names the instance it was made for and records its
    :func:`~rlplan.rpeg.schema.instance.instance_fingerprint` under ``"instance"``;
    :func:`plan_from_json` refuses it for an instance with another one.
    PPO plans record their template (``"template": "separate"`` or
    ``"ac_share"``, the fused actor-critic).
    """
    directory = directory.for_plan(plan)
    template = directory.template
    vertices = {
        vertex.name: vertex_to_json(directory, index, placement)
        for index, (vertex, placement) in enumerate(
            zip(template.vertices, plan.placements, strict=True)
        )
    }
    document: dict[str, Any] = {
        "instance": {
            "name": directory.instance.name,
            "fingerprint": instance_fingerprint(directory.instance),
        },
        "algorithm": directory.instance.algorithm,
        "k_eval": directory.instance.k_eval,
        **({"template": plan.template} if directory.instance.algorithm == "ppo" else {}),
        "staleness": dict(plan.staleness),
        "vertices": vertices,
    }
    if plan.order is not None:
        document["order"] = [[template.vertices[v].name, step] for v, step in plan.order]
    return document


def _int_field(data: dict[str, Any], key: str, path: str) -> int:
    if key not in data:
        raise PlanError(f"{path}.{key}", "missing")
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlanError(f"{path}.{key}", f"must be a positive integer, got {_short(value)}")
    return value


def plan_from_json(data: Any, directory: CandidateDirectory) -> Plan:
    """Check a plan document against the instance and build the :class:`Plan`.

    Raises
    ------
    PlanError
        For a ``result.json`` document instead of a plan, a plan whose
        recorded instance fingerprint is not this instance's (a plan without
        one, hand-written or published, is checked on its content alone),
        a missing or unknown vertex, a block outside the cluster or the
        plan space, a strategy whose dp*pp*tp differs from the block's GPU
        count or whose tp does not divide the node width, a bad staleness or
        a malformed order, or a ``template`` the instance does not allow
        (``ac_share`` needs ``optimizer.staleness_candidates.ac_share``).
        (Whether the order is topological is checked by the simulator,
        which knows the edges.)
    InfeasiblePlanError
        For a rollout whose engine would not start: its
        ``gpu_memory_utilization`` leaves a KV pool too small for one
        sequence of ``S + T`` tokens (the message names the shortfall).
    """
    if not isinstance(data, dict):
        raise PlanError("plan", "must be a JSON object")
    if "vertices" not in data and {"status", "solver"} <= set(data):
        raise PlanError(
            "plan", "this is a result.json; pass the plan.json written next to it instead"
        )
    _check_instance(data.get("instance"), directory)
    directory = directory.variant(_template_from_json(data, directory))
    _check_header(data, directory)
    placements, defaulted = _placements_from_json(data.get("vertices"), directory)
    staleness = _staleness_from_json(data.get("staleness", {}), directory)
    order = None
    if data.get("order") is not None:
        order = _parse_order(data["order"], directory, defaulted)
    return Plan(placements, make_staleness(staleness), order)


def _check_header(data: dict[str, Any], directory: CandidateDirectory) -> None:
    """Refuse an unknown top-level key, or an algorithm or ``k_eval`` not the instance's.

    Raises
    ------
    PlanError
        Naming the first such key.
    """
    instance = directory.instance
    allowed = ("algorithm", "instance", "k_eval", "order", "staleness", "template", "vertices")
    for key in data:
        if key not in allowed:
            raise PlanError(
                f"plan.{key}",
                f"unknown key{did_you_mean(key, allowed)} (allowed: {', '.join(allowed)})",
            )
    if data.get("algorithm", instance.algorithm) != instance.algorithm:
        raise PlanError(
            "plan.algorithm",
            f"plan is for {_short(data['algorithm'])} but the instance runs {instance.algorithm!r}",
        )
    if data.get("k_eval", instance.k_eval) != instance.k_eval:
        raise PlanError(
            "plan.k_eval",
            f"plan has k_eval {_short(data['k_eval'])}, the instance {instance.k_eval}",
        )


def _placements_from_json(
    vertices: Any, directory: CandidateDirectory
) -> tuple[tuple[Placement, ...], int | None]:
    """The placement of every template vertex, and which one a v1 plan lacked (else None).

    Raises
    ------
    PlanError
        For a ``vertices`` entry that is not an object, an unknown or missing
        vertex, or a placement :func:`_placement_from_json` refuses.
    """
    instance, template = directory.instance, directory.template
    if not isinstance(vertices, dict):
        raise PlanError("plan.vertices", "missing or not an object of vertex name -> placement")
    for name in vertices:
        if name == REWARD_VERTEX and instance.reward_rule is not None:
            raise PlanError(
                f"plan.vertices.{name}",
                "the instance's reward is a rule (models.reward kind rule), a CPU stage "
                "without a placement: remove this entry",
            )
        if name not in template.names:
            raise PlanError(
                f"plan.vertices.{name}",
                f"the {instance.algorithm} instance has no such vertex"
                f"{did_you_mean(name, template.names)} (vertices: {', '.join(template.names)})",
            )
    placements: list[Placement | None] = []
    for vertex in template.vertices:
        path = f"plan.vertices.{vertex.name}"
        entry = vertices.get(vertex.name)
        if entry is None and vertex.name == "actor.infer" and "actor.train" in vertices:
            # A v1 plan: old log-probs run where the actor trains (verl, NeMo RL
            # and OpenRLHF compute them on the actor's training workers).
            placements.append(None)
            continue
        placements.append(_placement_from_json(entry, directory, vertex, path))
    defaulted = None
    for index, placement in enumerate(placements):
        if placement is None:
            placements[index] = _logprob_default(directory, placements, index)
            defaulted = index
    return tuple(p for p in placements if p is not None), defaulted


def _placement_from_json(
    entry: Any, directory: CandidateDirectory, vertex: Vertex, path: str
) -> Placement:
    """One plan-file vertex's placement, checked against the cluster, pins and plan space.

    Raises
    ------
    PlanError
        For a missing entry or block, an unknown key, a block outside the
        cluster or off the vertex's pins, or a strategy outside the plan space.
    """
    instance = directory.instance
    if not isinstance(entry, dict):
        raise PlanError(path, "missing placement for this vertex")
    keys = _vertex_keys()
    extra = sorted(set(entry) - set(keys))
    if extra:
        raise PlanError(
            f"{path}.{extra[0]}",
            f"unknown key{did_you_mean(extra[0], keys)} (allowed: {', '.join(keys)})",
        )
    if "block" not in entry:
        raise PlanError(f"{path}.block", "missing")
    block = directory.cluster.block_from_json(entry["block"], f"{path}.block")
    pins = instance.placement.pin
    pinned_off = block_pin_problem(pins, vertex.name, block, directory.cluster.names)
    if pinned_off is not None:
        raise PlanError(f"{path}.block", pinned_off)
    strategy = _strategy_from_json(entry, directory, vertex, path)
    problem = strategy_problem(instance, vertex, block.shape, strategy)
    if problem is not None:
        raise PlanError(_problem_path(instance, vertex, strategy, path, problem), problem)
    if vertex.kind is Kind.GENERATE:
        refused = directory.cost_of(block.extent).rollout_refusal(vertex.model, strategy)
        if refused is not None:
            raise InfeasiblePlanError(path, refused)
    return Placement(block, strategy)


def _problem_path(
    instance: Instance, vertex: Vertex, strategy: Strategy, path: str, problem: str
) -> str:
    """The path a plan-space ``problem`` of ``strategy`` is reported at: the vertex's, or
    its ``ep``, ``etp`` or ``cp`` field when an expert or context rule is what it breaks
    (docs/plan-space.md#expert-and-context-parallelism)."""
    found = layout_field_problem(
        instance.models[vertex.model],
        vertex.kind,
        strategy.dp,
        strategy.tp,
        strategy.cp,
        strategy.ep,
        strategy.etp,
        instance.workload.total_length,
    )
    if found is not None and found[1] == problem:
        return f"{path}.{found[0]}"
    return path


def _staleness_from_json(raw_staleness: Any, directory: CandidateDirectory) -> dict[str, int]:
    """The staleness of every trained model, each among the instance's candidates.

    Raises
    ------
    PlanError
        For an entry that is not an object, a missing, malformed or
        non-candidate value, or a model the algorithm does not train.
    """
    instance = directory.instance
    if not isinstance(raw_staleness, dict):
        raise PlanError("plan.staleness", "must be an object of model -> staleness")
    staleness = {}
    for model in directory.template.trained_models:
        value = raw_staleness.get(model)
        if value is None:
            raise PlanError(f"plan.staleness.{model}", "missing")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PlanError(
                f"plan.staleness.{model}", f"must be an integer >= 0, got {_short(value)}"
            )
        candidates = instance.optimizer.staleness_candidates.get(model, ())
        if value not in candidates:
            raise PlanError(
                f"plan.staleness.{model}",
                f"{_short(value)} is not among the instance's staleness candidates "
                f"({', '.join(map(str, candidates))})",
            )
        staleness[model] = value
    for model in raw_staleness:
        if model not in staleness:
            raise PlanError(
                f"plan.staleness.{model}",
                f"{instance.algorithm} does not train it{did_you_mean(model, staleness)}",
            )
    return staleness


def _template_from_json(data: dict[str, Any], directory: CandidateDirectory) -> bool:
    """Whether the document's ``template`` is the fused actor-critic (absent: separate)."""
    instance = directory.instance
    name = data.get("template", SEPARATE)
    if name not in (SEPARATE, FUSED):
        raise PlanError(
            "plan.template", f"must be {SEPARATE!r} or {FUSED!r} (AC-share), got {name!r}"
        )
    if name == FUSED:
        if instance.algorithm != "ppo":
            raise PlanError(
                "plan.template",
                f"AC-share (a fused actor-critic) is PPO only; the instance runs "
                f"{instance.algorithm}",
            )
        if not instance.ac_share:
            raise PlanError(
                "plan.template",
                "the plan fuses actor and critic (AC-share) but the instance's plan space does "
                "not: add optimizer.staleness_candidates.ac_share to the instance",
            )
        if instance.template == SEPARATE:
            raise PlanError("plan.template", "this solve is restricted to the separate template")
    elif instance.template == FUSED:
        raise PlanError("plan.template", "this solve is restricted to the ac_share template")
    return name == FUSED


def _check_instance(recorded: Any, directory: CandidateDirectory) -> None:
    """Refuse a plan whose ``"instance"`` entry records another instance's fingerprint.

    The entry may name the copy of the instance a run folder holds beside
    the plan (``"file"``, read by
    :func:`~rlplan.outputs.frameworks.locate_instance`).

    Raises
    ------
    PlanError
        When the entry is malformed or its fingerprint differs from the one
        of ``directory.instance``. A plan without the entry passes.
    """
    if recorded is None:
        return
    if not isinstance(recorded, dict) or not isinstance(recorded.get("fingerprint"), str):
        raise PlanError(
            "plan.instance", 'must be {"name": ..., "fingerprint": ...} as plan.json writes it'
        )
    keys = ("name", "fingerprint", "file")
    extra = sorted(set(recorded) - set(keys))
    if extra:
        raise PlanError(
            f"plan.instance.{extra[0]}",
            f"unknown key{did_you_mean(extra[0], keys)} (allowed: {', '.join(keys)})",
        )
    if "file" in recorded and not isinstance(recorded["file"], str):
        raise PlanError(
            "plan.instance.file",
            f"must be the instance file's name beside the plan, got {_short(recorded['file'])}",
        )
    instance = directory.instance
    expected = instance_fingerprint(instance)
    if recorded["fingerprint"] != expected:
        made_for = recorded.get("name")
        if made_for == instance.name:
            source = f"another version of {made_for!r}"
        elif isinstance(made_for, str):
            source = f"instance {made_for!r}, not {instance.name!r}"
        else:
            source = f"another instance, not {instance.name!r}"
        raise PlanError(
            "plan.instance",
            f"this plan was made for {source} (fingerprint {recorded['fingerprint']}, "
            f"this instance's is {expected}); delete the plan's \"instance\" entry to "
            "simulate it here anyway",
        )


#: The old plan-file key of a rollout: its hand-picked concurrency, read as
#: max_num_seqs (docs/plan-space.md#older-plan-files).
LEGACY_CONCURRENCY = "concurrency"


def _vertex_keys() -> tuple[str, ...]:
    """Keys a plan-file vertex may have: its block, every strategy field, the old concurrency."""
    return ("block", *all_plan_fields(), LEGACY_CONCURRENCY)


def _strategy_from_json(
    entry: dict[str, Any], directory: CandidateDirectory, vertex: Vertex, path: str
) -> Strategy:
    """The strategy of one plan-file vertex; absent v2 fields take their v1 defaults."""
    instance = directory.instance
    dp, pp, tp = (_int_field(entry, key, path) for key in ("dp", "pp", "tp"))
    replica = -(-instance.workload.sequences // dp)
    values = {
        declared.name: _dimension_from_json(entry, declared, vertex.kind, path)
        for declared in DIMENSIONS
        if declared.name in entry or declared.applies_to(vertex.kind)
    }
    if vertex.kind is Kind.GENERATE:
        values.update(_rollout_from_json(entry, directory, replica, path))
        return Strategy(dp, pp, tp, 1, **values)
    if LEGACY_CONCURRENCY in entry:
        raise PlanError(f"{path}.{LEGACY_CONCURRENCY}", "applies to generate vertices only")
    size = _int_field(entry, "micro_batch_size", path) if "micro_batch_size" in entry else None
    if "microbatches" in entry:
        count = _int_field(entry, "microbatches", path)
        # Both given (as plan_to_json writes them): the size must be the one the
        # count implies, ceil(replica / count); a count need not be
        # ceil(replica / size) (10 sequences in 6 microbatches hold 2 each).
        held = -(-replica // count)
        if size is not None and size != held:
            raise PlanError(
                f"{path}.micro_batch_size",
                f"{count} microbatches of a {replica}-sequence replica hold {held} "
                f"sequences each, not {size}",
            )
    elif size is not None:
        count = -(-replica // size)
    else:
        raise PlanError(f"{path}.microbatches", "missing (give microbatches or micro_batch_size)")
    return Strategy(dp, pp, tp, count, **values)


def _rollout_from_json(
    entry: dict[str, Any], directory: CandidateDirectory, replica: int, path: str
) -> dict[str, Any]:
    """``gpu_memory_utilization`` and ``max_num_seqs`` of a rollout, filling older plans in.

    An older plan's ``concurrency: c`` is ``max_num_seqs: c``; a v1 plan
    without either decoded ``ceil(replica / microbatches)`` sequences at a
    time, and the smallest ``placement.max_num_seqs`` holding that many is
    taken (the largest when none does). A plan without
    ``gpu_memory_utilization`` takes the largest of
    ``placement.gpu_memory_utilization``: the pool that holds the most
    sequences, closest to the old meaning of c sequences in flight.
    """
    placement = directory.instance.placement
    values: dict[str, Any] = {}
    if LEGACY_CONCURRENCY in entry:
        if "max_num_seqs" in entry:
            raise PlanError(
                f"{path}.{LEGACY_CONCURRENCY}",
                "is the old name of max_num_seqs: give max_num_seqs only",
            )
        wanted = _int_field(entry, LEGACY_CONCURRENCY, path)
        if wanted not in placement.max_num_seqs:
            listed = ", ".join(map(str, placement.max_num_seqs))
            raise PlanError(
                f"{path}.{LEGACY_CONCURRENCY}",
                f"{wanted} (read as max_num_seqs) is not among placement.max_num_seqs ({listed})",
            )
        values["max_num_seqs"] = wanted
    elif "max_num_seqs" not in entry:
        waves = _int_field(entry, "microbatches", path) if "microbatches" in entry else 1
        wanted = -(-replica // waves)
        choices = placement.max_num_seqs
        values["max_num_seqs"] = min((c for c in choices if c >= wanted), default=max(choices))
    if "gpu_memory_utilization" not in entry:
        values["gpu_memory_utilization"] = max(placement.gpu_memory_utilization)
    return values


def _dimension_from_json(entry: dict[str, Any], declared: Dimension, kind: Kind, path: str) -> Any:
    """The value of ``declared`` in a plan-file vertex; absent, its v1 default.

    Raises
    ------
    PlanError
        For a malformed value, or a numeric dimension (a count or a fraction)
        given on a vertex it does not apply to (other values are checked
        against the vertex's kind with the plan space).
    """
    if declared.name not in entry:
        return declared.default
    if declared.numeric and not declared.applies_to(kind):
        raise PlanError(f"{path}.{declared.name}", f"applies to {declared.applies_words}")
    if declared.values is int:
        return _int_field(entry, declared.name, path)
    value = entry[declared.name]
    if declared.values is float:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= 1  # also refuses NaN
        ):
            raise PlanError(
                f"{path}.{declared.name}", f"must be a number in (0, 1], got {_short(value)}"
            )
        return float(value)
    if declared.values is bool:
        if not isinstance(value, bool):
            raise PlanError(
                f"{path}.{declared.name}", f"must be true or false, got {_short(value)}"
            )
        return value
    if value not in declared.choices:
        raise PlanError(
            f"{path}.{declared.name}",
            f"must be {declared.choice_words(' or ')}, got {_short(value)}",
        )
    return declared.values(value)


def _logprob_default(
    directory: CandidateDirectory, placements: list[Placement | None], index: int
) -> Placement:
    """``actor.infer`` of a v1 plan: on the actor's training block and layout."""
    train = placements[directory.template.index("actor.train")]
    assert train is not None
    strategy = Strategy(train.strategy.dp, train.strategy.pp, train.strategy.tp, 1)
    vertex = directory.template.vertices[index]
    instance = directory.instance
    replica = -(-instance.workload.sequences // strategy.dp)
    for count in (train.strategy.microbatches, *instance.placement.microbatch_counts(replica)):
        candidate = Strategy(strategy.dp, strategy.pp, strategy.tp, count)
        if strategy_problem(instance, vertex, train.block.shape, candidate) is None:
            return Placement(train.block, candidate)
    raise PlanError(
        "plan.vertices.actor.infer", "missing, and the actor's training placement does not fit it"
    )


def _parse_order(
    raw: Any, directory: CandidateDirectory, defaulted: int | None = None
) -> tuple[tuple[int, int], ...]:
    """The order of a plan file; ``defaulted`` is ``actor.infer`` when a v1 plan lacks it.

    A v1 order has no ``actor.infer`` runs: each goes right before the
    ``actor.train`` run of its step, which keeps the order topological (its
    predecessors, ``actor.generate`` of the step and ``actor.train`` of the
    step before, already precede that run).
    """
    template, k_eval = directory.template, directory.instance.k_eval
    # A steady-state order is cyclic: every vertex once, with its shift
    # (docs/simulator.md, "The steady-state period"), each below MAX_K_EVAL.
    steady = directory.instance.steady_state
    steps = MAX_K_EVAL if steady else k_eval
    if not isinstance(raw, list):
        raise PlanError("plan.order", "must be a list of [vertex, step] pairs")
    order = []
    seen = set()
    for position, item in enumerate(raw):
        path = f"plan.order[{position}]"
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], str)
            or not isinstance(item[1], int)
            or isinstance(item[1], bool)
        ):
            raise PlanError(path, f"must be a [vertex, step] pair, got {_short(item)}")
        name, step = item
        if name not in template.names:
            raise PlanError(path, f"no vertex {_short(name)} in the {template.algorithm} template")
        if not 0 <= step < steps:
            raise PlanError(path, f"step {step} outside 0..{steps - 1}")
        run = (template.index(name), step)
        if run in seen:
            raise PlanError(path, f"run ({name}, {step}) appears twice")
        seen.add(run)
        order.append(run)
    if defaulted is not None and all(vertex != defaulted for vertex, _ in order):
        train = template.index("actor.train")
        order = [
            inserted
            for vertex, step in order
            for inserted in (((defaulted, step),) if vertex == train else ()) + ((vertex, step),)
        ]
    expected = len(template.vertices) * (1 if steady else k_eval)
    if len(order) != expected:
        raise PlanError("plan.order", f"lists {len(order)} runs, the plan has {expected}")
    return tuple(order)


def read_plan(path: str | os.PathLike[str], directory: CandidateDirectory) -> Plan:
    """Read and check a plan file."""
    name = os.fspath(path)
    if not os.path.exists(name):
        raise PlanError(name, "no such file")
    if os.path.isdir(name):
        raise PlanError(name, "is a folder, not a plan file")
    if not os.path.isfile(name):
        raise PlanError(name, "not a regular file (a plan is a JSON file)")
    if os.path.getsize(name) > 16 << 20:
        raise PlanError(name, "file too large to be a plan")
    try:
        # utf-8-sig: a byte-order mark (some Windows editors write one) is skipped.
        with open(name, encoding="utf-8-sig") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise PlanError(name, f"cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(name, f"not a JSON file: {str(exc)[:120]}") from None
    except (ValueError, RecursionError) as exc:
        raise PlanError(name, f"not a usable JSON file: {str(exc).splitlines()[0][:120]}") from None
    return plan_from_json(data, directory)
