"""``sweep --tornado`` and ``hardware.moe_imbalance``: varied on mixture-of-experts
instances (within its range, >= 1), left out of dense ones by default."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from rlplan.compare.sweep import _tornado_variants
from rlplan.compare.tornado import (
    MOE_FIELDS,
    default_fields,
    print_tornado,
    tornado_fields,
    tornado_values,
)
from rlplan.compare.variants import load_document
from rlplan.rpeg.schema.instance import load_instance

ROOT = Path(__file__).resolve().parents[2]
TINY_GRPO = ROOT / "instances" / "tiny_grpo_2gpu.yaml"


def tiny_moe(tmp_path: Path) -> Path:
    """tiny_grpo_2gpu with a 4-expert top-2 actor (experts of width 64), every vertex on
    both GPUs and the actor's experts split over them (expert_parallel 2)."""
    document = yaml.safe_load(TINY_GRPO.read_text())
    document["models"]["actor"].update(experts=4, experts_per_token=2, expert_ffn_dim=64)
    document["placement"].update(min_block_gpus=2, expert_parallel=[2])
    path = tmp_path / "tiny_moe_grpo_2gpu.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_moe_imbalance_is_a_tornado_field_of_moe_instances_only(tmp_path):
    """tornado_fields finds moe_imbalance (a numeric Hardware field, default 1.18); the
    default selection keeps it for the MoE instance and drops it for the dense one."""
    dense = load_instance(str(TINY_GRPO))
    moe = load_instance(str(tiny_moe(tmp_path)))
    available = tornado_fields(moe.hardware)
    assert available["moe_imbalance"] == pytest.approx(1.18)
    assert "moe_imbalance" in default_fields(available, moe)
    chosen = default_fields(tornado_fields(dense.hardware), dense)
    assert "moe_imbalance" not in chosen and set(MOE_FIELDS).isdisjoint(chosen)
    assert "flops_per_gpu" in chosen


def test_moe_imbalance_varies_within_its_range():
    """0.5 x 1.18 = 0.59 is below the schema's floor 1 (perfect balance): the low side is
    1; the high side 1.5 x 1.18 = 1.77."""
    assert tornado_values("moe_imbalance", 1.18) == pytest.approx((1.0, 1.77))
    assert tornado_values("flops_per_gpu", 1e12) == (5e11, 1.5e12)


def test_tornado_of_a_tiny_moe_instance_swings_with_moe_imbalance(cli, tmp_path):
    """Routed tokens of the busiest GPU scale the expert GEMMs and the all-to-all: at 1
    (balanced) the step is faster than at 1.18, at 1.77 slower."""
    out = tmp_path / "tornado"
    code, stdout, _ = cli(
        "sweep",
        tiny_moe(tmp_path),
        "--tornado",
        "--fields",
        "moe_imbalance",
        "--time-limit",
        "20",
        "--workers",
        "1",
        "--out",
        out,
        "--quiet",
    )
    assert code == 0, stdout
    with open(out / "tornado.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["field"] for row in rows] == ["moe_imbalance"]
    row = rows[0]
    assert float(row["low_value"]) == 1.0 and float(row["high_value"]) == pytest.approx(1.77)
    assert row["unit"] == "ratio"
    assert float(row["change_low_s"]) < 0 < float(row["change_high_s"])


def test_default_tornado_of_a_dense_instance_leaves_moe_imbalance_out(tmp_path, capsys):
    """Without --fields: no moe_imbalance variants on the dense instance, and the
    terminal names it; the MoE instance gets both of its sides."""
    dense = load_document(str(TINY_GRPO))
    fields, _, left_out, variants = _tornado_variants(dense, "tiny_grpo_2gpu", None)
    assert "moe_imbalance" not in fields
    assert left_out == ["moe_imbalance", "moe_expert_overhead"]
    assert not [v for v in variants if v.key.startswith("moe_")]
    assert "flops_per_gpu-low" in [v.key for v in variants]
    print_tornado([], 1.0, [], left_out)
    printed = capsys.readouterr().out
    assert "not varied (no mixture-of-experts model): moe_imbalance, moe_expert_overhead" in printed
    moe = load_document(str(tiny_moe(tmp_path)))
    fields, _, left_out, variants = _tornado_variants(moe, "tiny_moe_grpo_2gpu", None)
    assert fields["moe_imbalance"] == pytest.approx(1.18) and left_out == []
    assert {"moe_imbalance-low", "moe_imbalance-high"} <= {v.key for v in variants}
