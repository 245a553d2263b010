"""The ``policy`` section: the RL algorithm, and the models each algorithm needs and trains.

Fields are declared in :data:`POLICY_FIELDS` (:mod:`rlplan.rpeg.schema.fields`).
"""

from __future__ import annotations

from typing import Any

from rlplan.rpeg.errors import InstanceError, describe
from rlplan.rpeg.schema.checks import check_keys, mapping
from rlplan.rpeg.schema.fields import Field, ValueType, keys, read_fields

ALGORITHMS = ("ppo", "grpo", "dpo")
#: The algorithm of an instance without ``policy.algorithm``.
DEFAULT_ALGORITHM = "ppo"

#: Model roles each algorithm needs in ``models`` (the reference model always
#: shares the actor's architecture and is never given).
REQUIRED_ROLES: dict[str, tuple[str, ...]] = {
    "ppo": ("actor", "critic", "reward"),
    "grpo": ("actor", "reward"),
    "dpo": ("actor",),
}

#: Models each algorithm trains (and so may give a staleness).
TRAINED_MODELS: dict[str, tuple[str, ...]] = {
    "ppo": ("actor", "critic"),
    "grpo": ("actor",),
    "dpo": ("actor",),
}

#: Model roles an instance may describe under ``models``.
KNOWN_ROLES = ("actor", "critic", "reward")


def algorithm_name(value: Any, path: str) -> str:
    """Return ``value`` if it names an algorithm of :data:`ALGORITHMS`."""
    if value in ALGORITHMS:
        return value
    raise InstanceError(
        path, f"unknown algorithm {describe(value)} (allowed: {', '.join(ALGORITHMS)})"
    )


ALGORITHM = ValueType("algorithm name", algorithm_name, lambda limit: {"enum": list(ALGORITHMS)})

POLICY_FIELDS = (Field("algorithm", ALGORITHM, DEFAULT_ALGORITHM, "The RL algorithm"),)
POLICY_KEYS = keys(POLICY_FIELDS)


def parse_policy(data: Any) -> str:
    """The algorithm the optional ``policy`` section names (:data:`DEFAULT_ALGORITHM` if none)."""
    if data is None:
        return DEFAULT_ALGORITHM
    section = mapping(data, "policy")
    check_keys(section, POLICY_KEYS, "policy")
    return read_fields(section, POLICY_FIELDS, "policy").get("algorithm", DEFAULT_ALGORITHM)
