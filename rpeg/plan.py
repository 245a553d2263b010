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

from rpeg.blocks import Block
from rpeg.candidates import CandidateDirectory, strategy_problem
from rpeg.cost import Strategy
from rpeg.errors import PlanError


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
    """

    placements: tuple[Placement, ...]
    staleness: tuple[tuple[str, int], ...]
    order: tuple[tuple[int, int], ...] | None = None

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


def make_staleness(values: dict[str, int]) -> tuple[tuple[str, int], ...]:
    """Canonical (sorted) staleness tuple."""
    return tuple(sorted(values.items()))


def plan_to_json(plan: Plan, directory: CandidateDirectory) -> dict[str, Any]:
    """The plan as the JSON document of the specification."""
    template = directory.template
    vertices = {}
    for vertex, placement in zip(template.vertices, plan.placements, strict=True):
        strategy = placement.strategy
        vertices[vertex.name] = {
            "block": placement.block.to_json(),
            "dp": strategy.dp,
            "pp": strategy.pp,
            "tp": strategy.tp,
            "microbatches": strategy.microbatches,
        }
    document: dict[str, Any] = {
        "algorithm": directory.instance.algorithm,
        "k_eval": directory.instance.k_eval,
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
        raise PlanError(f"{path}.{key}", f"must be a positive integer, got {value!r}")
    return value


def plan_from_json(data: Any, directory: CandidateDirectory) -> Plan:
    """Check a plan document against the instance and build the :class:`Plan`.

    Raises
    ------
    PlanError
        For a missing or unknown vertex, a block outside the cluster or the
        plan space, a strategy whose dp*pp*tp differs from the block's GPU
        count or whose tp does not divide the node width, a bad staleness or
        a malformed order. (Whether the order is topological is checked by
        the simulator, which knows the edges.)
    """
    instance, template, cluster = directory.instance, directory.template, directory.cluster
    if not isinstance(data, dict):
        raise PlanError("plan", "must be a JSON object")
    allowed = {"algorithm", "k_eval", "staleness", "vertices", "order"}
    for key in data:
        if key not in allowed:
            raise PlanError(f"plan.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
    if data.get("algorithm", instance.algorithm) != instance.algorithm:
        raise PlanError(
            "plan.algorithm",
            f"plan is for {data['algorithm']!r} but the instance runs {instance.algorithm!r}",
        )
    if data.get("k_eval", instance.k_eval) != instance.k_eval:
        raise PlanError(
            "plan.k_eval", f"plan has k_eval {data['k_eval']!r}, the instance {instance.k_eval}"
        )
    vertices = data.get("vertices")
    if not isinstance(vertices, dict):
        raise PlanError("plan.vertices", "missing or not an object of vertex name -> placement")
    for name in vertices:
        if name not in template.names:
            raise PlanError(
                f"plan.vertices.{name}",
                f"the {instance.algorithm} instance has no such vertex "
                f"(vertices: {', '.join(template.names)})",
            )
    placements = []
    for vertex in template.vertices:
        path = f"plan.vertices.{vertex.name}"
        entry = vertices.get(vertex.name)
        if not isinstance(entry, dict):
            raise PlanError(path, "missing placement for this vertex")
        extra = set(entry) - {"block", "dp", "pp", "tp", "microbatches"}
        if extra:
            raise PlanError(f"{path}.{sorted(extra)[0]}", "unknown key")
        if "block" not in entry:
            raise PlanError(f"{path}.block", "missing")
        block = cluster.block_from_json(entry["block"], f"{path}.block")
        strategy = Strategy(
            _int_field(entry, "dp", path),
            _int_field(entry, "pp", path),
            _int_field(entry, "tp", path),
            _int_field(entry, "microbatches", path),
        )
        problem = strategy_problem(instance, vertex, block.shape, strategy)
        if problem is not None:
            raise PlanError(path, problem)
        placements.append(Placement(block, strategy))
    raw_staleness = data.get("staleness", {})
    if not isinstance(raw_staleness, dict):
        raise PlanError("plan.staleness", "must be an object of model -> staleness")
    staleness = {}
    for model in template.trained_models:
        value = raw_staleness.get(model)
        if value is None:
            raise PlanError(f"plan.staleness.{model}", "missing")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise PlanError(f"plan.staleness.{model}", f"must be an integer >= 0, got {value!r}")
        staleness[model] = value
    for model in raw_staleness:
        if model not in staleness:
            raise PlanError(f"plan.staleness.{model}", f"{instance.algorithm} does not train it")
    order = None
    if data.get("order") is not None:
        order = _parse_order(data["order"], directory)
    return Plan(tuple(placements), make_staleness(staleness), order)


def _parse_order(raw: Any, directory: CandidateDirectory) -> tuple[tuple[int, int], ...]:
    template, k_eval = directory.template, directory.instance.k_eval
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
            raise PlanError(path, f"must be a [vertex, step] pair, got {item!r}")
        name, step = item
        if name not in template.names:
            raise PlanError(path, f"no vertex {name!r} in the {template.algorithm} template")
        if not 0 <= step < k_eval:
            raise PlanError(path, f"step {step} outside 0..{k_eval - 1}")
        run = (template.index(name), step)
        if run in seen:
            raise PlanError(path, f"run ({name}, {step}) appears twice")
        seen.add(run)
        order.append(run)
    expected = len(template.vertices) * k_eval
    if len(order) != expected:
        raise PlanError("plan.order", f"lists {len(order)} runs, the plan has {expected}")
    return tuple(order)


def read_plan(path: str | os.PathLike[str], directory: CandidateDirectory) -> Plan:
    """Read and check a plan file."""
    name = os.fspath(path)
    if not os.path.isfile(name):
        raise PlanError(name, "no such file")
    if os.path.getsize(name) > 16 << 20:
        raise PlanError(name, "file too large to be a plan")
    try:
        with open(name, encoding="utf-8") as handle:
            data = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanError(name, f"not a JSON file: {str(exc)[:120]}") from None
    except (ValueError, RecursionError) as exc:
        raise PlanError(name, f"not a usable JSON file: {str(exc).splitlines()[0][:120]}") from None
    return plan_from_json(data, directory)
