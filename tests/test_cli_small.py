"""Small things of the command line: help of every argument, baseline's default folder, error
lines that keep their fix, an optional optimizer section, report.html's framework settings and
pareto's shapes of a one-node instance."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from rlplan.cli.parser import build_parser
from rlplan.compare.pareto import plan_points
from rlplan.compare.shapes import cluster_shape, rack_width
from rlplan.rpeg.errors import MAX_MESSAGE_CHARS, cap
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.json_schema import instance_json_schema
from rlplan.rpeg.schema.optimizer import DEFAULT_K_EVAL, OptimizerConfig
from rlplan.rpeg.schema.yamlio import read_yaml_file
from tests.htmlcheck import parse_report

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"
TINY_PPO = INSTANCES / "tiny_ppo_2gpu.yaml"
TINY_GRPO = INSTANCES / "tiny_grpo_2gpu.yaml"


# --- help of every argument, baseline's default --out -----------------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser("rlplan")
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **commands.choices}


@pytest.mark.parametrize("command", list(_subcommands()))
def test_every_argument_has_help(command):
    parser = _subcommands()[command]
    missing = [
        action.dest
        for action in parser._actions
        if action.help is argparse.SUPPRESS or not (action.help or "").strip()
    ]
    assert missing == [], f"{command or 'rlplan'}: no help for {missing}"


def test_baseline_writes_the_default_run_folder_as_solve(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("baseline", TINY_PPO)
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("tiny_ppo_2gpu-")
    assert (run / "plan.json").is_file()
    assert f"wrote {Path('runs') / run.name / 'gantt.png'}" in out


# --- error lines keep their last clause -------------------------------------------------------


def test_the_fingerprint_error_keeps_its_fix(cli, tmp_path):
    """The real line: the plan of an instance whose GPUs were edited, simulated on it."""
    run = tmp_path / "run"
    assert cli("baseline", TINY_PPO, "--out", run)[0] == 0
    data = read_yaml_file(TINY_PPO)
    data["hardware"]["memory_per_gpu"] = 3e9
    edited = tmp_path / "tiny_ppo_2gpu.yaml"
    edited.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = cli("simulate", edited, run / "plan.json")
    assert code == 2 and out == ""
    (line,) = err.splitlines()
    assert len(line) <= 300
    assert line.startswith("error: plan.instance: this plan was made for another version of ")
    assert line.endswith('; delete the plan\'s "instance" entry to simulate it here anyway')


def test_cap_shortens_the_middle_and_keeps_the_last_clause():
    head = "the plan records " + " ".join(f"word{i}" for i in range(60))
    text = f"{head}; do this to fix it"
    capped = cap(text, MAX_MESSAGE_CHARS)
    assert len(capped) <= MAX_MESSAGE_CHARS
    assert capped.startswith("the plan records word0 ")
    assert capped.endswith(" word59; do this to fix it")
    assert " ... " in capped  # the cut falls between words


def test_cap_keeps_the_start_when_the_last_clause_is_most_of_the_line():
    text = "short; " + "x" * 400
    assert cap(text, 190) == text[:187] + "..."
    assert cap("y" * 400, 190) == "y" * 187 + "..."
    assert cap("fits; as it is", 190) == "fits; as it is"


# --- the optimizer section is optional --------------------------------------------------------


@pytest.mark.parametrize("section", ["absent", "null"])
def test_an_instance_without_optimizer_takes_the_defaults(section):
    data = copy.deepcopy(read_yaml_file(TINY_GRPO))
    if section == "absent":
        del data["optimizer"]
    else:
        data["optimizer"] = None
    instance = parse_instance(data, "no_optimizer")
    assert instance.optimizer == OptimizerConfig(staleness_candidates={"actor": (0, 1)})
    assert instance.k_eval == DEFAULT_K_EVAL == 2
    assert instance.optimizer.e_max == 5000 and instance.optimizer.lambda_stale == 0.05
    jsonschema.validate(json.loads(json.dumps(data)), instance_json_schema())


def test_check_runs_on_an_instance_without_optimizer(cli, tmp_path):
    data = read_yaml_file(TINY_GRPO)
    del data["optimizer"]
    path = tmp_path / "no_optimizer.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = cli("check", path)
    assert code == 0, err
    assert out.startswith("instance     no_optimizer: grpo, k_eval 2")


# --- report.html has report.md's framework settings ------------------------------------------


def _markdown_table(lines: list[str], header: str) -> list[list[str]]:
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_report_html_has_the_framework_settings_of_report_md(cli, tmp_path):
    run = tmp_path / "run"
    code, _, err = cli("solve", TINY_PPO, "--solver", "greedy", "--out", run, "--quiet")
    assert code == 0, err
    markdown = (run / "report.md").read_text(encoding="utf-8").splitlines()
    contents = parse_report((run / "report.html").read_text(encoding="utf-8"))
    assert "Framework settings" in contents.headings
    settings = _markdown_table(markdown, "| vertex | GPUs |")
    assert len(settings) == 1 + 6  # the header and the six vertices of PPO
    assert settings in contents.tables
    where = _markdown_table(markdown, "| setting | verl |")
    shown = [[cell.replace("`", "") for cell in row] for row in where]
    assert shown in contents.tables
    for title in ("Colocated (sharing GPUs", "Concurrent (disjoint GPUs", "Where to set it:"):
        assert title in contents.text
    staleness = [
        line[2:] for line in markdown if line.startswith("- actor: ") and "(staleness" in line
    ]
    assert len(staleness) == 1 and staleness[0] in contents.text


# --- pareto keeps a one-node instance's node and grows nodes before racks --------------------


def test_pareto_grows_a_one_node_instance_in_nodes_of_one_rack():
    """tiny_grpo_4gpu is 1 rack x 1 node x 4 GPUs: 8 and 16 GPUs were 2 and 4 one-node racks."""
    points = plan_points(str(INSTANCES / "tiny_grpo_4gpu.yaml"), [2, 4, 8, 16], None)
    assert [point.shape for point in points] == [(1, 1, 2), (1, 1, 4), (1, 2, 4), (1, 4, 4)]


def test_a_cluster_of_more_than_one_node_keeps_its_rack_width():
    assert rack_width(1, 1) is None
    assert rack_width(1, 2) == 2 and rack_width(4, 1) == 1
    assert cluster_shape(32, 8, rack_width(1, 2)) == (2, 2, 8)
    assert cluster_shape(16, 8, rack_width(2, 1)) == (2, 1, 8)
    assert cluster_shape(64, 8, rack_width(1, 1)) == (1, 8, 8)
