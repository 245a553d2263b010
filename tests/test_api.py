"""The Python API (rlplan.solve, rlplan.simulate, rlplan.load) and the README example.

Known answer: the exhaustive oracle's optimum of tiny_ppo_2gpu, a makespan of
20.431026369275497 s over k_eval = 2 steps (tests/solvers/test_exhaustive.py): the
rollout on both GPUs at tp 2, gpu_memory_utilization 0.2 and max_num_seqs 16, waking
and sleeping 25.20 ms each way around each run (it shares its GPUs), every model on
policy (staleness 1 would hide the 1.25 ms refit, but scores x 1.05).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

import rlplan
from rlplan.rpeg.errors import InputError, InstanceError, PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.schema.yamlio import loads
from rlplan.solvers.result import Result as SolverResult
from rlplan.solvers.result import Status

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"
TINY_GRPO = REPO / "instances" / "tiny_grpo_2gpu.yaml"
OPTIMAL_STEP = 20.431026369275497 / 2
PPO_VERTICES = [
    "actor.generate",
    "reference.infer",
    "reward.infer",
    "critic.infer",
    "actor.train",
    "critic.train",
]


def readme_block(heading: str, language: str) -> str:
    """The first ```language block after the README heading ``## heading``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    match = re.search(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)
    assert match, f"no ```{language} block under ## {heading}"
    return match.group(1)


def test_readme_python_example_runs(monkeypatch, capsys):
    """Exactly the README's snippet, run from the repository root."""
    code = readme_block("Python API", "python")
    monkeypatch.chdir(REPO)
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(code, str(README), "exec"), namespace)
    result, trace, quick = namespace["result"], namespace["trace"], namespace["quick"]
    assert result.status is Status.OPTIMAL
    assert result.step_time == pytest.approx(OPTIMAL_STEP, rel=1e-12)
    assert trace.step_time == result.step_time
    assert list(result.placements) == PPO_VERTICES
    assert quick.plan is not None
    assert sorted(quick.placements) == [
        "actor.generate",
        "actor.infer",
        "actor.train",
        "reference.infer",
    ]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("OPTIMAL ")
    assert printed[-1].endswith(
        " ['actor.generate', 'actor.infer', 'actor.train', 'reference.infer']"
    )


@pytest.fixture(scope="module")
def problem() -> Problem:
    return rlplan.load(TINY_PPO)


@pytest.fixture(scope="module")
def exhaustive(problem) -> rlplan.Result:
    return rlplan.solve(problem, solver="exhaustive", time_limit=60)


def tiny_ppo_dict() -> dict[str, Any]:
    return loads(TINY_PPO.read_text(encoding="utf-8"))


def test_solve_returns_the_known_optimum_keyed_by_vertex_name(exhaustive):
    assert isinstance(exhaustive, SolverResult)
    assert exhaustive.status is Status.OPTIMAL
    assert exhaustive.step_time == pytest.approx(OPTIMAL_STEP, rel=1e-12)
    assert list(exhaustive.placements) == PPO_VERTICES
    assert exhaustive.placements["actor.generate"] == {
        "block": {"origin": [0, 0, 0], "extent": [1, 1, 2]},
        "dp": 1,
        "pp": 1,
        "tp": 2,
        "gpu_memory_utilization": 0.2,
        "max_num_seqs": 16,
    }
    # on policy: staleness 1 would hide the rollout's 1.25 ms refit but score x 1.05
    # (tests/solvers/test_exhaustive.py)
    assert exhaustive.staleness == {"actor": 0, "critic": 0}
    assert exhaustive.plan_document["instance"]["name"] == "tiny_ppo_2gpu"
    assert exhaustive.trace.makespan == exhaustive.makespan
    # the backend's attributes are all still there
    document = exhaustive.to_json()
    assert document["status"] == "OPTIMAL"
    assert document["solver"] == "exhaustive"
    assert "plan_document" not in document


@pytest.mark.parametrize("kind", ["path", "str", "dict", "instance"])
def test_solve_accepts_every_instance_form(kind, exhaustive):
    given = {
        "path": TINY_PPO,
        "str": str(TINY_PPO),
        "dict": tiny_ppo_dict(),
        "instance": load_instance(TINY_PPO),
    }[kind]
    result = rlplan.solve(given, "exhaustive", time_limit=60)
    assert result.step_time == pytest.approx(OPTIMAL_STEP, rel=1e-12)
    assert result.placements == exhaustive.placements


def test_simulate_accepts_every_plan_form(tmp_path, problem, exhaustive):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(exhaustive.plan_document), encoding="utf-8")
    for plan in (path, str(path), exhaustive.plan_document, exhaustive.plan, exhaustive):
        for instance in (TINY_PPO, problem):
            trace = rlplan.simulate(instance, plan)
            assert trace.makespan == pytest.approx(2 * OPTIMAL_STEP, rel=1e-12)
            assert trace.step_time == exhaustive.step_time


def test_simulate_refuses_a_plan_of_another_instance(exhaustive):
    with pytest.raises(PlanError, match=r"plan\.instance: this plan was made for instance"):
        rlplan.simulate(TINY_GRPO, exhaustive.plan_document)
    with pytest.raises(PlanError, match="plan: has 6 placements"):
        rlplan.simulate(TINY_GRPO, exhaustive.plan)


def test_simulate_refuses_a_result_without_plan():
    empty = SolverResult(Status.INFEASIBLE, "cpsat")
    with pytest.raises(PlanError, match=r"plan: the result has no plan \(status INFEASIBLE\)"):
        rlplan.simulate(TINY_PPO, empty)


@pytest.mark.parametrize(
    ("call", "field", "message"),
    [
        (lambda: rlplan.solve(5), "instance", "must be a path, a mapping"),
        (lambda: rlplan.solve(TINY_PPO, "nope"), "solver", "unknown solver 'nope'"),
        (lambda: rlplan.solve(TINY_PPO, time_limit=0), "time_limit", "must be a number > 0"),
        (lambda: rlplan.solve(TINY_PPO, threads=0), "threads", "must be an integer > 0"),
        (lambda: rlplan.solve(TINY_PPO, threads=1.5), "threads", "must be an integer > 0"),
        (lambda: rlplan.solve(TINY_PPO, seed=-1), "seed", "must be an integer >= 0"),
        (lambda: rlplan.solve(TINY_PPO, gap=float("nan")), "gap", "must be a number >= 0"),
        (lambda: rlplan.simulate(TINY_PPO, 3.5), "plan", "must be a path, a plan document"),
    ],
)
def test_bad_arguments_raise_input_error(call, field, message):
    with pytest.raises(InputError) as caught:
        call()
    assert caught.value.path == field
    assert message in caught.value.message
    assert "\n" not in str(caught.value)


def test_bad_instances_raise_instance_error(tmp_path):
    with pytest.raises(InstanceError, match="no such file"):
        rlplan.solve(tmp_path / "missing.yaml")
    data = tiny_ppo_dict()
    data["models"]["actor"]["layers"] = -3
    with pytest.raises(InstanceError) as caught:
        rlplan.solve(data, "greedy")
    assert str(caught.value) == "models.actor.layers: must be a positive integer, got -3"


def test_dict_instance_hf_config_is_relative_to_the_current_folder(monkeypatch):
    data = tiny_ppo_dict()
    data["models"]["reward"] = {"hf_config": "tests/data/hf/qwen3-8b/config.json", "layers": 2}
    monkeypatch.chdir(REPO)
    problem = rlplan.load(data, name="with_config")
    assert problem.instance.name == "with_config"
    assert problem.instance.models["reward"].hidden_dim == 4096
    assert problem.instance.models["reward"].layers == 2


def test_ignored_input_is_a_warning():
    data = copy.deepcopy(tiny_ppo_dict())
    data["logging"] = {"level": "info"}
    with pytest.warns(UserWarning, match="unknown section 'logging' ignored"):
        rlplan.load(data)
