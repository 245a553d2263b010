"""The shaped instance of a pool mix: one GPU type in today's form, several as pools.

Each type's hardware is the instance's (its pool 0 when the instance itself
lists pools) with the type's fields written over it
(:meth:`rlplan.compare.gputypes.GpuType.hardware`); its nodes keep that
hardware's node width and shape into racks as
:func:`rlplan.compare.shapes.cluster_shape` says. A mix of one type is a
``hardware`` section of today's form, exactly as the GPU-count form of
``pareto`` writes it. A mix of several is ``hardware.pools``, one pool per
type, named after the type and priced at its ``price_per_gpu_hour``, in the
``--gpu-types`` file's order, joined by the inter-pool link:

* the instance's ``hardware.inter_pool`` when it lists pools and gives one;
* otherwise the slowest inter-rack point-to-point link of the mix's types
  (the largest ``alpha_p2p_r``, the smallest ``beta_p2p_r`` bandwidth). Pools
  of two GPU types sit in separate racks of one fabric, so a transfer
  between them crosses racks and runs at the slower end's rail. For the
  shipped presets that figure is half of one 400 Gb/s NDR InfiniBand rail
  per GPU: the DGX H100 layout of eight 400 Gb/s ConnectX-7 compute ports
  (NVIDIA DGX H100 datasheet), halved across racks as an assumption
  (:mod:`rlplan.rpeg.schema.presets`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from rlplan.compare.gputypes import GpuType
from rlplan.compare.shapes import cluster_shape, rack_width
from rlplan.rpeg.schema.pools import is_pooled
from rlplan.rpeg.schema.presets import expand_hardware

#: Keys of a pool that are not hardware fields.
_POOL_ONLY = ("name", "price_per_gpu_hour")


def base_hardware(document: Mapping[str, Any]) -> dict[str, Any]:
    """The one-type hardware a GPU type is written over: the section, or its pool 0.

    Parameters
    ----------
    document
        An instance document of :func:`rlplan.compare.variants.load_document`
        (a one-type section already expanded).
    """
    section = document["hardware"]
    if not is_pooled(section):
        return dict(section)
    first = {k: v for k, v in section["pools"][0].items() if k not in _POOL_ONLY}
    return expand_hardware(first)


def _bandwidth(beta: float) -> float:
    """Bytes/s of a ``beta_*`` field (a value below 1 is s/byte, as the schema reads it)."""
    return 1.0 / beta if beta < 1 else beta


def inter_pool_link(
    document: Mapping[str, Any], hardwares: Sequence[Mapping[str, Any]]
) -> dict[str, float]:
    """The ``hardware.inter_pool`` of a mix (see the module docstring).

    Parameters
    ----------
    document
        The instance document.
    hardwares
        The expanded hardware of each type of the mix.
    """
    section = document["hardware"]
    if is_pooled(section) and section.get("inter_pool") is not None:
        return dict(section["inter_pool"])
    return {
        "alpha_p2p": max(float(h["alpha_p2p_r"]) for h in hardwares),
        "beta_p2p": min(_bandwidth(float(h["beta_p2p_r"])) for h in hardwares),
    }


def type_width(hardware: Mapping[str, Any]) -> int | None:
    """The rack width of a type's shapes (:func:`rlplan.compare.shapes.rack_width`)."""
    return rack_width(int(hardware["racks"]), int(hardware["nodes_per_rack"]))


def shaped_hardware(hardware: Mapping[str, Any], gpus: int) -> dict[str, Any]:
    """A type's hardware at ``gpus`` GPUs: the node width kept, nodes before racks."""
    shape = cluster_shape(gpus, int(hardware["gpus_per_node"]), type_width(hardware))
    return {
        **hardware,
        "racks": shape[0],
        "nodes_per_rack": shape[1],
        "gpus_per_node": shape[2],
    }


def mix_document(
    document: Mapping[str, Any], parts: Sequence[tuple[GpuType, int]]
) -> dict[str, Any]:
    """The instance document of a mix.

    Parameters
    ----------
    document
        The instance document (:func:`rlplan.compare.variants.load_document`).
    parts
        ``(type, GPUs)`` per type of the mix, in the types' order.

    Returns
    -------
    dict[str, Any]
        The document with its ``hardware`` replaced: today's form for one
        type, ``pools`` and ``inter_pool`` for several.
    """
    base = base_hardware(document)
    shaped = [shaped_hardware(gpu_type.hardware(base), gpus) for gpu_type, gpus in parts]
    variant = copy.deepcopy(dict(document))
    if len(parts) == 1:
        variant["hardware"] = shaped[0]
        return variant
    pools = [
        {"name": gpu_type.name, "price_per_gpu_hour": gpu_type.price_per_gpu_hour, **hardware}
        for (gpu_type, _), hardware in zip(parts, shaped, strict=True)
    ]
    variant["hardware"] = {"pools": pools, "inter_pool": inter_pool_link(document, shaped)}
    return variant
