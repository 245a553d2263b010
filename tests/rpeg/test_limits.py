"""Plausibility limits (rpeg.limits): absurd numbers are refused with the field and the limit.

Each case below once hung ``check`` (a huge cluster, k_eval or list), crashed
it with a traceback (``np.arange`` over 10**30 tokens, an overflow in the
bounds, a seed CP-SAT cannot take) or let inf through to its output.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rlplan.rpeg.errors import InstanceError
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.limits import LIMITS, MAX_GPUS, MAX_LIST_ITEMS, MAX_QUANTILES, limit_key
from rlplan.rpeg.schema.yamlio import loads

REPO = Path(__file__).resolve().parents[2]
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"


def tiny_ppo() -> dict[str, Any]:
    return loads(TINY_PPO.read_text(encoding="utf-8"))


def set_leaf(data: dict, path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        data = data.setdefault(key, {})
    data[keys[-1]] = value


def refusal(path: str, value: Any) -> InstanceError:
    data = tiny_ppo()
    set_leaf(data, path, value)
    with pytest.raises(InstanceError) as caught:
        parse_instance(data, "fuzzed")
    return caught.value


#: (field, absurd value, what the error must name as the limit).
ABSURD = [
    ("hardware.gpus_per_node", 10**30, "256"),
    ("hardware.gpus_per_node", 1_000_000, "256"),
    ("hardware.racks", 10**30, "1024"),
    ("hardware.nodes_per_rack", 10**30, "1024"),
    ("optimizer.k_eval", 1_000_000, "64"),
    ("optimizer.k_eval", 10**30, "64"),
    ("workload.generation_length", 10**30, "131072"),
    ("workload.batch_size", 10**9, "1000000"),
    ("hardware.flops_per_gpu", 1e308, "1e+17"),
    ("hardware.flops_per_gpu", 1e-308, "1e+09"),
    ("hardware.memory_per_gpu", 1e308, "1e+13"),
    ("hardware.alpha_coll_g", 1e308, "1"),
    ("hardware.beta_coll_g", 1e-308, "1e+16"),
    ("solver.seed", 10**30, "2147483647"),
    ("solver.threads", 10**30, "1024"),
    ("solver.time_limit", 1e300, "6.048e+05"),
    ("models.actor.layers", 10**9, "1024"),
    ("optimizer.staleness_candidates.actor", [0, 99], "64"),
]


@pytest.mark.parametrize(("path", "value", "limit"), ABSURD)
def test_absurd_values_are_refused_naming_field_value_and_limit(path, value, limit):
    error = refusal(path, value)
    assert error.path.startswith(path)
    assert "plausible range" in error.message
    assert limit in error.message
    shown = f"{float(value):.3g}" if isinstance(value, int) and value >= 10**12 else None
    if shown is not None:
        assert shown in error.message


def test_a_cluster_larger_than_the_limit_is_refused_with_its_size():
    data = tiny_ppo()
    data["hardware"].update(racks=64, nodes_per_rack=16, gpus_per_node=8)  # 8192 GPUs
    with pytest.raises(InstanceError) as caught:
        parse_instance(data, "big")
    assert caught.value.path == "hardware"
    assert "8192 GPUs" in caught.value.message and str(MAX_GPUS) in caught.value.message


@pytest.mark.parametrize(
    "path",
    [
        "placement.microbatches",
        "placement.max_num_seqs",
        "placement.gpu_memory_utilization",
        "workload.gen_quantiles",
    ],
)
def test_long_lists_are_refused_naming_the_limit(path):
    if path == "workload.gen_quantiles":
        value = [[i / 100_000, 1024] for i in range(1, 100_001)]
    elif path == "placement.gpu_memory_utilization":
        value = [i / 100_000 for i in range(1, 100_001)]
    else:
        value = list(range(1, 100_001))
    error = refusal(path, value)
    assert error.path == path
    assert "100000 entries" in error.message
    assert (
        str(MAX_QUANTILES if path == "workload.gen_quantiles" else MAX_LIST_ITEMS) in error.message
    )


def test_the_largest_values_within_the_limits_are_accepted():
    """The ranges are inclusive: a value at the limit is an instance."""
    data = tiny_ppo()
    data["solver"].update(seed=2**31 - 1, threads=1024)
    data["optimizer"]["k_eval"] = 64
    instance = parse_instance(data, "edge")
    assert (instance.solver.seed, instance.k_eval) == (2**31 - 1, 64)


def test_every_limit_is_a_finite_range_and_is_reached_by_a_field_path():
    """limit_key maps written paths onto the table (a renamed key would silently check nothing)."""
    for limit in LIMITS.values():
        assert math.isfinite(limit.low) and math.isfinite(limit.high) and limit.low <= limit.high
    assert limit_key("models.critic.hidden_dim") == "model.hidden_dim"
    assert limit_key("layers") == "model.layers"
    assert limit_key("hardware.beta_p2p_r") == "hardware.beta_*"
    assert limit_key("placement.microbatches[3]") == "placement.microbatches[]"
    assert limit_key("optimizer.staleness_candidates.critic[1]") == (
        "optimizer.staleness_candidates.*[]"
    )
    assert limit_key("placement.pin.actor.train.tp") == "placement.pin.*.tp"
    assert limit_key("placement.pin.staleness.actor") == "placement.pin.staleness.*"
    assert limit_key("workload.gen_quantiles[2][1]") == "workload.gen_quantiles[][]"
    assert limit_key("reference.phases.rollout.measured_s") == "reference.phases.*.measured_s"


def test_error_lines_are_capped_whatever_the_input():
    """A million-element value once produced a 7.9 MB error line."""
    error = refusal("placement.pin", {"actor.generate": {"block": {"origin": list(range(10**6))}}})
    assert len(str(error)) <= 300


def test_a_duplicate_yaml_key_is_an_error_naming_the_key():
    text = TINY_PPO.read_text(encoding="utf-8").replace("  racks: 1 ", "  racks: 1\n  racks: 2 ", 1)
    with pytest.raises(InstanceError) as caught:
        loads(text, "dup.yaml")
    assert "duplicate key 'racks'" in caught.value.message


def test_a_yaml_merge_may_override_a_merged_key():
    """``<<: *base`` then a key of its own is YAML's override, not a duplicate."""
    assert loads("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n")["d"] == {"x": 3, "y": 2}
