"""A run folder stands alone: solve and baseline copy the instance beside the plan that records
it, so simulate, export-config and sweep work from the folder wherever it is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import load_instance

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "tiny_grpo_2gpu.yaml"
#: A tiny instance verl can run (tiny_grpo_2gpu is outside verl's and NeMo RL's plan spaces).
VERL_TINY = ROOT / "instances" / "tiny_grpo_4gpu.yaml"
TINY_TIED = ROOT / "tests" / "data" / "hf" / "tiny-tied" / "config.json"


def _solve(cli, instance: Path, out: Path, *extra: str) -> None:
    code, _, err = cli(
        "solve", instance, "--solver", "greedy", "--time-limit", "5", "--out", out, *extra
    )
    assert code == 0, err


def _moved_run(cli, tmp_path: Path, instance: Path, *extra: str) -> Path:
    """Solve ``instance`` into tmp_path/run, copy the folder elsewhere and work from a third."""
    _solve(cli, instance, tmp_path / "run", *extra)
    copied = tmp_path / "elsewhere" / "copied-run"
    shutil.copytree(tmp_path / "run", copied)
    return copied


def test_simulate_export_config_and_sweep_work_from_the_copied_folder(cli, tmp_path, monkeypatch):
    copied = _moved_run(cli, tmp_path, VERL_TINY, "--framework", "verl", "--solver", "exhaustive")
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    monkeypatch.chdir(unrelated)
    plan = copied / "plan.json"
    assert json.loads(plan.read_text())["instance"]["file"] == "tiny_grpo_4gpu.yaml"
    # Solved with --framework: the copy says so, and sweeps stay in verl's plan space.
    assert "framework: verl" in (copied / "tiny_grpo_4gpu.yaml").read_text()

    code, out, err = cli("simulate", plan)
    assert code == 0, err
    makespan = json.loads((copied / "result.json").read_text())["makespan_s"]
    assert f"makespan     {makespan:.4f} s" in out

    code, out, err = cli("export-config", plan, "--framework", "verl")
    assert code == 0, err
    code, expected, _ = cli("export-config", plan, "--framework", "verl", "--instance", VERL_TINY)
    assert out == expected

    argv = ("--param", "hardware.memory_per_gpu=20e9,24e9", "--time-limit", "5", "--workers", "1")
    code, out, err = cli("sweep", plan, *argv, "--quiet", "--out", unrelated / "sweep")
    assert code == 0, err
    assert (unrelated / "sweep" / "sweep.csv").is_file()
    assert "hardware.memory_per_gpu=2.4e+10" in out


def test_the_folder_outlives_its_instance(cli, tmp_path, monkeypatch):
    """The original instance, under a name no instances/ folder holds, is deleted."""
    source = tmp_path / "source" / "my_tiny_grpo.yaml"
    source.parent.mkdir()
    text = VERL_TINY.read_text().replace("\nengine:", "\nengine:\n  framework: verl\n  #", 1)
    source.write_text(text)
    copied = _moved_run(cli, tmp_path, source, "--solver", "exhaustive")
    shutil.rmtree(source.parent)
    monkeypatch.chdir(tmp_path)
    assert (copied / "my_tiny_grpo.yaml").read_text() == text  # comments and all

    code, out, err = cli("simulate", copied / "plan.json")
    assert code == 0, err
    code, out, err = cli("export-config", copied / "plan.json", "--framework", "verl")
    assert code == 0, err
    assert "my_tiny_grpo" in out
    argv = ("--param", "workload.batch_size=4", "--time-limit", "5", "--workers", "1", "--quiet")
    code, _, err = cli("sweep", copied, *argv, "--out", tmp_path / "sweep")  # the folder itself
    assert code == 0, err


def test_without_the_copy_the_moved_plan_finds_no_instance(cli, tmp_path, monkeypatch):
    """What the copy is for: a moved plan alone names an instance that is nowhere."""
    source = tmp_path / "source" / "my_tiny_grpo.yaml"
    source.parent.mkdir()
    shutil.copy(TINY, source)
    copied = _moved_run(cli, tmp_path, source)
    shutil.rmtree(source.parent)
    (copied / "my_tiny_grpo.yaml").unlink()
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("simulate", copied / "plan.json")
    assert code == 2
    assert err.startswith("error: instance: cannot tell which instance")
    assert err.rstrip().endswith("give it first: simulate INSTANCE PLAN")


def test_baseline_copies_and_records_the_instance_too(cli, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert cli("baseline", TINY, "--out", out)[0] == 0
    document = json.loads((out / "plan.json").read_text())
    problem = Problem.load(str(TINY))
    assert document["instance"] == {
        "name": "tiny_grpo_2gpu",
        "fingerprint": instance_fingerprint(problem.instance),
        "file": "tiny_grpo_2gpu.yaml",
    }
    monkeypatch.chdir(tmp_path)
    assert cli("simulate", out / "plan.json")[0] == 0


def test_an_hf_config_model_is_written_out_in_the_copy(cli, tmp_path):
    """The copy of an instance whose model reads a config.json needs no config.json."""
    data = yaml.safe_load(TINY.read_text())
    config = tmp_path / "source" / "tied" / "config.json"
    config.parent.mkdir(parents=True)
    shutil.copy(TINY_TIED, config)
    data["models"]["reward"] = {"hf_config": "tied"}  # relative to the instance's folder
    source = tmp_path / "source" / "tied_grpo.yaml"
    source.write_text(yaml.safe_dump(data))
    _solve(cli, source, tmp_path / "run")
    expected = instance_fingerprint(load_instance(source))
    shutil.rmtree(tmp_path / "source")
    copy = tmp_path / "run" / "tied_grpo.yaml"
    reward = yaml.safe_load(copy.read_text())["models"]["reward"]
    assert "hf_config" not in reward and reward["hidden_dim"] == 64  # the config's hidden_size
    assert instance_fingerprint(load_instance(copy)) == expected


def test_a_rerun_replaces_the_copy_but_no_foreign_yaml(cli, tmp_path):
    """The recorded copy is a run's file (another run replaces it); any other YAML is not."""
    out = tmp_path / "run"
    _solve(cli, TINY, out)
    other = ROOT / "instances" / "tiny_grpo_4gpu.yaml"
    _solve(cli, other, out)
    assert sorted(p.name for p in out.glob("*.yaml")) == ["tiny_grpo_4gpu.yaml"]
    (out / "notes.yaml").write_text("mine: true\n")
    code, _, err = cli("solve", TINY, "--solver", "greedy", "--out", out, "--quiet")
    assert code == 2
    assert "'notes.yaml', which is not a run's output" in err
    assert (out / "notes.yaml").is_file()


@pytest.mark.parametrize("argument", ["folder", "plan"])
def test_a_bad_run_argument_is_one_line(cli, tmp_path, argument):
    empty = tmp_path / "empty"
    empty.mkdir()
    path = empty if argument == "folder" else tmp_path / "missing.json"
    code, out, err = cli("sweep", path, "--param", "workload.batch_size=4")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}")
