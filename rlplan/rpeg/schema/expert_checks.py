"""Instance-level checks of expert and context parallelism against the models and workload.

docs/instance.md#mixture-of-experts-models. The ``placement`` section is read
without the models, so what only the models and the workload decide is
checked here, on the values as written, before the pins are parsed:

* a ``placement.expert_parallel`` value must divide the experts of some
  mixture-of-experts model (values above 1 on an instance without one are a
  warning: only ep 1 applies to dense models);
* a pinned ``ep`` must divide the experts of its vertex's model (and be 1 on
  a dense model);
* a ``placement.context_parallel`` value or a pinned ``cp`` must split the
  longest sequence, ``S + T`` tokens, into ``2*cp`` equal chunks
  (:func:`~rlplan.rpeg.schema.parallel_layout.context_problem`).

The plan space would drop such values silently (no candidate takes them);
an explicit choice that cannot apply is an input error instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.models import ModelSpec
from rlplan.rpeg.schema.parallel_layout import context_problem

#: The candidate lists checked here.
EXPERT_LIST, CONTEXT_LIST = "expert_parallel", "context_parallel"


def _whole(value: Any) -> bool:
    """Whether ``value`` is an int (not a bool): malformed values are the parsers' to report."""
    return isinstance(value, int) and not isinstance(value, bool)


def _distinct_experts(models: Mapping[str, ModelSpec]) -> dict[str, int]:
    """Experts per role of the mixtures of experts, each model once (the reference and the
    fused ``ac`` model are the actor's)."""
    experts: dict[str, int] = {}
    seen: list[ModelSpec] = []
    for role, spec in models.items():
        if spec.is_moe and not any(spec is other for other in seen):
            experts[role] = spec.experts
        seen.append(spec)
    return experts


def check_parallel_lists(
    placement: Any, models: Mapping[str, ModelSpec], total_length: int
) -> list[str]:
    """Refuse written ``expert_parallel`` and ``context_parallel`` values that cannot apply.

    Parameters
    ----------
    placement
        The ``placement`` section as written (None or a mapping; already parsed).
    models
        The instance's models by role.
    total_length
        ``S + T``, the longest sequence.

    Returns
    -------
    list[str]
        Warnings: ``expert_parallel`` values above 1 without a mixture of experts.

    Raises
    ------
    InstanceError
        Naming ``placement.expert_parallel[i]`` for a value that divides the
        experts of no mixture-of-experts model, or
        ``placement.context_parallel[i]`` for one that cannot split ``S + T``.
    """
    if not isinstance(placement, Mapping):
        return []
    warnings = []
    listed = placement.get(EXPERT_LIST)
    if isinstance(listed, list):
        experts = _distinct_experts(models)
        high = [v for v in listed if _whole(v) and v > 1]
        if not experts and high:
            warnings.append(
                f"warning: placement.{EXPERT_LIST} lists {', '.join(map(str, high))}, but no "
                "model is a mixture of experts: only ep 1 applies"
            )
        for index, value in enumerate(listed if experts else ()):
            if _whole(value) and value > 0 and all(count % value for count in experts.values()):
                counts = ", ".join(f"the {role} {count}" for role, count in experts.items())
                raise InstanceError(
                    f"placement.{EXPERT_LIST}[{index}]",
                    f"{value} divides the experts of no mixture-of-experts model ({counts})",
                )
    listed = placement.get(CONTEXT_LIST)
    for index, value in enumerate(listed if isinstance(listed, list) else ()):
        problem = context_problem(value, total_length) if _whole(value) and value > 0 else None
        if problem is not None:
            raise InstanceError(f"placement.{CONTEXT_LIST}[{index}]", problem)
    return warnings


def check_parallel_pins(placement: Any, models: Mapping[str, ModelSpec], total_length: int) -> None:
    """Refuse a pinned ``ep`` or ``cp`` that cannot apply to its vertex.

    A vertex ``<model>.<kind>`` runs the model of its first part; names that
    are no vertex, and malformed values, are left to
    :func:`~rlplan.rpeg.schema.pins.parse_pins`.

    Raises
    ------
    InstanceError
        Naming ``placement.pin.<vertex>.ep`` when it does not divide the
        model's experts (or is above 1 on a dense model), or
        ``placement.pin.<vertex>.cp`` when it cannot split ``S + T``.
    """
    pins = placement.get("pin") if isinstance(placement, Mapping) else None
    if not isinstance(pins, Mapping):
        return
    for name, pin in pins.items():
        if not isinstance(name, str) or not isinstance(pin, Mapping):
            continue
        role = name.split(".", 1)[0]
        spec = models.get(role)
        ep, cp = pin.get("ep"), pin.get("cp")
        if spec is not None and _whole(ep) and ep > 0:
            if not spec.is_moe and ep != 1:
                raise InstanceError(
                    f"placement.pin.{name}.ep",
                    f"{ep}: the {role} is a dense model (only ep 1 applies)",
                )
            if spec.is_moe and spec.experts % ep:
                raise InstanceError(
                    f"placement.pin.{name}.ep",
                    f"{ep} does not divide the {spec.experts} experts of the {role}",
                )
        problem = context_problem(cp, total_length) if _whole(cp) and cp > 0 else None
        if problem is not None:
            raise InstanceError(f"placement.pin.{name}.cp", problem)
