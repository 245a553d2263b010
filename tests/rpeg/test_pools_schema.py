"""``hardware.pools``: reading, checking and fingerprinting GPU pools (docs/instance.md#pools)."""

from __future__ import annotations

import copy
import dataclasses
import functools

import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.hardware import parse_hardware
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from tests.rpeg.conftest import DATA, INSTANCES

TWO_POOLS = DATA / "tiny_two_pools_grpo.yaml"


@functools.cache
def _document(path=TWO_POOLS) -> dict:
    return read_yaml_file(path)


def two_pools() -> dict:
    """A fresh copy of the two-pool instance's document (YAML merges resolved)."""
    return copy.deepcopy(_document())


def _pool(index: int, **changes):
    def change(data: dict) -> None:
        data["hardware"]["pools"][index].update(changes)

    return change


def _hardware(**changes):
    def change(data: dict) -> None:
        data["hardware"].update(changes)

    return change


def _pin_train(block):
    def change(data: dict) -> None:
        data["placement"]["pin"]["actor.train"]["block"] = block

    return change


def _drop_link(data: dict) -> None:
    del data["hardware"]["inter_pool"]


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (_pool(1, preset="h300"), "hardware.pools[1].preset", "unknown GPU preset"),
        (_pool(1, name="fast"), "hardware.pools[1].name", "already the name of"),
        (_pool(1, price_per_gpu_hour=-1), "hardware.pools[1].price_per_gpu_hour", "non-negative"),
        (_pool(0, price_per_gpu_hour="cheap"), "hardware.pools[0].price_per_gpu_hour", "number"),
        (_pool(0, price_per_gpu_hour=1e9), "hardware.pools[0].price_per_gpu_hour", "range"),
        (_pin_train({"pool": "fats"}), "placement.pin.actor.train.block.pool", "'fast'"),
        (_pool(0, racks=0), "hardware.pools[0].racks", "positive integer"),
        (_pool(1, gpus_per_node=4096), "hardware.pools[1].gpus_per_node", "plausible range"),
        (_pool(1, beta_p2p_x=1e9), "hardware.pools[1].beta_p2p_x", "unknown key"),
        (_pool(1, name="two words"), "hardware.pools[1].name", "letters, digits"),
        (_pool(1, name=None), "hardware.pools[1].name", "missing"),
        (_hardware(racks=1), "hardware.racks", "belongs to a pool"),
        (_hardware(pools=[]), "hardware.pools", "non-empty list"),
        (_hardware(pools={"name": "a"}), "hardware.pools", "non-empty list"),
        (_hardware(inter_pool={"alpha_p2p": 1e-5}), "hardware.inter_pool.beta_p2p", "missing"),
        (
            _hardware(inter_pool={"beta_p2p": -1.0, "alpha_p2p": 0}),
            "hardware.inter_pool.beta_p2p",
            "",
        ),
        (_drop_link, "hardware.inter_pool", "two pools or more"),
    ],
)
def test_bad_pools_name_their_field(change, path, words):
    data = two_pools()
    change(data)
    with pytest.raises(InstanceError) as error:
        parse_instance(data, "bad")
    assert error.value.path == path
    assert words in error.value.message


def test_a_pool_limits_the_gpus_of_every_pool_together():
    data = two_pools()
    data["hardware"]["pools"][1].update(racks=16, nodes_per_rack=64, gpus_per_node=4)
    with pytest.raises(InstanceError) as error:
        parse_instance(data, "big")
    assert error.value.path == "hardware.pools" and "4098 GPUs" in error.value.message


def test_a_pool_reads_as_a_one_type_section():
    """Each pool is its hardware block read alone; the link's bandwidth is stored inverted."""
    data = two_pools()
    instance = parse_instance(data, "pools")
    assert [pool.name for pool in instance.pools] == ["fast", "wide"]
    assert [pool.price_per_gpu_hour for pool in instance.pools] == [2.0, 1.0]
    for raw, pool in zip(data["hardware"]["pools"], instance.pools, strict=True):
        fields = {k: v for k, v in raw.items() if k not in ("name", "price_per_gpu_hour")}
        assert pool.hardware == parse_hardware(fields)
    assert instance.inter_pool.alpha_p2p == 5e-5
    assert instance.inter_pool.beta_p2p == pytest.approx(1 / 12.5e9, rel=1e-15)
    assert instance.hardware == instance.pools[0].hardware
    assert instance.num_gpus == 4


def test_a_preset_fills_a_pool():
    data = two_pools()
    data["hardware"]["pools"][1] = {
        "name": "h20",
        "preset": "h20",
        "racks": 1,
        "nodes_per_rack": 1,
        "gpus_per_node": 8,
    }
    instance = parse_instance(data, "preset")
    expected = parse_hardware(
        {"preset": "h20", "racks": 1, "nodes_per_rack": 1, "gpus_per_node": 8}
    )
    assert instance.pools[1].hardware == expected
    assert instance.pools[1].price_per_gpu_hour is None


def test_one_type_instances_have_one_unnamed_pool():
    instance = parse_instance(read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml"), "plain")
    assert instance.hardware_pools == () and instance.inter_pool is None
    (pool,) = instance.pools
    assert pool.name is None and pool.hardware is instance.hardware


def test_a_block_pin_may_name_a_pool_only():
    data = two_pools()
    data["placement"]["pin"]["actor.train"]["block"] = {"pool": "wide"}
    pin = parse_instance(data, "pinned").placement.pin.vertex("actor.train")
    assert (pin.pool, pin.origin, pin.extent) == ("wide", None, None)
    assert "block" in parse_instance(data, "pinned").placement.pin.pinned_fields("actor.train")


def test_a_pool_pin_needs_pools():
    data = read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml")
    data.setdefault("placement", {})["pin"] = {"actor.train": {"block": {"pool": "a"}}}
    with pytest.raises(InstanceError) as error:
        parse_instance(data, "plain")
    assert error.value.path == "placement.pin.actor.train.block.pool"


def test_the_fingerprint_covers_the_pools_and_keeps_the_one_type_one():
    """A pool's figures, name and price change the fingerprint; the one-type instance's is
    its hardware's as before (a pin's pool, when not pinned, is left out)."""
    base = instance_fingerprint(parse_instance(two_pools(), "a"))
    for change in (
        _pool(1, memory_bandwidth=1e12),
        _pool(1, name="slow"),
        _pool(0, price_per_gpu_hour=3),
    ):
        data = two_pools()
        change(data)
        assert instance_fingerprint(parse_instance(data, "a")) != base
    # The plain instance's content is what it always was (docs/plan-space.md#fingerprint).
    plain = parse_instance(read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml"), "plain")
    assert instance_fingerprint(plain) == instance_fingerprint(
        dataclasses.replace(plain, name="renamed")
    )


def test_a_one_type_fingerprint_is_unchanged_by_pools():
    """Frozen: the fingerprints of a one-type instance, alone and pinned, as computed before
    pools existed, so that its plan files still apply."""
    plain = parse_instance(read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml"), "tiny_ppo_2gpu")
    pinned = read_yaml_file(INSTANCES / "tiny_ppo_2gpu.yaml")
    pinned.setdefault("placement", {})["pin"] = {"actor.train": {"tp": 1}}
    assert instance_fingerprint(plain) == FROZEN_PLAIN
    assert instance_fingerprint(parse_instance(pinned, "x")) == FROZEN_PINNED


#: Fingerprints of tiny_ppo_2gpu.yaml, alone and with a pin, before pools existed.
FROZEN_PLAIN = "sha256:ff52428bafb8a932"
FROZEN_PINNED = "sha256:7e02680f1833d1a4"
