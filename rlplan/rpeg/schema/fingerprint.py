"""Fingerprint of an instance: a stable hash of what a plan depends on.

Plan files record it (docs/plan-space.md) so that a plan is never applied
to an instance it was not made for.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from rlplan.rpeg.schema.geometry import NODE_BLOCKS
from rlplan.rpeg.schema.instance import Instance


def _canonical(value: Any) -> Any:
    """``value`` as JSON-ready data with integral floats as ints (``8e10`` == ``80000000000``)."""
    if isinstance(value, dict):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _workload(instance: Instance) -> dict[str, Any]:
    """The workload's content; one optimizer step, the default, is left out so that plan
    files written before ``workload.optimizer_steps`` existed keep their fingerprint."""
    content = dataclasses.asdict(instance.workload)
    if content.get("optimizer_steps") == 1:
        del content["optimizer_steps"]
    return content


#: Hardware fields that price only routed experts, added after dense plan files were
#: written (:func:`_hardware`).
MOE_ONLY_HARDWARE = ("moe_expert_overhead",)


def _hardware(instance: Instance) -> dict[str, Any]:
    """The hardware's content: with ``hardware.pools`` every pool (name, price, hardware)
    and the link between them; a one-type section as it always was. A pool's preset
    name is left out: its figures are in the hardware, the name only labels reports.
    Without a mixture-of-experts model the MoE-only knobs are left out: they change no
    plan's evaluation there, so a dense instance keeps the fingerprint it had before
    them."""
    moe = instance.has_moe

    def figures(hardware: Any) -> dict[str, Any]:
        fields = dataclasses.asdict(hardware)
        return {k: v for k, v in fields.items() if moe or k not in MOE_ONLY_HARDWARE}

    def pool_content(pool: Any) -> dict[str, Any]:
        fields = {k: v for k, v in dataclasses.asdict(pool).items() if k != "preset"}
        fields["hardware"] = figures(pool.hardware)
        return fields

    if not instance.hardware_pools:
        return figures(instance.hardware)
    return {
        "pools": [pool_content(pool) for pool in instance.hardware_pools],
        "inter_pool": (
            None if instance.inter_pool is None else dataclasses.asdict(instance.inter_pool)
        ),
    }


def _placement(instance: Instance) -> dict[str, Any]:
    """The placement's content; a pin's pool is left out when not pinned, and the default
    ``node_blocks``, so that plan files written before ``hardware.pools`` and
    ``placement.node_blocks`` existed keep their fingerprint (their blocks are blocks of
    the default plan space too)."""
    content = dataclasses.asdict(instance.placement)
    if content.get("node_blocks") == NODE_BLOCKS[0]:
        del content["node_blocks"]
    if not content.get("sliced_blocks"):
        content.pop("sliced_blocks", None)
    for _, pin in content["pin"]["vertices"]:
        if pin.get("pool") is None:
            pin.pop("pool", None)
    return content


def instance_fingerprint(instance: Instance) -> str:
    """A stable hash of what a plan depends on; plan files record it (docs/plan-space.md).

    Covers the parsed hardware, models, workload, algorithm, ``k_eval``,
    the objective (when it is not ``makespan``), staleness candidates, engine
    and placement sections: what the simulator evaluates a plan with and the
    plan space it was chosen from. Leaves out the name, the solver section,
    the local-search knobs and the reference run, ``engine.framework`` (it
    narrows the plan space but changes no plan's evaluation: a plan of a
    framework's space is a plan of the full space), and, being computed from
    the parsed instance, comments, layout, key order and how a number is
    spelt.

    Parameters
    ----------
    instance
        A parsed instance.

    Returns
    -------
    str
        ``"sha256:"`` and the first 16 hex digits of the SHA-256 of the
        canonical JSON of that content.
    """
    models = {role: dataclasses.asdict(spec) for role, spec in instance.models.items()}
    if instance.reward_rule is not None:
        models["reward"] = {"kind": "rule", **dataclasses.asdict(instance.reward_rule)}
    content = {
        "hardware": _hardware(instance),
        "models": models,
        "workload": _workload(instance),
        "algorithm": instance.algorithm,
        "k_eval": instance.k_eval,
        "staleness_candidates": instance.optimizer.staleness_candidates,
        "engine": {
            key: value
            for key, value in dataclasses.asdict(instance.engine).items()
            if key != "framework"
        },
        "placement": _placement(instance),
    }
    if instance.optimizer.objective != "makespan":
        # Only then: every makespan instance keeps its fingerprint.
        content["objective"] = instance.optimizer.objective
    text = json.dumps(_canonical(content), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
