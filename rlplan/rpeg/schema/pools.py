"""GPU pools: a cluster of several GPU types in one plan (``hardware.pools``).

A heterogeneous cluster lists its pools, each a full hardware block of one
GPU type (a ``preset`` or every field, its own ``racks`` x
``nodes_per_rack`` x ``gpus_per_node``) with a ``name`` and a
``price_per_gpu_hour``, joined by one inter-pool link::

    hardware:
      pools:
        - {name: train, preset: h100, racks: 1, nodes_per_rack: 2, gpus_per_node: 8,
           price_per_gpu_hour: 2.5}
        - {name: rollout, preset: h20, racks: 1, nodes_per_rack: 2, gpus_per_node: 8,
           price_per_gpu_hour: 1.2}
      inter_pool: {alpha_p2p: 3e-5, beta_p2p: 12.5e9}

Every vertex's block lies inside one pool, whose figures its times and
memory take; transfers between blocks of different pools cross the
inter-pool link, the level ``x`` beyond the racks (docs/instance.md#pools,
docs/cost-model.md#pools). A section without ``pools`` is one pool of
today's form; :attr:`Instance.pools <rlplan.rpeg.schema.instance.Instance.pools>`
gives it as a single unnamed pool.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlplan.rpeg.errors import InstanceError, describe, did_you_mean
from rlplan.rpeg.schema.checks import (
    bandwidth_to_inverse,
    check_keys,
    mapping,
    nonnegative_float,
    require,
)
from rlplan.rpeg.schema.fields import BANDWIDTH, NONNEGATIVE_FLOAT, Field
from rlplan.rpeg.schema.hardware import HARDWARE_KEYS, Hardware, parse_hardware
from rlplan.rpeg.schema.limits import MAX_GPUS, MAX_POOLS

#: The level of a transfer between blocks of two pools (beyond ``g``, ``n``, ``r``).
INTER_POOL = "x"
#: Keys of ``hardware`` when it lists pools.
POOLED_KEYS = ("pools", "inter_pool")
#: Keys of one pool: its name and price, and every key of a one-type ``hardware`` section.
POOL_KEYS = ("name", "price_per_gpu_hour", *HARDWARE_KEYS)
#: Keys of ``hardware.inter_pool``: the p2p latency and bandwidth of the link.
INTER_POOL_KEYS = ("alpha_p2p", "beta_p2p")
#: A pool's price (its schema; :func:`parse_pools` reads it).
PRICE_FIELD = Field(
    "price_per_gpu_hour",
    NONNEGATIVE_FLOAT,
    None,
    "Price of one GPU for an hour (one currency for every pool)",
)
#: The fields of ``hardware.inter_pool``.
INTER_POOL_FIELDS = (
    Field("alpha_p2p", NONNEGATIVE_FLOAT, description="Latency of a transfer between pools"),
    Field(
        "beta_p2p",
        BANDWIDTH,
        description="Bandwidth per GPU of a transfer between pools; a value below 1 is s/byte",
    ),
)
#: What a pool name may be: it is written in plan files and pins.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Pool:
    """One GPU pool: a name, its hardware (one GPU type, its own node shape) and price.

    Attributes
    ----------
    name
        The pool's name as plan files and pins write it; None for the one
        pool of a ``hardware`` section without ``pools``.
    hardware
        Its GPUs, links and cost-model knobs.
    price_per_gpu_hour
        Price of one GPU for one hour (any currency, the same for all
        pools); None when not given.
    preset
        The GPU preset the pool names (``hardware.pools[i].preset``); None
        when its figures are written out. Reports show it as the GPU type.
    """

    name: str | None
    hardware: Hardware
    price_per_gpu_hour: float | None = None
    preset: str | None = None


@dataclass(frozen=True)
class InterPoolLink:
    """The link between pools: point-to-point latency (s) and inverse bandwidth (s/byte)."""

    alpha_p2p: float
    beta_p2p: float


def is_pooled(section: Any) -> bool:
    """Whether a ``hardware`` section lists pools (else it is one GPU type)."""
    return isinstance(section, Mapping) and "pools" in section


def parse_pools(section: Mapping[str, Any]) -> tuple[tuple[Pool, ...], InterPoolLink | None]:
    """Read ``hardware.pools`` and ``hardware.inter_pool``.

    Raises
    ------
    InstanceError
        Naming the field: a key beside ``pools`` other than ``inter_pool``
        (every hardware field belongs to a pool), an empty or over-long
        list, a pool that is not a mapping, a missing, malformed or repeated
        name, a price that is not a number >= 0, any hardware field of a
        pool (as for a one-type section, with the pool's path), more than
        4096 GPUs in all, or a missing ``inter_pool`` with two pools or more.
    """
    for key in section:
        if key not in POOLED_KEYS:
            words = (
                f"with hardware.pools every hardware field belongs to a pool "
                f"(hardware.pools[i].{key})"
                if key in HARDWARE_KEYS
                else f"unknown key{did_you_mean(key, POOLED_KEYS)} (allowed: pools, inter_pool)"
            )
            raise InstanceError(f"hardware.{key}", words)
    raw = section["pools"]
    if not isinstance(raw, list) or not raw:
        raise InstanceError("hardware.pools", f"must be a non-empty list, got {describe(raw)}")
    if len(raw) > MAX_POOLS:
        raise InstanceError(
            "hardware.pools", f"{len(raw)} pools is more than the limit of {MAX_POOLS}"
        )
    pools = tuple(_parse_pool(entry, f"hardware.pools[{i}]") for i, entry in enumerate(raw))
    seen: dict[str, int] = {}
    for index, pool in enumerate(pools):
        if pool.name in seen:
            raise InstanceError(
                f"hardware.pools[{index}].name",
                f"{pool.name!r} is already the name of hardware.pools[{seen[pool.name]}]",
            )
        seen[pool.name] = index  # type: ignore[index]
    total = sum(pool.hardware.num_gpus for pool in pools)
    if total > MAX_GPUS:
        raise InstanceError(
            "hardware.pools",
            f"{total} GPUs in all is more than the limit of {MAX_GPUS} GPUs "
            "(see the README's input limits)",
        )
    link = None
    if section.get("inter_pool") is not None:
        link = _parse_link(section["inter_pool"])
    elif len(pools) > 1:
        raise InstanceError(
            "hardware.inter_pool",
            "missing: two pools or more need the link between them "
            "({alpha_p2p: seconds, beta_p2p: bytes/s})",
        )
    return pools, link


def _parse_pool(raw: Any, path: str) -> Pool:
    """One pool: its name, its price and its hardware block (errors at the pool's path)."""
    entry = mapping(raw, path)
    check_keys(entry, POOL_KEYS, path)
    name = require(entry, "name", path)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InstanceError(
            f"{path}.name",
            "must be a name of letters, digits, '_', '.' or '-' (at most 64, starting with a "
            f"letter or digit), got {describe(name)}",
        )
    price = entry.get("price_per_gpu_hour")
    if price is not None:
        price = nonnegative_float(price, f"{path}.price_per_gpu_hour")
    fields = {k: v for k, v in entry.items() if k not in ("name", "price_per_gpu_hour")}
    try:
        hardware = parse_hardware(fields)
    except InstanceError as error:
        raise InstanceError(_repath(error.path, path), error.message) from None
    preset = entry.get("preset")
    return Pool(name, hardware, price, preset if isinstance(preset, str) else None)


def _repath(found: str, pool: str) -> str:
    """A ``hardware.*`` error path of a pool's block as the pool's own path."""
    if found == "hardware" or found.startswith("hardware."):
        return pool + found[len("hardware") :]
    return found


def _parse_link(raw: Any) -> InterPoolLink:
    """``hardware.inter_pool``: latency in s, bandwidth in bytes/s (or its inverse)."""
    path = "hardware.inter_pool"
    section = mapping(raw, path)
    check_keys(section, INTER_POOL_KEYS, path)
    alpha = nonnegative_float(require(section, "alpha_p2p", path), f"{path}.alpha_p2p")
    beta = bandwidth_to_inverse(require(section, "beta_p2p", path), f"{path}.beta_p2p")
    return InterPoolLink(alpha, beta)


def pool_named(pools: tuple[Pool, ...], name: Any, path: str) -> int:
    """Index of the pool called ``name``.

    Raises
    ------
    InstanceError
        Naming ``path`` when no pool has that name (or the instance has no
        named pools), with the closest name.
    """
    names = tuple(pool.name for pool in pools if pool.name is not None)
    if not names:
        raise InstanceError(path, "the instance has no hardware.pools to name")
    for index, pool in enumerate(pools):
        if pool.name == name:
            return index
    raise InstanceError(
        path,
        f"no pool is named {describe(name)}{did_you_mean(str(name), names)} "
        f"(pools: {', '.join(names)})",
    )


def layout_hardware(pools: tuple[Pool, ...]) -> Hardware:
    """One hardware block with every pool's GPUs one after another, for drawings.

    Traces and charts place GPUs by their flat index and mark node and rack
    boundaries. Pools of one node shape stack as more racks, whose
    boundaries are theirs; otherwise nodes are drawn ``gcd`` of the node
    widths wide (every real node boundary is among them). The first pool's
    figures fill the rest: a drawing reads the shape only.
    """
    first = pools[0].hardware
    if len(pools) == 1:
        return first
    shapes = {(p.hardware.nodes_per_rack, p.hardware.gpus_per_node) for p in pools}
    total = sum(p.hardware.num_gpus for p in pools)
    if len(shapes) == 1:
        racks = sum(p.hardware.racks for p in pools)
        return dataclasses.replace(first, racks=racks)
    width = math.gcd(*(p.hardware.gpus_per_node for p in pools))
    return dataclasses.replace(first, racks=total // width, nodes_per_rack=1, gpus_per_node=width)


def cluster_words(pools: tuple[Pool, ...], times: str = "x") -> str:
    """The cluster in words: ``1 x 2 x 8 = 16 GPUs``, or each pool's shape and name."""

    def shape(hardware: Hardware) -> str:
        return f" {times} ".join(
            str(n) for n in (hardware.racks, hardware.nodes_per_rack, hardware.gpus_per_node)
        )

    total = sum(p.hardware.num_gpus for p in pools)
    if len(pools) == 1:
        return f"{shape(pools[0].hardware)} = {total} GPUs"
    parts = " + ".join(f"{shape(p.hardware)} ({p.name})" for p in pools)
    return f"{parts} = {total} GPUs"
