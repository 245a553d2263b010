"""One rule per solve option, whichever source gives it (rpeg.schema.solver_options).

The instance file (``solver.gap``), the Python API (``rlplan.solve(gap=...)``)
and the command line (``--gap``) accept and refuse the same values, and the
error names the option as the source the bad value came from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import rlplan
from rlplan.cli import app as main
from rlplan.rpeg.errors import InputError, InstanceError
from rlplan.rpeg.schema.instance import SolverConfig, parse_instance
from rlplan.rpeg.schema.solver_options import API, COMMAND_LINE, INSTANCE, OPTION_RULES
from rlplan.rpeg.schema.yamlio import loads
from rlplan.solvers.options import solve_request

REPO = Path(__file__).resolve().parent.parent
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"

#: (option, a value outside its rule): the same values are refused from every source.
BAD = [
    ("time_limit", 0),
    ("time_limit", -1),
    ("time_limit", 1e-4),
    ("time_limit", 7 * 24 * 3600 + 1),
    ("time_limit", float("nan")),
    ("time_limit", float("inf")),
    ("threads", 0),
    ("threads", 1025),
    ("threads", 10**30),
    ("seed", -1),
    ("seed", 2**31),
    ("gap", -0.1),
    ("gap", 1.5),
    ("gap", 100),
    ("gap", float("nan")),
]
#: (option, a value at an end of its range): accepted from every source.
EDGES = [
    ("time_limit", 1e-3),
    ("time_limit", 7 * 24 * 3600),
    ("threads", 1),
    ("threads", 1024),
    ("seed", 0),
    ("seed", 2**31 - 1),
    ("gap", 0.0),
    ("gap", 1.0),
]
#: Values only a file or the API can give (argparse refuses them before any rule).
BAD_TYPES = [("threads", 1.5), ("seed", 2.5), ("gap", "0.1"), ("time_limit", True)]


def tiny_with(name: str, value: Any) -> dict[str, Any]:
    document = loads(TINY_PPO.read_text(encoding="utf-8"))
    document["solver"][name] = value
    return document


@pytest.mark.parametrize(("name", "value"), BAD + BAD_TYPES)
def test_the_instance_file_refuses_naming_the_solver_key(name, value):
    with pytest.raises(InstanceError) as caught:
        parse_instance(tiny_with(name, value), "fuzzed")
    assert caught.value.path == f"solver.{name}"
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("name", "value"), BAD + BAD_TYPES)
def test_the_api_refuses_naming_the_argument(name, value):
    with pytest.raises(InputError) as caught:
        rlplan.solve(TINY_PPO, "greedy", **{name: value})
    assert caught.value.path == name
    assert not isinstance(caught.value, InstanceError)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("name", "value"), BAD)
def test_the_command_line_refuses_naming_the_flag(tmp_path, capsys, name, value):
    flag = OPTION_RULES[name].flag
    out = tmp_path / "run"
    code = main.main(["solve", str(TINY_PPO), flag, str(value), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {flag}: ") and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_file_value_is_blamed_on_the_file_not_the_flag(tmp_path, capsys, name, value):
    """Once ``--gap`` was blamed for a ``solver.gap`` of 1.5 the flag never had."""
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(tiny_with(name, value)), encoding="utf-8")
    out = tmp_path / "run"
    code = main.main(["solve", str(path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: solver.{name}: ") and len(err.strip().splitlines()) == 1
    assert OPTION_RULES[name].flag not in err
    assert not out.exists()


@pytest.mark.parametrize(("name", "value"), EDGES)
def test_every_source_accepts_the_ends_of_the_range(name, value):
    config = parse_instance(tiny_with(name, value), "edge").solver
    assert getattr(config, name) == value
    for source in (API, COMMAND_LINE):
        request = solve_request(SolverConfig(), {name: value}, source)
        assert getattr(request.options, name) == value
    assert OPTION_RULES[name].check(value, COMMAND_LINE) == value


def test_given_values_override_the_file_and_the_rest_come_from_it():
    defaults = SolverConfig(backend="greedy", time_limit=5.0, threads=3, seed=7, gap=0.25)
    request = solve_request(defaults, {"seed": 11, "gap": None}, API)
    options = request.options
    assert request.backend == "greedy"
    assert (options.time_limit, options.threads, options.seed, options.gap) == (5.0, 3, 11, 0.25)
    assert isinstance(options.threads, int) and isinstance(options.time_limit, float)


def test_whole_number_floats_are_integers():
    assert solve_request(SolverConfig(), {"threads": 4.0}, API).options.threads == 4
    assert parse_instance(tiny_with("seed", 3.0), "whole").solver.seed == 3


@pytest.mark.parametrize(
    ("source", "named"), [(INSTANCE, "solver.backend"), (API, "solver"), (COMMAND_LINE, "--solver")]
)
def test_an_unknown_backend_is_named_as_its_source_names_it(source, named):
    if source == INSTANCE:
        defaults, given, asked = SolverConfig(backend="nope"), {}, API
    else:
        defaults, given, asked = SolverConfig(), {"backend": "nope"}, source
    with pytest.raises(InputError) as caught:
        solve_request(defaults, given, asked)
    assert caught.value.path == named
    assert "unknown solver 'nope'" in caught.value.message


def test_an_unknown_backend_in_the_file_is_blamed_on_the_file(tmp_path, capsys):
    document = loads(TINY_PPO.read_text(encoding="utf-8"))
    document["solver"]["backend"] = "nope"
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main.main(["solve", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("error: solver.backend: unknown solver 'nope'")
    with pytest.raises(InputError) as caught:
        rlplan.solve(path, None)
    assert caught.value.path == "solver.backend"


def test_a_gap_of_one_accepts_the_first_plan_from_every_source(tmp_path, capsys):
    """Gap (score - bound) / score <= 1 for any plan: 1 is 'any feasible plan', not an error."""
    out = tmp_path / "run"
    argv = ["solve", str(TINY_PPO), "--solver", "greedy", "--gap", "1", "--out", str(out)]
    assert main.main([*argv, "--quiet"]) == 0
    assert json.loads((out / "result.json").read_text(encoding="utf-8"))["requested_gap"] == 1.0
    assert rlplan.solve(TINY_PPO, "greedy", gap=1).requested_gap == 1.0
    assert rlplan.solve(tiny_with("gap", 1), "greedy").requested_gap == 1.0
