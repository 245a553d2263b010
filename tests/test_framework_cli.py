"""``--framework`` and ``engine.framework`` from the command line: solve, refusals, bad names."""

from __future__ import annotations

import json

from rlplan.rpeg.model import frameworks
from rlplan.rpeg.model.frameworks import rules as R

TINY = "instances/tiny_grpo_4gpu.yaml"
WORDS = {"need": "the reference could run in its own layout", "source": "test source"}
TIE = R.SameLayout(
    "ref-in-layout",
    words="the reference runs in the trainer's layout",
    leader="actor.train",
    follower="reference.infer",
    **WORDS,
)


def register(monkeypatch, *rules: R.Rule) -> None:
    """A framework of ``rules`` under the name ``nemo-rl`` for one test."""
    framework = R.Framework("nemo-rl", "Test", "t1", tuple(rules))
    monkeypatch.setitem(frameworks.FRAMEWORKS, "nemo-rl", framework)


def test_solve_with_a_framework_reports_both_spaces(cli, tmp_path, monkeypatch):
    register(monkeypatch, TIE)
    out = tmp_path / "run"
    code, printed, _ = cli(
        "solve", TINY, "--framework", "nemo-rl", "--time-limit", "20", "--out", out, "--quiet"
    )
    assert code == 0
    assert "framework    Test (t1):" in printed
    assert "if the reference could run in its own layout" in printed
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["stats"]["framework"]["speedup"] > 1.0
    assert "## Framework plan space" in (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Framework plan space" in html and "the reference could run in its own layout" in html


def test_export_config_refuses_a_plan_breaking_a_rule(cli, tmp_path, monkeypatch):
    # The full-space optimum trains in dp 2 x tp 2 and scores the reference in
    # dp 4 (tests/solvers/test_framework_space.py): it breaks the tie.
    out = tmp_path / "run"
    assert cli("solve", TINY, "--time-limit", "20", "--out", out, "--quiet")[0] == 0
    register(monkeypatch, TIE)
    code, printed, err = cli(
        "export-config", out / "plan.json", "--instance", TINY, "--framework", "nemo-rl"
    )
    assert code == 2 and printed == ""
    assert err.splitlines() == [
        "error: plan.json: reference.infer vs actor.train breaks Test rule ref-in-layout: the "
        "reference runs in the trainer's layout; solve with --framework nemo-rl for a plan Test "
        "can run"
    ]
    framed = tmp_path / "framed"
    code, _, _ = cli(
        "solve", TINY, "--framework", "nemo-rl", "--time-limit", "20", "--out", framed, "--quiet"
    )
    assert code == 0
    code, printed, _ = cli(
        "export-config", framed / "plan.json", "--instance", TINY, "--framework", "nemo-rl"
    )
    assert code == 0 and printed


def test_unknown_framework_flag_is_one_line_with_the_closest_name(cli):
    code, out, err = cli("solve", TINY, "--framework", "nemo_rl")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "error: --framework: unknown framework 'nemo_rl' (one of verl, nemo-rl, openrlhf, "
        "slime); did you mean 'nemo-rl'?"
    ]


def test_unknown_engine_framework_is_one_line_naming_the_field(cli, tmp_path):
    with open(TINY, encoding="utf-8") as handle:
        text = handle.read()
    text = text.replace("\nengine:", "\nengine:\n  framework: verll\n  # the rest:", 1)
    assert "framework: verll" in text
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    code, out, err = cli("check", path)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1
    assert "engine.framework: unknown framework 'verll'" in lines[0]
    assert "did you mean 'verl'?" in lines[0]


def test_unsupported_instance_names_the_rule(cli, tmp_path, monkeypatch):
    never = R.Unsupported(
        "no-grpo", words="GRPO is not run", applies=lambda i: i.algorithm == "grpo", **WORDS
    )
    register(monkeypatch, never)
    code, printed, _ = cli(
        "solve", TINY, "--framework", "nemo-rl", "--time-limit", "5", "--out", tmp_path / "r"
    )
    assert code == 1
    assert "Test cannot run this instance: rule no-grpo: GRPO is not run" in printed
