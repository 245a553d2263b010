"""``main.py sweep``: parameters, plan changes in words, step times, tornado ranking, outputs."""

from __future__ import annotations

import csv
import os

import pytest

from rlplan.compare.plandiff import describe_changes, plan_changes
from rlplan.compare.sweep import rank_tornado, tornado_values
from rlplan.compare.sweep_parameters import parse_parameter
from rlplan.rpeg.errors import InputError
from tests.htmlcheck import assert_self_contained
from tests.solvers.conftest import ROOT, load_problem

TINY_GRPO = os.path.join(ROOT, "instances", "tiny_grpo_2gpu.yaml")


def _csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_parse_parameter():
    """PATH=v1,v2: integers stay integers, other numbers are floats; bad text is refused."""
    parameter = parse_parameter("workload.batch_size=4, 8,16")
    assert parameter.path == "workload.batch_size" and parameter.values == (4, 8, 16)
    assert all(isinstance(v, int) for v in parameter.values)
    assert parse_parameter("hardware.beta_coll_n=25e9,5.0e10").values == (25e9, 50e9)
    for bad in (
        "hardware.memory_per_gpu",
        "memory=1,2",
        "hardware.memory_per_gpu=a,b",
        "hardware.memory_per_gpu=",
        "hardware.memory_per_gpu=1,1",
        "x y.z=1",
    ):
        with pytest.raises(InputError):
            parse_parameter(bad)


def _plan(block, tp, staleness=0):
    return {
        "vertices": {
            "actor.train": {"block": block, "dp": 2 // tp, "pp": 1, "tp": tp, "microbatches": 8},
            "reward.infer": {
                "block": {"origin": [0, 0, 0], "extent": [1, 1, 2]},
                "dp": 2,
                "pp": 1,
                "tp": 1,
                "microbatches": 8,
            },
        },
        "staleness": {"actor": staleness},
    }


def test_plan_changes_in_words():
    """Moved blocks as flat GPU ranges, changed strategy fields, changed staleness."""
    both = {"origin": [0, 0, 0], "extent": [1, 1, 2]}
    second = {"origin": [0, 0, 1], "extent": [1, 1, 1]}
    shape = (1, 1, 2)
    assert plan_changes(_plan(both, 1), _plan(both, 1), shape, shape) == []
    assert describe_changes([]) == "no change"
    assert plan_changes(_plan(both, 1), _plan(both, 2, staleness=1), shape, shape) == [
        "actor.train strategy: dp 2 -> 1, tp 1 -> 2",
        "staleness of actor 0 -> 1",
    ]
    assert plan_changes(_plan(both, 2), _plan(second, 1), shape, shape) == [
        "actor.train moved from GPUs 0-1 to GPU 1",
        "actor.train strategy: dp 1 -> 2, tp 2 -> 1",
    ]
    assert plan_changes(_plan(both, 1), None) == ["no plan"]


@pytest.fixture(scope="module")
def memory_sweep(tmp_path_factory):
    """A sweep of tiny_grpo_2gpu's memory per GPU: 40 GB, 24 GB (its own), 22 GB, 16 GB."""
    from rlplan.cli import app as main

    out = tmp_path_factory.mktemp("sweep") / "out"
    code = main.main(
        [
            "sweep",
            TINY_GRPO,
            "--param",
            "hardware.memory_per_gpu=40e9,24e9,22e9,16e9",
            "--time-limit",
            "20",
            "--workers",
            "1",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    return code, out


def test_sweep_reports_step_times_and_a_forced_strategy_change(memory_sweep):
    """Shrinking memory from 40 to 24 GB forces actor.train from dp 2 to tp 2 (slower), 22 GB
    is slower again (20 GB fits no plan beside the rollout's engine and the training
    states); at 16 GB nothing fits. The 24 GB step time is the instance's proven optimum;
    changes are against the previous value."""
    from rlplan.solvers import solve
    from rlplan.solvers.options import SolveOptions

    code, out = memory_sweep
    assert code == 0
    rows = _csv(out / "sweep.csv")
    assert [float(r["value"]) for r in rows] == [40e9, 24e9, 22e9, 16e9]
    assert [r["status"] for r in rows] == ["OPTIMAL", "OPTIMAL", "OPTIMAL", "INFEASIBLE"]
    reference = solve("exhaustive", load_problem("tiny_grpo_2gpu.yaml"), SolveOptions(60))
    assert float(rows[1]["step_time_s"]) == pytest.approx(reference.step_time, rel=1e-3)
    assert float(rows[1]["step_time_s"]) > float(rows[0]["step_time_s"])
    steps = [float(r["step_time_s"]) for r in rows[:3]]
    assert steps[0] < steps[1] < steps[2]
    changes = [float(r["step_change_s"]) for r in rows[1:3]]
    assert changes == pytest.approx([steps[1] - steps[0], steps[2] - steps[1]])
    assert rows[0]["plan_change"] == "first value"
    assert "actor.train strategy: dp 2 -> 1, tp 1 -> 2" in rows[1]["plan_change"]
    assert rows[3]["plan_change"] == "no plan" and rows[3]["step_time_s"] == ""
    assert "actor.train fits on no block" in rows[3]["message"]


def test_sweep_outputs_and_html(memory_sweep):
    """sweep.png, bounds.png and a self-contained report.html with the sweep table."""
    _, out = memory_sweep
    for name in ("sweep.png", "bounds.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    contents = assert_self_contained((out / "report.html").read_text(), figures=2, tables=1)
    table = contents.tables[0]
    assert table[0][0] == "value" and len(table) == 5
    assert "Sweep of hardware.memory_per_gpu" in contents.headings


def test_rank_tornado_puts_missing_plans_first_then_largest_change():
    """A side without a plan ranks first; then the largest absolute change; ties keep order."""
    entries = [
        {
            "field": "a",
            "step_low_s": 10.5,
            "step_high_s": 9.9,
            "change_low_s": 0.5,
            "change_high_s": -0.1,
        },
        {
            "field": "b",
            "step_low_s": 8.0,
            "step_high_s": 10.0,
            "change_low_s": -2.0,
            "change_high_s": 0.0,
        },
        {
            "field": "c",
            "step_low_s": None,
            "step_high_s": 10.0,
            "change_low_s": None,
            "change_high_s": 0.0,
        },
        {
            "field": "d",
            "step_low_s": 10.0,
            "step_high_s": 10.0,
            "change_low_s": 0.0,
            "change_high_s": 0.0,
        },
        {
            "field": "e",
            "step_low_s": 10.0,
            "step_high_s": 10.0,
            "change_low_s": 0.0,
            "change_high_s": 0.0,
        },
    ]
    ranked = rank_tornado(entries)
    assert [e["field"] for e in ranked] == ["c", "b", "a", "d", "e"]
    assert [e["rank"] for e in ranked] == [1, 2, 3, 4, 5]


def test_tornado_values_cap_fractions():
    """x0.5 and x1.5, with fractions kept within their range."""
    assert tornado_values("flops_per_gpu", 100.0) == (50.0, 150.0)
    assert tornado_values("gemm_efficiency", 0.8) == (0.4, 1.0)
    assert tornado_values("memory_reserve", 0.05) == pytest.approx((0.025, 0.075))


def test_tornado_ranks_fields_of_a_small_case(cli, tmp_path):
    """On one node: HBM bandwidth (rollout decode) moves the step most, then FLOP/s; the
    inter-node bandwidth is unused and changes nothing. tornado.csv, png and html appear."""
    out = tmp_path / "tornado"
    code, stdout, _ = cli(
        "sweep",
        TINY_GRPO,
        "--tornado",
        "--fields",
        "beta_coll_n,flops_per_gpu,memory_bandwidth",
        "--time-limit",
        "20",
        "--workers",
        "1",
        "--out",
        out,
        "--quiet",
    )
    assert code == 0
    rows = _csv(out / "tornado.csv")
    assert [r["field"] for r in rows] == ["memory_bandwidth", "flops_per_gpu", "beta_coll_n"]
    base = float(rows[0]["step_base_s"])
    memory = rows[0]
    assert float(memory["step_low_s"]) > base > float(memory["step_high_s"])
    assert float(memory["low_value"]) == pytest.approx(0.5 * float(memory["base_value"]))
    assert float(rows[2]["change_low_s"]) == 0.0 and float(rows[2]["change_high_s"]) == 0.0
    assert rows[2]["unit"] == "bytes/s" and float(rows[2]["base_value"]) == 12.5e9
    assert (out / "tornado.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    contents = assert_self_contained((out / "report.html").read_text(), figures=1, tables=1)
    assert [row[1] for row in contents.tables[0][1:]] == [r["field"] for r in rows]
    assert "1. memory_bandwidth" in stdout


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--param", "hardware.no_such_field=1,2"], "no_such_field"),
        (["--param", "hardware.memory_per_gpu=big,small"], "not a number"),
        (["--param", "nosection.field=1"], "unknown section"),
        (["--param", "engine.flash_attention=1"], "not a numeric field"),
        (["--param", "workload.batch_size=0"], "workload.batch_size"),
        ([], "--tornado"),
        (["--tornado", "--fields", "bogus"], "not a numeric hardware field"),
        (["--param", "workload.batch_size=4", "--fields", "flops_per_gpu"], "only with --tornado"),
    ],
)
def test_bad_sweep_input_exits_2_with_one_line(cli, tmp_path, args, names):
    """Bad PATH, non-numeric values, invalid values, no --param: one line, exit 2, no output."""
    out = tmp_path / "out"
    code, stdout, stderr = cli("sweep", TINY_GRPO, *args, "--out", out, "--quiet")
    assert code == 2
    assert stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and names in stderr
    assert not out.exists()
