"""The default memory reserve: the same for a preset and for explicit fields; overridable.

usable = memory_per_gpu x (1 - memory_reserve) - memory_reserve_bytes, defaults 0.115
and 2**30 bytes: on an 80 GB GPU 80e9 x 0.885 - 1073741824 = 69726258176 bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.hardware import DEFAULT_MEMORY_RESERVE, DEFAULT_MEMORY_RESERVE_BYTES
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
#: 80e9 x (1 - 0.115) - 2**30
USABLE_80GB = 69726258176.0


def hardware_of(section: dict[str, Any]):
    data = read_yaml_file(str(INSTANCES / "tiny_ppo_2gpu.yaml"))
    data["hardware"] = section
    return parse_instance(data, name="reserve").hardware


def explicit_section() -> dict[str, Any]:
    """The 16-GPU H100 instance's hardware section, every field written out, no reserve."""
    section = dict(read_yaml_file(str(INSTANCES / "ppo_8b_1x2x8_h100.yaml"))["hardware"])
    assert "memory_reserve" not in section and "memory_reserve_bytes" not in section
    return section


def test_the_defaults():
    assert DEFAULT_MEMORY_RESERVE == 0.115
    assert DEFAULT_MEMORY_RESERVE_BYTES == 1073741824


def test_a_preset_only_section_keeps_the_default_reserve():
    section = {"preset": "h100-sxm-80g", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8}
    hardware = hardware_of(section)
    assert hardware.memory_per_gpu == 80e9
    assert hardware.usable_memory == pytest.approx(USABLE_80GB, rel=1e-15)


def test_an_explicit_section_keeps_the_same_default_reserve():
    hardware = hardware_of(explicit_section())
    assert hardware.memory_per_gpu == 80e9
    assert hardware.usable_memory == pytest.approx(USABLE_80GB, rel=1e-15)


@pytest.mark.parametrize(
    "fields, usable",
    [
        ({"memory_reserve": 0.05}, 80e9 * 0.95 - 2**30),  # 74926258176
        ({"memory_reserve_bytes": 0}, 80e9 * 0.885),  # 70.8e9
        ({"memory_reserve": 0.0, "memory_reserve_bytes": 0}, 80e9),
    ],
)
def test_instance_values_override_the_default(fields, usable):
    hardware = hardware_of({**explicit_section(), **fields})
    assert hardware.usable_memory == pytest.approx(usable, rel=1e-15)


@pytest.mark.parametrize("bad", [8e10, -1.0])
def test_a_reserve_leaving_nothing_or_negative_names_the_field(bad):
    with pytest.raises(InstanceError) as info:
        hardware_of({**explicit_section(), "memory_reserve_bytes": bad})
    assert info.value.path == "hardware.memory_reserve_bytes"


def test_a_reserve_leaving_nothing_gets_one_line_and_exit_2(cli, tmp_path):
    text = (INSTANCES / "ppo_8b_1x2x8_h100.yaml").read_text(encoding="utf-8")
    text = text.replace("hardware:\n", "hardware:\n  memory_reserve_bytes: 9e10\n", 1)
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, _, err = cli("check", path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "hardware.memory_reserve_bytes" in lines[0]
