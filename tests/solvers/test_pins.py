"""Every solver honours pins (``placement.pin``); pinned optima and pinned infeasibility.

The pinned plan space is the unpinned one narrowed (rpeg/pins.py), so the
exhaustive oracle's pinned optimum is never below the unpinned one, and a pin
that excludes the unpinned optimum moves it to a value derived below.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rlplan.outputs.report_md import render_report
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import plan_to_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.solvers import exhaustive, get_solver
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.test_exhaustive import KNOWN_OPTIMA

INSTANCES = Path(__file__).resolve().parents[2] / "instances"

#: Pin sets covering every kind of pin: a block (origin and extent, origin or
#: extent only), dp/tp, rollout concurrency, micro-batch size, recompute,
#: sharding, offload and staleness. Each costs time (the grpo set: 29.9849 s
#: against 29.0435 s with only its strategy and staleness pins, as actor.infer
#: and reference.infer must share GPU 1), so a solver ignoring a pin would
#: leave it.
PIN_SETS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo-block-tp-staleness": (
        "tiny_grpo_2gpu.yaml",
        {
            "actor.generate": {"tp": 1, "dp": 2, "concurrency": 16},
            "actor.infer": {"block": {"origin": [0, 0, 1], "extent": [1, 1, 1]}},
            "reference.infer": {"block": {"origin": [0, 0, 1]}},
            "staleness": {"actor": 0},
        },
    ),
    "dpo-v2-recompute-sharding-offload": (
        "tiny_dpo_2gpu_v2.yaml",
        {
            "actor.train": {"sharding": "zero1", "recompute": "full"},
            "actor.infer": {"micro_batch_size": 8},
            "reference.infer": {"offload": True, "block": {"extent": [1, 1, 2]}},
            "actor.generate": {"concurrency": 8},
        },
    ),
}

SOLVERS = ("greedy", "concurrent", "local", "exhaustive", "cpsat", "milp", "auto")


def document(name: str, pin: Any = None) -> dict[str, Any]:
    """``instances/<name>`` as a document, with ``placement.pin`` set to ``pin``."""
    data = copy.deepcopy(read_yaml_file(INSTANCES / name))
    if pin is not None:
        data.setdefault("placement", {})["pin"] = pin
    return data


def pinned(name: str, pin: Any) -> Problem:
    """The problem of ``instances/<name>`` under ``pin``."""
    return Problem.from_instance(parse_instance(document(name, pin), name))


def broken_pins(plan_document: dict[str, Any], pin: dict[str, Any]) -> list[str]:
    """Pinned fields the written plan does not have (read from the plan file, not the solver)."""
    broken = []
    for vertex, fields in pin.items():
        if vertex == "staleness":
            for model, steps in fields.items():
                if plan_document["staleness"][model] != steps:
                    broken.append(f"staleness.{model}")
            continue
        entry = plan_document["vertices"][vertex]
        for field, value in fields.items():
            if field == "block":
                for part, triple in value.items():
                    if entry["block"][part] != triple:
                        broken.append(f"{vertex}.block.{part}")
            elif entry[field] != value:
                broken.append(f"{vertex}.{field}")
    return broken


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("pin_set", sorted(PIN_SETS))
def test_every_solver_returns_a_plan_satisfying_every_pin(pin_set, solver):
    """Each backend finds a feasible plan whose file carries every pinned value."""
    name, pin = PIN_SETS[pin_set]
    problem = pinned(name, pin)
    result = get_solver(solver)(problem, SolveOptions(time_limit=20, seed=0))
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE), result.message
    assert broken_pins(plan_to_json(result.plan, problem.directory), pin) == []
    assert problem.simulator.simulate(result.plan).feasible


def test_the_check_catches_a_plan_breaking_a_pin():
    """The checker above is not vacuous: the unpinned optimum breaks the tp pin."""
    name, pin = PIN_SETS["grpo-block-tp-staleness"]
    free = pinned(name, None)
    result = exhaustive.solve(free, SolveOptions(time_limit=20))
    assert "actor.generate.tp" in broken_pins(plan_to_json(result.plan, free.directory), pin)


@pytest.mark.parametrize(
    ("name", "pin"),
    [
        ("tiny_grpo_2gpu.yaml", {"actor.generate": {"tp": 1}}),
        ("tiny_grpo_2gpu.yaml", {"staleness": {"actor": 1}}),
        ("tiny_grpo_2gpu.yaml", {"reward.infer": {"block": {"origin": [0, 0, 1]}}}),
        ("tiny_ppo_2gpu.yaml", {"critic.infer": {"dp": 1}}),
        ("tiny_ppo_2gpu.yaml", {"critic.train": {"tp": 1}}),
        ("tiny_dpo_2gpu_v2.yaml", {"actor.train": {"sharding": "zero1"}}),
        *[(name, pin) for name, pin in PIN_SETS.values()],
    ],
)
def test_pinned_optimum_is_never_below_the_unpinned_one(name, pin):
    """The oracle proves both optima; pins only narrow the plan space."""
    free = exhaustive.solve(pinned(name, None), SolveOptions(time_limit=30))
    fixed = exhaustive.solve(pinned(name, pin), SolveOptions(time_limit=30))
    assert free.status is Status.OPTIMAL and fixed.status is Status.OPTIMAL
    assert fixed.makespan >= free.makespan * (1 - 1e-12)


def test_pinning_the_rollout_to_tp_1_moves_the_optimum_by_the_rollout_difference():
    """tiny_grpo_2gpu, ``actor.generate: {tp: 1}``: 20.1092 s -> 29.5293 s over two steps.

    The unpinned optimum (tests/solvers/test_exhaustive.py) runs the rollout
    tp 2 on both GPUs (8.4142 s), then reward.infer, actor.infer beside
    reference.infer and actor.train tp 2, each step in turn, at staleness 1. The
    pin forces the rollout to dp 2 x tp 1 (12.9821 s: each replica decodes its 8
    sequences from full weights, twice the weight bytes per decode step of a
    tp 2 shard). Sharing the GPUs, the rollout also wakes and sleeps with twice
    the shard: 2 x 3_553_886_208 / 25e9 = 0.28431 s a run instead of
    2 x 1_776_943_104 / 25e9 = 0.14216 s. The rest of the plan stays: the other
    vertices gain nothing from the rollout's layout, and at staleness 1 no
    rollout of the two steps waits for weights. So the optimum grows by twice
    the rollout difference, wake and sleep included.
    """
    name = "tiny_grpo_2gpu.yaml"
    problem = pinned(name, {"actor.generate": {"tp": 1}})
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    directory = problem.directory
    rollout = directory.template.index("actor.generate")
    dp2 = directory.candidate(rollout, (1, 1, 2), Strategy(2, 1, 1, 1, concurrency=16))
    tp2 = directory.candidate(rollout, (1, 1, 2), Strategy(1, 1, 2, 1, concurrency=16))
    assert dp2.time == pytest.approx(12.9821, abs=1e-4)
    assert tp2.time == pytest.approx(8.4142, abs=1e-4)
    switch = 2 * (2 * 3_553_886_208 / 25e9 - 2 * 1_776_943_104 / 25e9)
    expected = KNOWN_OPTIMA[name] + 2 * (dp2.time - tp2.time) + switch
    assert result.makespan == pytest.approx(expected, rel=1e-9)
    assert result.makespan == pytest.approx(29.529291947667275, rel=1e-9)
    plan = plan_to_json(result.plan, directory)
    assert plan["staleness"] == {"actor": 1}
    assert (plan["vertices"]["actor.generate"]["dp"], plan["vertices"]["actor.generate"]["tp"]) == (
        2,
        1,
    )
    assert plan["vertices"]["actor.train"]["tp"] == 2


def _write(tmp_path: Path, name: str, pin: dict[str, Any]) -> Path:
    path = tmp_path / f"pinned_{name}"
    path.write_text(json.dumps(document(name, pin)), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["check", "solve"])
def test_a_pin_leaving_no_room_is_infeasible_with_the_reason(cli, tmp_path, command):
    """tiny_dpo_2gpu_v2 trains only with full recompute: pinning ``recompute: none`` exits 1.

    Its leanest strategy without recompute needs 15.32 GB per GPU of the
    usable 15.12 GB; the message names the pin and says the vertex fits
    without it.
    """
    path = _write(tmp_path, "tiny_dpo_2gpu_v2.yaml", {"actor.train": {"recompute": "none"}})
    argv = [command, path]
    if command == "solve":
        argv += ["--solver", "greedy", "--out", tmp_path / "run", "--quiet"]
    code, out, _ = cli(*argv)
    assert code == 1
    if command == "check":
        assert "pins         actor.train {recompute: none}" in out.splitlines()
    assert (
        "actor.train fits on no block under placement.pin.actor.train {recompute: none}: its "
        "leanest strategy needs 15.32 GB per GPU, 0.20 GB more than the usable 15.12 GB "
        "(without the pin it fits)"
    ) in out


def test_a_pin_no_strategy_matches_is_infeasible(cli, tmp_path):
    """tp 3 divides no block width: ``solve`` exits 1 naming the pin."""
    path = _write(tmp_path, "tiny_grpo_2gpu.yaml", {"actor.train": {"tp": 3}})
    code, out, _ = cli("solve", path, "--solver", "local", "--out", tmp_path / "run", "--quiet")
    assert code == 1
    assert (
        "actor.train has no strategy under placement.pin.actor.train {tp: 3}: no block and "
        "strategy of the plan space match it"
    ) in out
    text = (tmp_path / "run" / "result.json").read_text()
    result = json.loads(text, parse_constant=lambda name: pytest.fail(f"not strict JSON: {name}"))
    assert result["status"] == "INFEASIBLE"
    assert result["stats"]["unplaceable"] == {"actor.train": None}


def test_the_report_marks_pinned_fields():
    """report.md: a "pinned" column, daggers in the framework table, pinned staleness."""
    name, pin = PIN_SETS["grpo-block-tp-staleness"]
    problem = pinned(name, pin)
    result = exhaustive.solve(problem, SolveOptions(time_limit=20))
    trace = problem.simulator.simulate(result.plan)
    report = render_report(problem, result, trace)
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in report.splitlines()
        if " | origin [" in line  # the placement table
    }
    assert rows["actor.generate"].endswith("| concurrency, dp, tp |")
    assert rows["actor.infer"].endswith("| block |")
    assert rows["actor.train"].endswith("| — |")
    assert "- actor: 0 (pinned)" in report
    assert "† pinned in the instance (placement.pin)." in report
    assert "| actor.generate | GPUs 0-1 | 1 † | 1 | 2 † |" in report
    assert "| actor.infer | GPU 1 † |" in report
    free = pinned(name, None)
    free_result = exhaustive.solve(free, SolveOptions(time_limit=20))
    free_report = render_report(free, free_result, free.simulator.simulate(free_result.plan))
    assert "†" not in free_report and "(pinned)" not in free_report
