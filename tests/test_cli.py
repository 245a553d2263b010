"""The command line (main.py): check, baseline, simulate and their bad-input handling."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplan.cli import app as main
from rlplan.rpeg.schema.yamlio import loads

REPO = Path(__file__).resolve().parent.parent
INSTANCES = REPO / "instances"
DATA = REPO / "tests" / "data"
TINY_PPO = INSTANCES / "tiny_ppo_2gpu.yaml"
TINY_GRPO_4 = INSTANCES / "tiny_grpo_4gpu.yaml"
TINY_GRPO_2X2 = DATA / "tiny_grpo_2x2gpu.yaml"
INFEASIBLE = INSTANCES / "infeasible_70b_2gpu.yaml"


def one_line(stderr: str) -> str:
    """The single line of ``stderr`` (fails unless there is exactly one)."""
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {stderr!r}"
    assert "Traceback" not in stderr
    return lines[0]


def tiny_ppo_with_layers(folder: Path, literal: str) -> Path:
    """tiny_ppo_2gpu re-dumped into ``folder`` with ``models.actor.layers: <literal>``."""
    data = loads(TINY_PPO.read_text(encoding="utf-8"))
    data["models"]["actor"]["layers"] = "SENTINEL_LAYERS"
    text = yaml.safe_dump(data, sort_keys=False)
    assert text.count("SENTINEL_LAYERS") == 1
    path = folder / "layers.yaml"
    path.write_text(text.replace("SENTINEL_LAYERS", literal), encoding="utf-8")
    return path


def bad_layers_instance(folder: Path) -> Path:
    """tiny_ppo_2gpu with ``models.actor.layers: -3`` written into ``folder``."""
    return tiny_ppo_with_layers(folder, "-3")


@pytest.fixture(scope="module")
def baselines(tmp_path_factory) -> Callable[[Path, str], Path]:
    """Build (once per module) a baseline's output folder for an instance and kind."""
    cache: dict[tuple[Path, str], Path] = {}

    def get(instance: Path, kind: str = "greedy") -> Path:
        if (instance, kind) not in cache:
            out = tmp_path_factory.mktemp(f"{instance.stem}-{kind}") / "out"
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = main.main(["baseline", str(instance), "--kind", kind, "--out", str(out)])
            assert code == 0, stdout.getvalue() + stderr.getvalue()
            cache[instance, kind] = out
        return cache[instance, kind]

    return get


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------


def test_check_good_instance(cli):
    """check on a feasible instance exits 0 and prints the lower bounds."""
    code, out, err = cli("check", TINY_PPO)
    assert code == 0
    assert "lower bounds" in out
    assert "INFEASIBLE" not in out
    assert err == ""


def test_check_infeasible_instance(cli):
    """check on the 70B-on-2-GPUs instance exits 1 naming actor.train and its shortfall in GB."""
    code, out, _ = cli("check", INFEASIBLE)
    assert code == 1
    lines = [line for line in out.splitlines() if "INFEASIBLE" in line and "actor.train" in line]
    assert len(lines) == 1
    assert re.search(r"\d+\.\d+ GB more than", lines[0])
    assert "lower bounds" not in out


def test_check_unknown_section_warns(cli, tmp_path):
    """check accepts an unknown top-level section with one warning line on stderr."""
    path = tmp_path / "with_logging.yaml"
    path.write_text(TINY_PPO.read_text(encoding="utf-8") + "\nlogging: {level: info}\n")
    code, out, err = cli("check", path)
    assert code == 0
    assert "logging" in one_line(err)
    assert "lower bounds" in out


@pytest.mark.parametrize(
    ("make_path", "expected"),
    [
        (lambda folder: folder / "missing.yaml", "no such file"),
        (lambda folder: DATA / "not_yaml.yaml", "not a valid YAML file"),
        (lambda folder: DATA / "top_level_list.yaml", "mapping"),
        (bad_layers_instance, "models.actor.layers: must be a positive integer, got -3"),
    ],
    ids=["missing-file", "not-yaml", "top-level-list", "negative-layers"],
)
def test_check_bad_input(cli, tmp_path, make_path, expected):
    """check on bad input exits 2 with one stderr line naming the problem and no output."""
    path = make_path(tmp_path)
    code, out, err = cli("check", path)
    assert code == 2
    assert expected in one_line(err)
    assert out == ""


def test_check_bad_input_subprocess(tmp_path):
    """As a process, bad input gives exit code 2, one stderr line and no traceback."""
    path = bad_layers_instance(tmp_path)
    result = subprocess.run(
        [sys.executable, "main.py", "check", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "models.actor.layers" in line
    assert "positive integer" in line
    assert result.stdout == ""


def tiny_ppo_changed(folder: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """tiny_ppo_2gpu with ``change`` applied to its document, written into ``folder``."""
    data = loads(TINY_PPO.read_text(encoding="utf-8"))
    change(data)
    path = folder / "changed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _both_micro_batch_forms(data: dict[str, Any]) -> None:
    data["placement"]["microbatches"] = [2]
    data["placement"]["micro_batch_sizes"] = [4]


#: Bad cost model v2 input (docs/cost-model.md): (change, field path, message).
BAD_V2_INPUT = [
    (
        lambda data: data["placement"].update(sharding=["zero2"]),
        "placement.sharding[0]",
        "must be one of zero1, zero3, got 'zero2'",
    ),
    (
        lambda data: data["placement"].update(recompute=["none", "selective"]),
        "placement.recompute[1]",
        "must be one of none, full",
    ),
    (
        lambda data: data["placement"].update(offload=["yes"]),
        "placement.offload[0]",
        "must be one of false, true",
    ),
    (
        lambda data: data["placement"].update(max_num_seqs=[0]),
        "placement.max_num_seqs[0]",
        "must be a positive integer, got 0",
    ),
    (
        lambda data: data["placement"].update(max_num_seqs=[]),
        "placement.max_num_seqs",
        "must be a non-empty list",
    ),
    (
        lambda data: data["placement"].update(gpu_memory_utilization=[0.5, 1.2]),
        "placement.gpu_memory_utilization[1]",
        "must be a number in (0, 1], got 1.2",
    ),
    (
        lambda data: data["hardware"].update(gemm_efficiency=1.5),
        "hardware.gemm_efficiency",
        "must be a number in (0, 1], got 1.5",
    ),
    (
        lambda data: data["hardware"].update(host_bandwidth=-1),
        "hardware.host_bandwidth",
        "must be a positive number, got -1",
    ),
    (
        lambda data: data["hardware"].update(host_memory_per_node=-1),
        "hardware.host_memory_per_node",
        "must be a positive number, got -1",
    ),
    (
        lambda data: data["hardware"].update(host_memory_per_node=2e15),
        "hardware.host_memory_per_node",
        "2e+15 is outside the plausible range 1e+06 to 1e+15 (bytes",
    ),
    (
        lambda data: data["hardware"].update(host_to_device_pinned=0),
        "hardware.host_to_device_pinned",
        "must be a positive number, got 0",
    ),
    (
        lambda data: data["hardware"].update(device_to_host_pageable=-5e9),
        "hardware.device_to_host_pageable",
        "must be a positive number",
    ),
    (
        lambda data: data["engine"].update(offload_memory="locked"),
        "engine.offload_memory",
        "must be pinned or pageable, got 'locked'",
    ),
    (
        lambda data: data["engine"].update(sleep_level=3),
        "engine.sleep_level",
        "must be 1 or 2, got 3",
    ),
    (
        lambda data: data["hardware"].update(decode_step_overhead=-0.001),
        "hardware.decode_step_overhead",
        "must be a non-negative number",
    ),
    (
        lambda data: data["engine"].update(flash_attn=True),
        "engine.flash_attn",
        "unknown key",
    ),
    (
        lambda data: data["engine"].update(sequence_packing="yes"),
        "engine.sequence_packing",
        "must be true or false",
    ),
    (
        lambda data: data["engine"].update(rollout_workspace=-1),
        "engine.rollout_workspace",
        "must be a non-negative number",
    ),
    (
        _both_micro_batch_forms,
        "placement.microbatches",
        "give either microbatches (counts) or micro_batch_sizes (sequences), not both",
    ),
]


@pytest.mark.parametrize(
    ("change", "field", "message"),
    BAD_V2_INPUT,
    ids=[case[1] for case in BAD_V2_INPUT],
)
def test_check_bad_v2_input(cli, tmp_path, change, field, message):
    """check on bad v2 input exits 2 with one stderr line naming the field, and no output."""
    path = tiny_ppo_changed(tmp_path, change)
    code, out, err = cli("check", path)
    assert code == 2
    line = one_line(err)
    assert f"{field}: " in line
    assert message in line
    assert out == ""


# ----------------------------------------------------------------------------
# baseline and simulate round trip
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["greedy", "concurrent"])
def test_baseline_writes_outputs_and_simulate_reproduces(cli, tmp_path, kind):
    """baseline writes plan, trace and Gantt; simulating plan.json gives the same makespan."""
    out = tmp_path / "run"
    code, stdout, _ = cli("baseline", TINY_PPO, "--kind", kind, "--out", out)
    assert code == 0
    assert f"{kind} baseline" in stdout
    assert sorted(p.name for p in out.iterdir()) == [
        "gantt.png",
        "plan.json",
        "report.md",
        "tiny_ppo_2gpu.yaml",
        "trace.json",
    ]
    assert (out / "gantt.png").read_bytes().startswith(b"\x89PNG")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.startswith("# tiny_ppo_2gpu — ") and f"({kind})" in report.splitlines()[0]
    assert "## Placement" in report and "## Memory per GPU" in report
    assert not list(tmp_path.glob(".staging-*"))
    plan = load_json(out / "plan.json")
    assert plan["algorithm"] == "ppo"
    expected = load_json(out / "trace.json")["makespan"]
    assert expected > 0

    trace = tmp_path / "again.json"
    code, stdout, err = cli("simulate", TINY_PPO, out / "plan.json", "--trace", trace)
    assert code == 0
    assert err == ""
    assert load_json(trace)["makespan"] == expected
    assert f"makespan     {expected:.4f} s" in stdout


def start_order(trace: dict[str, Any]) -> list[list[Any]]:
    """The runs of a trace as [vertex, step] pairs in start-time order."""
    runs = [event for event in trace["events"] if event["kind"] == "compute"]
    runs.sort(key=lambda event: event["start"])
    return [[event["vertex"], event["step"]] for event in runs]


def test_simulate_with_start_order_reproduces_makespan(cli, tmp_path, baselines):
    """A plan whose order is the trace's start-time order simulates to the same makespan."""
    folder = baselines(TINY_PPO, "concurrent")
    trace = load_json(folder / "trace.json")
    plan = load_json(folder / "plan.json")
    plan["order"] = start_order(trace)
    path = tmp_path / "ordered.json"
    path.write_text(json.dumps(plan))
    out = tmp_path / "trace.json"
    code, _, _ = cli("simulate", TINY_PPO, path, "--trace", out)
    assert code == 0
    assert load_json(out)["makespan"] == trace["makespan"]


# ----------------------------------------------------------------------------
# simulate: bad plans
# ----------------------------------------------------------------------------


def unknown_vertex(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    plan["vertices"]["critic.train"] = copy.deepcopy(plan["vertices"]["actor.train"])


def block_outside_cluster(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    plan["vertices"]["actor.train"]["block"] = {"origin": [0, 0, 1], "extent": [1, 1, 2]}


def block_not_aligned(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    plan["vertices"]["actor.train"]["block"] = {"origin": [0, 0, 1], "extent": [1, 1, 2]}


def gpu_count_mismatch(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    entry = plan["vertices"]["actor.train"]
    entry.update(dp=4, pp=1, tp=1)
    # the size per micro-batch the plan file states is that of the old dp: drop it
    entry.pop("micro_batch_size")


def tp_not_dividing_node(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    entry = plan["vertices"]["actor.train"]
    assert entry["block"]["extent"] == [1, 2, 2]
    entry.update(dp=1, pp=1, tp=4)


def order_not_topological(plan: dict[str, Any], trace: dict[str, Any]) -> None:
    order = start_order(trace)
    first, second = order.index(["actor.generate", 0]), order.index(["actor.train", 0])
    assert first < second
    order[first], order[second] = order[second], order[first]
    plan["order"] = order


BAD_PLANS = [
    (TINY_GRPO_2X2, unknown_vertex, "plan.vertices.critic.train", "no such vertex"),
    (TINY_PPO, block_outside_cluster, "plan.vertices.actor.train.block", "outside the cluster"),
    (TINY_GRPO_4, block_not_aligned, "plan.vertices.actor.train.block", "not a block"),
    (TINY_PPO, gpu_count_mismatch, "plan.vertices.actor.train", "dp*cp*pp*tp = 4"),
    (TINY_GRPO_2X2, tp_not_dividing_node, "plan.vertices.actor.train", "node width 2"),
    (TINY_PPO, order_not_topological, "plan.order", "not a topological order"),
]


@pytest.mark.parametrize(
    ("instance", "mutate", "field", "message"),
    BAD_PLANS,
    ids=[case[1].__name__ for case in BAD_PLANS],
)
def test_simulate_bad_plan(cli, tmp_path, baselines, instance, mutate, field, message):
    """simulate rejects a bad plan with exit 2, one line naming the field, and writes nothing."""
    folder = baselines(instance)
    plan = load_json(folder / "plan.json")
    mutate(plan, load_json(folder / "trace.json"))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    trace, gantt = tmp_path / "out" / "trace.json", tmp_path / "out" / "gantt.png"
    code, out, err = cli("simulate", instance, path, "--trace", trace, "--gantt", gantt)
    assert code == 2
    line = one_line(err)
    assert f"{field}:" in line
    assert message in line
    assert not trace.exists()
    assert not gantt.exists()
    assert not (tmp_path / "out").exists()
    assert out == ""


def test_simulate_missing_plan_file(cli, tmp_path):
    """simulate with a plan file that does not exist exits 2 naming the file."""
    path = tmp_path / "nowhere.json"
    code, _, err = cli("simulate", TINY_PPO, path)
    assert code == 2
    assert str(path) in one_line(err)


def test_simulate_plan_not_json(cli, tmp_path):
    """simulate with a plan file that is not JSON exits 2 with one line."""
    path = tmp_path / "plan.json"
    path.write_text("{not json")
    code, _, err = cli("simulate", TINY_PPO, path)
    assert code == 2
    assert "not a JSON file" in one_line(err)


# ----------------------------------------------------------------------------
# baseline: no output folder on bad input
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_path", "exit_code"),
    [
        (bad_layers_instance, 2),
        (lambda folder: folder / "missing.yaml", 2),
        (lambda folder: DATA / "not_yaml.yaml", 2),
        (lambda folder: INFEASIBLE, 1),
    ],
    ids=["negative-layers", "missing-file", "not-yaml", "infeasible"],
)
def test_baseline_bad_input_creates_no_folder(cli, tmp_path, make_path, exit_code):
    """baseline on bad (or infeasible) input leaves --out uncreated and no staging folder."""
    path = make_path(tmp_path)
    out = tmp_path / "results" / "run"
    code, _, err = cli("baseline", path, "--out", out)
    assert code == exit_code
    if exit_code == 2:
        one_line(err)
    assert not out.exists()
    assert not list(tmp_path.rglob(".staging-*"))


# ----------------------------------------------------------------------------
# Regressions: huge values, error-line length, unusable output paths
# ----------------------------------------------------------------------------


def test_baseline_out_is_a_file(cli, tmp_path):
    """baseline --out naming an existing file is bad input: exit 2 and one stderr line."""
    out = tmp_path / "taken"
    out.write_text("keep me")
    code, _, err = cli("baseline", TINY_PPO, "--out", out)
    assert code == 2
    assert str(out) in one_line(err)
    assert out.read_text() == "keep me"


def test_simulate_trace_is_a_directory(cli, tmp_path, baselines):
    """simulate --trace naming an existing directory is bad input: exit 2 and one stderr line."""
    plan = baselines(TINY_PPO) / "plan.json"
    target = tmp_path / "folder"
    target.mkdir()
    code, _, err = cli("simulate", TINY_PPO, plan, "--trace", target)
    assert code == 2
    assert str(target) in one_line(err)


def test_simulate_plan_with_giant_integer(cli, tmp_path, baselines):
    """A plan file holding a 5000-digit integer is rejected with exit 2 and one line."""
    text = (baselines(TINY_PPO) / "plan.json").read_text()
    path = tmp_path / "plan.json"
    assert text.count('"k_eval": ') == 1
    path.write_text(re.sub(r'"k_eval": \d+', '"k_eval": ' + "2" * 5000, text))
    code, _, err = cli("simulate", TINY_PPO, path)
    assert code == 2
    one_line(err)


def test_check_instance_with_giant_integer(cli, tmp_path):
    """check on an instance whose layers is a 400-digit integer exits 2 naming the field."""
    path = tiny_ppo_with_layers(tmp_path, "9" * 400)
    code, _, err = cli("check", path)
    assert code == 2
    assert "models.actor.layers" in one_line(err)


def test_solve_help_lists_the_solver_choices(capsys):
    """``solve --help`` names every backend --solver accepts, and milp:ENGINE."""
    from rlplan.solvers import BACKENDS

    with pytest.raises(SystemExit) as caught:
        main.main(["solve", "--help"])
    assert caught.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--solver SOLVER", text.index("options:"))
    described = text[start : text.index("--time-limit", start)]
    for name in BACKENDS:
        assert name in described
    assert "milp:ENGINE" in described
