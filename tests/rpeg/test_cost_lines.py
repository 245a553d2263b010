"""Cost per step in the terminal summaries and reports (docs/outputs.md#cost-per-step).

The two-pool instance (tests/data/tiny_two_pools_grpo.yaml) prices pool ``fast`` at
2.0 and pool ``wide`` at 1.0 per GPU-hour, 2 GPUs each; a step has B K = 8 x 2 = 16
samples. The whole cluster is rented for the step time t (s):
    fast 2 x 2.0 x t / 3600, wide 2 x 1.0 x t / 3600, total 6 t / 3600,
    per 1,000 samples 1000 x 6 t / 3600 / 16.
Its concurrent plan (rollout on wide, training on fast) has t = 0.02409002356224 / 2
= 0.01204501178112 s (tests/solvers/test_pools_exact.py): fast 1.338e-05, wide
6.692e-06, total 2.008e-05, per 1,000 samples 0.001255.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlplan.cli.app import main
from rlplan.outputs.cost import cost_lines, step_cost
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file

REPO = Path(__file__).resolve().parents[2]
TWO_POOLS = REPO / "tests" / "data" / "tiny_two_pools_grpo.yaml"
ONE_POOL = REPO / "instances" / "tiny_grpo_2gpu.yaml"
STEP = 0.02409002356224 / 2
FAST, WIDE = 2 * 2.0 * STEP / 3600, 2 * 1.0 * STEP / 3600


def test_the_cost_is_every_pool_s_gpus_at_its_price_for_the_step():
    pools = load_instance(str(TWO_POOLS)).pools
    cost = step_cost(pools, STEP, 16)
    assert cost is not None
    assert cost.per_pool == (("fast", pytest.approx(FAST)), ("wide", pytest.approx(WIDE)))
    assert cost.total == pytest.approx(FAST + WIDE, rel=1e-12)
    assert cost.per_thousand_samples == pytest.approx(1000 * (FAST + WIDE) / 16, rel=1e-12)
    assert step_cost(pools, STEP, None).per_thousand_samples is None


def test_no_price_no_cost():
    """A one-type section has no price; a pool without one leaves the cost unknown."""
    assert cost_lines(load_instance(str(ONE_POOL)).pools, 1.0, 16) == []
    pools = load_instance(str(TWO_POOLS)).pools
    unpriced = (pools[0], dataclasses.replace(pools[1], price_per_gpu_hour=None))
    assert step_cost(unpriced, STEP, 16) is None
    assert cost_lines(pools, None, 16) == []


LINES = [
    "cost         2.008e-05 per step (pool fast 1.338e-05, pool wide 6.692e-06; "
    "the whole cluster rented)",
    "cost         0.001255 per 1,000 samples",
]


def _cost_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("cost ")]


def test_solve_baseline_and_simulate_print_the_cost(tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(["solve", str(TWO_POOLS), "--solver", "concurrent", "--quiet", "--out", str(out)]) == 0
    )
    assert _cost_lines(capsys.readouterr().out) == LINES
    report = (out / "report.md").read_text()
    assert "| cost per step | 2.008e-05 (pool fast 1.338e-05, pool wide 6.692e-06; " in report
    assert "| cost per 1,000 samples | 0.001255 |" in report
    html = (out / "report.html").read_text()
    assert "cost per 1,000 samples</td><td>0.001255" in html
    assert main(["simulate", str(TWO_POOLS), str(out / "plan.json")]) == 0
    assert _cost_lines(capsys.readouterr().out) == LINES
    base = tmp_path / "base"
    assert main(["baseline", str(TWO_POOLS), "--kind", "concurrent", "--out", str(base)]) == 0
    assert _cost_lines(capsys.readouterr().out) == LINES


def test_one_pool_with_a_price_prints_its_total_alone(tmp_path, capsys):
    """A one-type instance written as one priced pool: the total, no per-pool breakdown."""
    data = read_yaml_file(ONE_POOL)
    hardware = data.pop("hardware")
    hardware.update(name="only", price_per_gpu_hour=3.0)
    data["hardware"] = {"pools": [hardware]}
    path = tmp_path / "priced.yaml"
    path.write_text(json.dumps(data))  # JSON is YAML
    out = tmp_path / "run"
    assert main(["solve", str(path), "--solver", "greedy", "--quiet", "--out", str(out)]) == 0
    lines = _cost_lines(capsys.readouterr().out)
    assert len(lines) == 2 and "pool" not in lines[0]
    assert lines[0].endswith(" per step (the whole cluster rented)")


def test_one_type_outputs_name_no_cost(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", str(ONE_POOL), "--solver", "greedy", "--quiet", "--out", str(out)]) == 0
    assert _cost_lines(capsys.readouterr().out) == []
    assert "cost per" not in (out / "report.md").read_text()
    assert "cost per" not in (out / "report.html").read_text()
