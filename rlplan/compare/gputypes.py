"""The ``--gpu-types`` file of ``pareto``: GPU types with a price per GPU-hour.

The file is YAML: a list of entries (or a mapping with such a list under
``gpu_types``), each with

* ``name``: how the type is shown (unique);
* either ``preset: NAME`` (a GPU preset of :mod:`rlplan.rpeg.schema.presets`, e.g.
  ``h100-sxm-80g``), whose datasheet figures replace the device and link
  figures of the instance's hardware, or ``hardware:`` a mapping of hardware
  fields written over the instance's hardware (the mapping may itself hold a
  ``preset``);
* ``price_per_gpu_hour``: the price of one GPU for one hour, in currency units.

Planner knobs of the instance's hardware that no preset fills
(``memory_reserve``, ``gemm_m_half``, ...) are kept for every type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplan.rpeg.errors import InputError
from rlplan.rpeg.schema.presets import expand_hardware, gpu_preset
from rlplan.rpeg.schema.yamlio import read_yaml_file

_KEYS = ("name", "preset", "hardware", "price_per_gpu_hour")


@dataclass(frozen=True)
class GpuType:
    """One GPU type of the frontier.

    Attributes
    ----------
    name
        Shown name.
    fields
        Hardware fields written over the instance's hardware (a preset
        already expanded into its figures).
    price_per_gpu_hour
        Currency units per GPU-hour; None when unknown (no cost is computed).
    """

    name: str
    fields: dict[str, Any] = field(default_factory=dict)
    price_per_gpu_hour: float | None = None

    def hardware(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """The instance's expanded hardware section with this type's fields written over it."""
        return {**base, **self.fields}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def parse_gpu_types(data: Any, source: str) -> list[GpuType]:
    """Validate a parsed ``--gpu-types`` document.

    Parameters
    ----------
    data
        The parsed YAML.
    source
        The file name, prefixed to error paths.

    Raises
    ------
    InputError
        Naming the entry and field at fault (e.g. an unknown preset, a
        missing or non-positive price, a repeated name).
    """
    if isinstance(data, Mapping):
        if set(data) != {"gpu_types"}:
            raise InputError(source, "expected a list of GPU types, or one under gpu_types:")
        data = data["gpu_types"]
    if not isinstance(data, list) or not data:
        raise InputError(source, "expected a non-empty list of GPU types")
    types: list[GpuType] = []
    for index, entry in enumerate(data):
        where = f"{source}: gpu_types[{index}]"
        if not isinstance(entry, Mapping):
            raise InputError(
                where,
                "each GPU type must be a mapping with name, preset or "
                "hardware, and price_per_gpu_hour",
            )
        unknown = [key for key in entry if key not in _KEYS]
        if unknown:
            raise InputError(where, f"unknown key {unknown[0]!r} (allowed: {', '.join(_KEYS)})")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{where}.name", "must be a non-empty string")
        name = name.strip()
        if any(t.name == name for t in types):
            raise InputError(f"{where}.name", f"{name!r} is given twice")
        has_preset, has_hardware = entry.get("preset") is not None, "hardware" in entry
        if has_preset == has_hardware:
            raise InputError(
                where,
                "give either preset: NAME or a hardware: mapping (which may hold its own preset)",
            )
        if has_preset:
            fields: dict[str, Any] = gpu_preset(entry["preset"], f"{where}.preset").fields()
        else:
            hardware = entry["hardware"]
            if not isinstance(hardware, Mapping) or not hardware:
                raise InputError(f"{where}.hardware", "must be a non-empty mapping of fields")
            if hardware.get("preset") is not None:
                gpu_preset(hardware["preset"], f"{where}.hardware.preset")
            fields = expand_hardware(hardware)
        price = entry.get("price_per_gpu_hour")
        if not _number(price) or price <= 0:
            raise InputError(
                f"{where}.price_per_gpu_hour",
                f"must be a positive number (currency units per GPU-hour), got {price!r}",
            )
        types.append(GpuType(name, fields, float(price)))
    return types


def load_gpu_types(path: str) -> list[GpuType]:
    """Read and validate a ``--gpu-types`` file (see the module docstring)."""
    return parse_gpu_types(read_yaml_file(path), path)
