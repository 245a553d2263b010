"""Plans know their instance (docs/plan-space.md): the fingerprint in plan.json."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Plan, plan_from_json, plan_to_json, read_plan
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import load_instance, parse_instance
from rlplan.rpeg.schema.yamlio import loads
from rlplan.rpeg.search.baselines import greedy_plan

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
TINY_PPO = INSTANCES / "tiny_ppo_2gpu.yaml"
TINY_PPO_SYNC = INSTANCES / "tiny_ppo_2gpu_sync.yaml"


def tiny_ppo_data() -> dict[str, Any]:
    """The parsed YAML document of tiny_ppo_2gpu."""
    return loads(TINY_PPO.read_text(encoding="utf-8"))


def fingerprint_of(data: dict[str, Any], name: str = "tiny_ppo_2gpu") -> str:
    return instance_fingerprint(parse_instance(data, name=name))


def problem_plan(problem: Problem) -> Plan:
    """The greedy baseline plan of ``problem``."""
    plan = greedy_plan(problem.directory, problem.simulator)
    assert plan is not None
    return plan


def test_fingerprint_ignores_layout_comments_name_solver_and_search_knobs():
    """Re-dumped without comments, keys reordered, numbers respelt, name/solver/e_max changed."""
    original = instance_fingerprint(load_instance(TINY_PPO))
    data = tiny_ppo_data()
    reordered = dict(reversed(list(data.items())))
    reordered["hardware"] = dict(reversed(list(data["hardware"].items())))
    reordered["hardware"]["memory_per_gpu"] = 24_000_000_000  # was 24e9
    reordered["solver"] = {"backend": "local", "time_limit": 3, "seed": 7}
    reordered.setdefault("optimizer", {})["e_max"] = 17
    text = "# another comment\n" + yaml.safe_dump(reordered, sort_keys=False, indent=4)
    assert fingerprint_of(loads(text), name="renamed") == original


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("hardware", "memory_per_gpu", 12e9),
        ("workload", "batch_size", 4),
        ("optimizer", "k_eval", 3),
        ("engine", "sequence_packing", False),
        ("placement", "max_num_seqs", [8]),
        ("placement", "gpu_memory_utilization", [0.5]),
        ("models", "reward", {"layers": 12, "hidden_dim": 896, "ffn_dim": 4864, "vocab_size": 256}),
    ],
)
def test_fingerprint_changes_with_plan_relevant_content(section, key, value):
    """Hardware, workload, k_eval, engine, placement and models all enter the fingerprint."""
    data = tiny_ppo_data()
    changed = copy.deepcopy(data)
    changed.setdefault(section, {})[key] = value
    assert fingerprint_of(changed) != fingerprint_of(data)


def test_plan_json_records_the_fingerprint_and_reads_back():
    problem = Problem.load(TINY_PPO)
    plan = problem_plan(problem)
    document = json.loads(json.dumps(plan_to_json(plan, problem.directory)))
    assert document["instance"] == {
        "name": "tiny_ppo_2gpu",
        "fingerprint": instance_fingerprint(problem.instance),
    }
    assert plan_from_json(document, problem.directory) == plan


def test_plan_from_another_instance_is_refused_naming_both():
    """tiny_ppo_2gpu's plan fits tiny_ppo_2gpu_sync's plan space but was not made for it."""
    source, target = Problem.load(TINY_PPO), Problem.load(TINY_PPO_SYNC)
    document = plan_to_json(problem_plan(source), source.directory)
    with pytest.raises(PlanError) as caught:
        plan_from_json(document, target.directory)
    assert caught.value.path == "plan.instance"
    assert "'tiny_ppo_2gpu'" in caught.value.message
    assert "'tiny_ppo_2gpu_sync'" in caught.value.message
    # without the entry (a hand-written plan) the same placements load, with a
    # staleness among the target's candidates (tiny_ppo_2gpu_sync allows only 0)
    del document["instance"]
    document["staleness"] = dict.fromkeys(document["staleness"], 0)
    assert plan_from_json(document, target.directory) is not None


def test_published_plans_without_fingerprint_still_load():
    for plan_path in sorted((INSTANCES / "published").glob("*.plan.json")):
        assert "instance" not in json.loads(plan_path.read_text())
        problem = Problem.load(str(plan_path).replace(".plan.json", ".yaml"))
        assert read_plan(plan_path, problem.directory) is not None


@pytest.mark.parametrize(
    "entry",
    [
        "sha256:0",
        {"name": "x"},
        {"fingerprint": 5},
        {"fingerprint": "sha256:0", "nmae": "x"},
    ],
)
def test_malformed_instance_entry_is_refused(entry):
    problem = Problem.load(TINY_PPO)
    document = plan_to_json(problem_plan(problem), problem.directory)
    document["instance"] = entry
    with pytest.raises(PlanError) as caught:
        plan_from_json(document, problem.directory)
    assert caught.value.path.startswith("plan.instance")


def test_simulate_plan_of_an_edited_instance_exits_2_in_one_line(cli, tmp_path):
    """An eighth of the memory: without the fingerprint the plan is judged on the smaller
    GPUs and is infeasible (exit 1): its rollout engine would not start."""
    out = tmp_path / "run"
    assert cli("baseline", TINY_PPO, "--out", out)[0] == 0
    data = tiny_ppo_data()
    data["hardware"]["memory_per_gpu"] = 3e9
    edited = tmp_path / "tiny_ppo_2gpu.yaml"
    edited.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, stdout, stderr = cli("simulate", edited, out / "plan.json")
    assert code == 2
    assert stdout == ""
    lines = stderr.splitlines()
    assert len(lines) == 1
    assert "plan.instance" in lines[0] and "another version of 'tiny_ppo_2gpu'" in lines[0]
    # the same plan without its fingerprint is checked on the 3 GB GPUs: its rollout's
    # 0.2 x 3e9 = 0.6 GB holds not even the weights and workspace
    plan = json.loads((out / "plan.json").read_text())
    del plan["instance"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(plan))
    code, stdout, _ = cli("simulate", edited, bare)
    assert code == 1
    assert stdout.startswith("INFEASIBLE: plan.vertices.actor.generate: the rollout engine")


def test_simulate_result_json_says_pass_plan_json(cli, tmp_path):
    out = tmp_path / "run"
    assert cli("solve", TINY_PPO, "--solver", "greedy", "--out", out, "--quiet")[0] == 0
    code, stdout, stderr = cli("simulate", TINY_PPO, out / "result.json")
    assert code == 2
    assert stdout == ""
    assert stderr.splitlines() == [
        "error: plan: this is a result.json; pass the plan.json written next to it instead"
    ]
