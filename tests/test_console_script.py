"""The ``rlplan`` command: console script, ``--version``, one ``main`` behind both entry points,
and the README walkthrough (Hugging Face config + GPU name -> plan -> verl settings).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rlplan
from rlplan import cli
from rlplan.cli import app as main
from rlplan.rpeg.schema.hardware import parse_hardware
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.schema.model_presets import MODEL_PRESETS
from rlplan.rpeg.schema.models import ModelSpec

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]


def test_pyproject_declares_the_console_script_and_the_package():
    assert PYPROJECT["project"]["scripts"]["rlplan"] == "rlplan.cli:main"
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == ["rlplan*"]


def test_every_source_folder_is_a_package_the_wheel_carries():
    """``pip install .`` copies only folders with an ``__init__.py``: a subpackage without
    one would import in a clone (namespace package) and be missing once installed."""
    folders = {p.parent for p in (REPO / "rlplan").rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []
    for top in REPO.iterdir():
        if top.is_dir() and (top / "__init__.py").exists():
            assert top.name in {"rlplan", "tests", "benchmarks"}, top.name


def test_version_is_the_package_version(capsys):
    assert rlplan.__version__ == VERSION
    for run in (lambda: main.main(["--version"]), lambda: cli.main(["--version"])):
        with pytest.raises(SystemExit) as caught:
            run()
        assert caught.value.code == 0
        assert capsys.readouterr().out == f"rlplan {VERSION}\n"


def test_both_entry_points_run_the_same_main(capsys):
    """Same subcommands and output; only the program name in usage lines differs."""
    assert cli.main(["check", str(TINY_PPO)]) == 0
    from_cli = capsys.readouterr().out
    assert main.main(["check", str(TINY_PPO)]) == 0
    assert capsys.readouterr().out == from_cli
    assert from_cli.startswith("instance     tiny_ppo_2gpu: ppo, k_eval 2\n")
    with pytest.raises(SystemExit) as caught:
        cli.main(["nope"])
    assert caught.value.code == 2
    assert capsys.readouterr().err.startswith("usage: rlplan ")
    parser = main.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert {"check", "baseline", "simulate", "solve", "export", "compare"} <= set(commands)
    assert cli.main(["check", str(REPO / "missing.yaml")]) == 2


def test_python_dash_m_rlplan():
    completed = subprocess.run(
        [sys.executable, "-m", "rlplan", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert (completed.returncode, completed.stdout) == (0, f"rlplan {VERSION}\n")


def installed_script() -> str | None:
    """The ``rlplan`` script next to this Python (pip install -e . puts it there)."""
    candidate = Path(sys.executable).parent / "rlplan"
    return str(candidate) if candidate.exists() else shutil.which("rlplan")


@pytest.mark.skipif(installed_script() is None, reason="rlplan not installed (pip install -e .)")
def test_installed_console_script(tmp_path):
    """Run from another folder: the script finds the installed package, not the checkout."""
    script = installed_script()
    env = {**os.environ, "PYTHONPATH": ""}
    version = subprocess.run(
        [script, "--version"], capture_output=True, text=True, cwd=tmp_path, env=env, check=False
    )
    assert (version.returncode, version.stdout) == (0, f"rlplan {VERSION}\n")
    bad = subprocess.run(
        [script, "check", "missing.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == ["error: missing.yaml: no such file"]


# -- the README walkthrough ------------------------------------------------------------

WALKTHROUGH = "From a Hugging Face config and a GPU name to a verl command line"


def walkthrough() -> tuple[str, str, list[str]]:
    """(instance file name, its YAML text, the commands) of the README walkthrough."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {WALKTHROUGH}\n")
    section = text[start : text.find("\n## ", start + 1)]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert block, "no ```sh block in the walkthrough"
    heredoc = re.match(r"cat > (\S+) <<'EOF'\n(.*?)\nEOF\n(.*)", block.group(1), flags=re.DOTALL)
    assert heredoc, "the walkthrough starts by writing the instance with a heredoc"
    name, yaml_text, rest = heredoc.groups()
    commands = [f"cat > {name} <<'EOF'"] + [line for line in rest.splitlines() if line.strip()]
    return name, yaml_text, commands


def test_walkthrough_is_three_commands_ending_in_verl_settings():
    name, _, commands = walkthrough()
    assert len(commands) == 3
    assert commands[1].startswith(f"rlplan solve {name} ")
    out = shlex.split(commands[1])[shlex.split(commands[1]).index("--out") + 1]
    assert shlex.split(commands[2]) == [
        "rlplan",
        "export-config",
        f"{out}/plan.json",
        "--framework",
        "verl",
    ]


def test_walkthrough_instance_and_solve(tmp_path, monkeypatch):
    """Commands 1 and 2 as written (the solve cut to the greedy baseline to stay light).

    The instance names a GPU preset and a config.json (here the shipped copy
    of Qwen/Qwen3-8B's); it must parse to the datasheet H100 and the Qwen3-8B
    shape, and ``rlplan solve`` must write the plan and the Perfetto trace.
    """
    name, yaml_text, commands = walkthrough()
    monkeypatch.chdir(tmp_path)
    Path(name).write_text(yaml_text + "\n", encoding="utf-8")
    config = re.search(r"hf_config: ([^}\s]+)", yaml_text).group(1)
    Path(config).parent.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "data" / "hf" / "qwen3-8b" / "config.json", config)

    instance = load_instance(name)
    assert instance.hardware == parse_hardware(
        {"preset": "h100-sxm-80g", "racks": 1, "nodes_per_rack": 2, "gpus_per_node": 8}
    )
    assert instance.models["actor"] == ModelSpec(**MODEL_PRESETS["qwen3-8b"].fields())

    argv = [*shlex.split(commands[1])[1:], "--solver", "greedy", "--time-limit", "10", "--quiet"]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert cli.main(argv) == 0
    out = Path(argv[argv.index("--out") + 1])
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["instance"]["name"] == name.removesuffix(".yaml")
    assert (out / "trace.perfetto.json").is_file()
    assert "trace.perfetto.json" in stdout.getvalue()

    # The plan records the instance's name and fingerprint: export-config finds
    # qwen3_8b_grpo.yaml in the working folder without --instance.
    export = shlex.split(commands[2])[1:]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert cli.main(export) == 0
    assert "tensor_model_parallel_size" in stdout.getvalue()
