"""The value lines: the best plan against each baseline and a known configuration."""

from __future__ import annotations

import json
from pathlib import Path

from rlplan.outputs.report_md import render_report
from rlplan.outputs.value_section import value_table
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import read_plan
from rlplan.rpeg.search.baselines import concurrent_plan, greedy_plan
from rlplan.rpeg.search.framework_defaults import slime_default
from rlplan.rpeg.search.split import split_plan
from rlplan.solvers import auto, greedy, value
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.value import baseline_steps, compared, step_of, value_lines
from tests.htmlcheck import parse_report

REPO = Path(__file__).resolve().parents[2]
TINY_GRPO_4 = REPO / "instances" / "tiny_grpo_4gpu.yaml"


def test_compared_words():
    # (78.19 - 77.72) / 78.19 = 0.601 %; 78.19 / 77.72 = 1.006 -> 1.01x.
    assert compared(78.19, 77.72) == "78.1900 s -> 77.7200 s, 0.6 % faster (1.01x)"
    # (10 - 12.5) / 10 = -25 %: slower; 10 / 12.5 = 0.80x.
    assert compared(10.0, 12.5) == "10.0000 s -> 12.5000 s, 25.0 % slower (0.80x)"
    assert compared(2.0, 2.0) == "2.0000 s -> 2.0000 s, as fast (1.00x)"
    assert compared(None, 2.0) == "no plan fits"


def test_value_lines_name_every_baseline_and_configuration():
    stats = {
        "value": {
            "baselines": {"greedy": 4.0, "concurrent": 2.5, "split": None},
            "against": [{"name": "verl default", "step_time": 5.0}],
        }
    }
    # Best plan 2.0 s: greedy 4.0 -> 50 % faster (2.00x), concurrent 2.5 -> 20 % (1.25x),
    # the default 5.0 -> 60 % (2.50x).
    assert value_lines(stats, 2.0) == [
        "greedy baseline 4.0000 s -> 2.0000 s, 50.0 % faster (2.00x)",
        "concurrent baseline 2.5000 s -> 2.0000 s, 20.0 % faster (1.25x)",
        "split baseline no plan fits",
        "verl default 5.0000 s -> 2.0000 s, 60.0 % faster (2.50x)",
    ]
    assert value_lines({}, 2.0) == []


def test_baseline_steps_reuse_the_backend_figures():
    problem = Problem.load(str(TINY_GRPO_4))
    result = greedy.solve(problem, SolveOptions(time_limit=10, threads=1, seed=0))
    # A figure the backend recorded is taken as it is (a sentinel 123.0 proves no rebuild);
    # greedy's own is the result's step time; split is built.
    result.stats["baselines"] = {"concurrent": 123.0}
    steps = baseline_steps(problem, result)
    assert steps["concurrent"] == 123.0
    assert steps["greedy"] == result.step_time
    assert steps["split"] == step_of(problem, split_plan(problem.directory, problem.simulator))


def test_report_has_the_section_and_solve_prints_the_lines(cli, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = cli(
        "solve", TINY_GRPO_4, "--solver", "local", "--time-limit", "5", "--quiet", "--out", out
    )
    assert code == 0
    document = json.loads((out / "result.json").read_text())
    value = document["stats"]["value"]
    assert list(value["baselines"]) == ["greedy", "concurrent", "split"]
    best = document["step_time_s"]
    versus = [line for line in stdout.splitlines() if line.startswith("versus ")]
    assert [line.split()[1] for line in versus] == ["greedy", "concurrent", "split"]
    greedy_step = value["baselines"]["greedy"]
    assert versus[0] == "versus       greedy baseline " + compared(greedy_step, best)
    report = (out / "report.md").read_text()
    assert "## Against the baselines" in report
    assert f"| greedy baseline | {greedy_step:.4f} s | {compared(greedy_step, best)} |" in report
    contents = parse_report((out / "report.html").read_text())
    assert "Against the baselines" in contents.headings
    table = next(t for t in contents.tables if t[0] == ["against", "its step time", "this plan"])
    assert table[1] == ["greedy baseline", f"{greedy_step:.4f} s", compared(greedy_step, best)]


def test_against_a_plan_file(cli, tmp_path):
    first = tmp_path / "greedy"
    assert cli("baseline", TINY_GRPO_4, "--out", first)[0] == 0
    out = tmp_path / "run"
    code, stdout, _ = cli(
        "solve",
        TINY_GRPO_4,
        "--solver",
        "split",
        "--quiet",
        "--against",
        first / "plan.json",
        "--out",
        out,
    )
    assert code == 0
    document = json.loads((out / "result.json").read_text())
    entry = document["stats"]["value"]["against"]
    # The greedy plan read back is the greedy baseline: the same step time.
    assert entry == [
        {"name": "plan plan.json", "step_time": document["stats"]["value"]["baselines"]["greedy"]}
    ]
    assert "versus       plan plan.json " in stdout


def test_against_a_missing_plan_is_one_line(cli, tmp_path):
    code, _, err = cli(
        "solve", TINY_GRPO_4, "--against", tmp_path / "none.json", "--out", tmp_path / "run"
    )
    assert code == 2 and "none.json" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_no_section_without_figures():
    problem = Problem.load(str(TINY_GRPO_4))
    result = greedy.solve(problem, SolveOptions(time_limit=10, threads=1, seed=0))
    assert value_table(result) == []
    assert "Against the baselines" not in render_report(problem, result, None)


def test_auto_records_its_start_baselines_and_they_are_not_rebuilt(monkeypatch):
    problem = Problem.load(str(TINY_GRPO_4))
    result = auto.solve(problem, SolveOptions(time_limit=10, threads=1, seed=0))
    directory, simulator = problem.directory, problem.simulator
    expected = {
        "greedy": step_of(problem, greedy_plan(directory, simulator)),
        "concurrent": step_of(problem, concurrent_plan(directory, simulator)),
    }
    assert result.stats["baselines"] == expected

    def rebuilt(*_):
        raise AssertionError("a baseline auto built was built again")

    monkeypatch.setitem(value.BASELINES, "greedy", rebuilt)
    monkeypatch.setitem(value.BASELINES, "concurrent", rebuilt)
    steps = baseline_steps(problem, result)
    assert {name: steps[name] for name in expected} == expected


PUBLISHED = REPO / "instances" / "published" / "nemo_rl_grpo_llama31_8b_2x8_h100.yaml"


def test_a_published_run_is_set_against_its_published_plan(cli, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = cli("solve", PUBLISHED, "--solver", "greedy", "--quiet", "--out", out)
    assert code == 0
    problem = Problem.load(str(PUBLISHED))
    plan = read_plan(PUBLISHED.with_suffix(".plan.json"), problem.directory)
    published = step_of(problem, plan)
    best = json.loads((out / "result.json").read_text())["step_time_s"]
    # reference.step_time_s: 97.7 (the measured step), beside the plan's simulated one.
    name = "published plan nemo_rl_grpo_llama31_8b_2x8_h100.plan.json (measured 97.7000 s)"
    assert f"versus       {name} {compared(published, best)}" in stdout.splitlines()


def test_framework_default_line_under_framework(cli, tmp_path):
    out = tmp_path / "run"
    code, stdout, _ = cli(
        "solve",
        TINY_GRPO_4,
        "--solver",
        "split",
        "--framework",
        "slime",
        "--quiet",
        "--out",
        out,
    )
    assert code == 0
    entry = json.loads((out / "result.json").read_text())["stats"]["value"]["against"]
    assert [item["name"] for item in entry] == ["slime default"]
    inside = Problem.load(str(TINY_GRPO_4)).with_framework("slime")
    expected = step_of(inside, slime_default(inside.directory, inside.simulator))
    assert entry[0]["step_time"] == expected
    assert any(line.startswith("versus       slime default ") for line in stdout.splitlines())
