"""Absurd options, unwritable outputs, odd plan files: one line and exit 2, before any work.

Also: a run folder is replaced whole (no file of an earlier run survives) and
every JSON output is strict JSON.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlplan.outputs.files import OutputBundle, dumps, finite_json

REPO = Path(__file__).resolve().parent.parent
INSTANCES = REPO / "instances"
TINY_PPO = INSTANCES / "tiny_ppo_2gpu.yaml"
INFEASIBLE = INSTANCES / "infeasible_70b_2gpu.yaml"


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    assert "Traceback" not in stderr and len(lines[0]) <= 300
    return lines[0]


def strict_json(path: Path):
    """Parse ``path`` refusing NaN and Infinity, as strict JSON parsers do."""

    def refuse(constant: str):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@pytest.fixture(scope="module")
def greedy_run(tmp_path_factory) -> Path:
    """A greedy solve's run folder (plan.json and its companions)."""
    from rlplan.cli import app as main

    out = tmp_path_factory.mktemp("greedy") / "run"
    assert (
        main.main(["solve", str(TINY_PPO), "--solver", "greedy", "--out", str(out), "--quiet"]) == 0
    )
    return out


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--time-limit", "nan", "--time-limit"),
        ("--time-limit", "inf", "--time-limit"),
        ("--time-limit", "-1", "--time-limit"),
        ("--threads", str(10**30), "--threads"),
        ("--seed", str(10**30), "--seed"),
        ("--seed", "-1", "--seed"),
        ("--evaluations", str(10**30), "--evaluations"),
    ],
)
def test_absurd_solve_options_get_one_line(cli, tmp_path, option, value, named):
    out = tmp_path / "run"
    code, stdout, stderr = cli("solve", TINY_PPO, option, value, "--out", out, "--quiet")
    assert code == 2 and stdout == ""
    assert one_line(stderr).startswith(f"error: {named}:")
    assert not out.exists()


def test_compare_refuses_a_nan_time_limit(cli, tmp_path):
    code, _, stderr = cli("compare", TINY_PPO, "--time-limit", "nan", "--out", tmp_path / "b")
    assert code == 2 and one_line(stderr).startswith("error: --time-limit:")


def test_an_unknown_mip_engine_gets_one_line(tmp_path):
    """Pyomo once logged 15 lines and a traceback first (its log goes to the real stderr)."""
    argv = ["solve", str(TINY_PPO), "--solver", "milp:nonexistent", "--out", str(tmp_path / "r")]
    done = subprocess.run(
        [sys.executable, str(REPO / "main.py"), *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "nonexistent" in one_line(done.stderr)


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (("solve", TINY_PPO, "--solver", "auto", "--out", "{file}/sub"), "--out"),
        (("solve", TINY_PPO, "--solver", "auto", "--out", "/proc/rlplan-test"), "--out"),
        (("baseline", TINY_PPO, "--out", "{file}/sub"), "--out"),
        (("simulate", TINY_PPO, "{plan}", "--trace", "/proc/version"), "--trace"),
        (("simulate", TINY_PPO, "{plan}", "--gantt", "{file}/g.png"), "--gantt"),
        (("export", TINY_PPO, "--out", "/proc/rlplan-test.mps"), "--out"),
        (("export-config", "{plan}", "--framework", "verl", "--out", "/proc/x.yaml"), "--out"),
        (("compare", TINY_PPO, "--solvers", "greedy", "--out", "{file}/sub"), "--out"),
    ],
)
def test_unwritable_outputs_are_refused_before_any_work(cli, tmp_path, greedy_run, argv, option):
    """With ``auto`` the refusal once came only after the whole solve."""
    blocker = tmp_path / "plan.json"
    blocker.write_text("{}", encoding="utf-8")
    names = {"file": str(blocker), "plan": str(greedy_run / "plan.json")}
    code, stdout, stderr = cli(*(str(a).format(**names) for a in argv))
    assert code == 2 and "status" not in stdout and "wrote" not in stdout
    assert one_line(stderr).startswith(f"error: {option}:")


def test_a_run_folder_holding_other_files_is_refused(cli, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    code, _, stderr = cli("solve", TINY_PPO, "--solver", "greedy", "--out", out, "--quiet")
    assert code == 2 and "notes.txt" in one_line(stderr)
    assert (out / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_an_infeasible_solve_replaces_a_feasible_run_whole(cli, tmp_path):
    """The old plan.json, trace.json and gantt.png once stayed beside the new result.json."""
    out = tmp_path / "run"
    assert cli("solve", TINY_PPO, "--solver", "greedy", "--out", out, "--quiet")[0] == 0
    assert (out / "plan.json").exists() and (out / "gantt.png").exists()
    assert cli("solve", INFEASIBLE, "--solver", "greedy", "--out", out, "--quiet")[0] == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "infeasible_70b_2gpu.yaml",
        "report.html",
        "report.md",
        "result.json",
    ]
    assert strict_json(out / "result.json")["status"] == "INFEASIBLE"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_an_interrupted_bundle_leaves_the_old_folder(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "plan.json").write_text("old", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt), OutputBundle(str(out), replace=True) as bundle:
        bundle.write_text("result.json", "new")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert (out / "plan.json").read_text(encoding="utf-8") == "old"


def test_json_outputs_are_strict():
    """A ``milp_bound_s`` of -inf once reached result.json as ``-Infinity``."""
    document = {"milp_bound_s": -math.inf, "x": [math.nan, 1.5, {"y": math.inf}], "z": "inf"}
    assert finite_json(document) == {
        "milp_bound_s": None,
        "x": [None, 1.5, {"y": None}],
        "z": "inf",
    }
    assert json.loads(dumps(document)) == finite_json(document)


def test_solve_outputs_parse_as_strict_json(greedy_run):
    for name in ("result.json", "plan.json", "trace.json", "trace.perfetto.json"):
        strict_json(greedy_run / name)


def test_a_folder_as_plan_is_named_a_folder(cli, tmp_path):
    code, _, stderr = cli("simulate", TINY_PPO, tmp_path)
    assert code == 2 and "is a folder" in one_line(stderr)


def test_dev_zero_as_plan_is_not_a_regular_file(cli):
    code, _, stderr = cli("simulate", TINY_PPO, "/dev/zero")
    assert code == 2 and "not a regular file" in one_line(stderr)


def test_a_plan_with_a_byte_order_mark_is_read(cli, tmp_path, greedy_run):
    plan = tmp_path / "bom.json"
    plan.write_bytes(b"\xef\xbb\xbf" + (greedy_run / "plan.json").read_bytes())
    code, stdout, _ = cli("simulate", TINY_PPO, plan)
    assert code == 0 and "step time" in stdout


@pytest.mark.parametrize("staleness", [99, 10**30, 2])
def test_plan_staleness_outside_the_candidates_is_refused(cli, tmp_path, greedy_run, staleness):
    """tiny_ppo_2gpu allows actor staleness 0 or 1 (optimizer.staleness_candidates)."""
    document = json.loads((greedy_run / "plan.json").read_text(encoding="utf-8"))
    document["staleness"]["actor"] = staleness
    plan = tmp_path / "stale.json"
    plan.write_text(json.dumps(document), encoding="utf-8")
    code, _, stderr = cli("simulate", TINY_PPO, plan)
    line = one_line(stderr)
    assert code == 2 and "plan.staleness.actor" in line and "(0, 1)" in line


def test_a_huge_plan_value_gets_a_short_line(cli, tmp_path, greedy_run):
    """A million-element origin list once produced a 7.9 MB error line."""
    document = json.loads((greedy_run / "plan.json").read_text(encoding="utf-8"))
    vertex = next(iter(document["vertices"]))
    document["vertices"][vertex]["block"]["origin"] = list(range(10**6))
    plan = tmp_path / "huge.json"
    plan.write_text(json.dumps(document), encoding="utf-8")
    code, _, stderr = cli("simulate", TINY_PPO, plan)
    assert code == 2 and "origin" in one_line(stderr)


def test_check_prints_no_inf_for_extreme_values_within_the_limits(cli, tmp_path):
    """1e308 and 1e-308 are refused; the extremes of the ranges give finite figures."""
    text = TINY_PPO.read_text(encoding="utf-8")
    text = text.replace("flops_per_gpu: 165e12", "flops_per_gpu: 1e9", 1)
    text = text.replace("alpha_coll_g: 1e-5", "alpha_coll_g: 1", 1)
    path = tmp_path / "extreme.yaml"
    path.write_text(text, encoding="utf-8")
    code, stdout, stderr = cli("check", path)
    assert code in (0, 1) and "Traceback" not in stderr
    words = stdout.replace("(", " ").replace(")", " ").split()
    assert "inf" not in words and "nan" not in words
    assert os.path.getsize(path) > 0


TWO_POOLS = REPO / "tests" / "data" / "tiny_two_pools_grpo.yaml"


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("name: wide", "name: wide\n      preset: h300", "hardware.pools[1].preset"),
        ("name: wide", "name: fast", "hardware.pools[1].name"),
        (
            "price_per_gpu_hour: 1.0",
            "price_per_gpu_hour: -1.0",
            "hardware.pools[1].price_per_gpu_hour",
        ),
        (
            "price_per_gpu_hour: 2.0",
            "price_per_gpu_hour: two",
            "hardware.pools[0].price_per_gpu_hour",
        ),
        (
            "actor.train: {dp: 2, tp: 1}",
            "actor.train: {dp: 2, block: {pool: slow}}",
            "placement.pin.actor.train.block.pool",
        ),
    ],
)
def test_bad_pools_get_one_line_naming_the_field(cli, tmp_path, old, new, named):
    """An unknown preset in a pool, two pools of one name, a bad price, a pin naming no pool."""
    text = TWO_POOLS.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "pools.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    code, stdout, stderr = cli("check", path)
    assert code == 2 and stdout == ""
    assert one_line(stderr).startswith(f"error: {named}:")


@pytest.mark.parametrize(
    ("block", "named"),
    [
        ({"pool": "fast", "origin": [0, 0, 0], "extent": [1, 1, 4]}, "block"),
        ({"origin": [0, 0, 0], "extent": [1, 1, 2]}, "block.pool"),
    ],
)
def test_a_plan_block_across_pools_gets_one_line(cli, tmp_path, block, named):
    """A block that leaves its pool, or one that names no pool on a cluster of two."""
    out = tmp_path / "run"
    code, _, _ = cli("solve", TWO_POOLS, "--solver", "greedy", "--out", out, "--quiet")
    assert code == 0
    document = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert document["vertices"]["actor.train"]["block"]["pool"] in ("fast", "wide")
    document["vertices"]["actor.train"]["block"] = block
    plan = tmp_path / "crossing.json"
    plan.write_text(json.dumps(document), encoding="utf-8")
    code, stdout, stderr = cli("simulate", TWO_POOLS, plan)
    assert code == 2 and stdout == ""
    assert one_line(stderr).startswith(f"error: plan.vertices.actor.train.{named}:")
