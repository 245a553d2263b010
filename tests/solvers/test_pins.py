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
#: extent only), dp/tp, the rollout's gpu_memory_utilization and max_num_seqs,
#: micro-batch size, recompute, sharding, offload and staleness. Each costs time
#: (the grpo set: 33.5962 s against 32.8327 s with only its strategy and staleness
#: pins, as actor.infer and reference.infer must share GPU 1 and reward.infer runs on
#: one GPU; its rollout, tp 1 and dp 1 at gpu_memory_utilization 0.2, is pp 2 on both
#: GPUs: on one GPU the engine would hold no KV pool), so a solver ignoring a pin would
#: leave it. The dpo set keeps the ZeRO-1 training offloaded: beside the rollout's
#: 4.8 GB its 12.36 GB of states would not fit the 15.12 GB of a GPU.
PIN_SETS: dict[str, tuple[str, dict[str, Any]]] = {
    "grpo-block-tp-staleness": (
        "tiny_grpo_2gpu.yaml",
        {
            "actor.generate": {
                "tp": 1,
                "dp": 1,
                "gpu_memory_utilization": 0.2,
                "max_num_seqs": 16,
            },
            "actor.infer": {"block": {"origin": [0, 0, 1], "extent": [1, 1, 1]}},
            "reference.infer": {"block": {"origin": [0, 0, 1]}},
            "reward.infer": {"block": {"extent": [1, 1, 1]}},
            "staleness": {"actor": 0},
        },
    ),
    "dpo-v2-recompute-sharding-offload": (
        "tiny_dpo_2gpu_v2.yaml",
        {
            "actor.train": {"sharding": "zero1", "recompute": "full", "offload": True},
            "actor.infer": {"micro_batch_size": 8},
            "reference.infer": {"offload": True, "block": {"extent": [1, 1, 2]}},
            "actor.generate": {"max_num_seqs": 8},
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
    """The oracle proves both optima; pins only narrow the plan space.

    The oracle minimises the score, so the score is what a pin cannot lower: pinning
    tiny_grpo_2gpu's actor to staleness 1 gives a faster makespan (20.2277 s against
    20.2312 s, the refit hidden) but a higher score (x 1.05, 21.2391 s).
    """
    free = exhaustive.solve(pinned(name, None), SolveOptions(time_limit=30))
    fixed = exhaustive.solve(pinned(name, pin), SolveOptions(time_limit=30))
    assert free.status is Status.OPTIMAL and fixed.status is Status.OPTIMAL
    assert fixed.score >= free.score * (1 - 1e-12)


def test_pinning_the_rollout_to_tp_1_moves_it_to_one_gpu():
    """tiny_grpo_2gpu, ``actor.generate: {tp: 1}``: 20.2312 s -> 30.4890 s over two steps.

    The unpinned optimum (tests/solvers/test_exhaustive.py) runs the rollout tp 2 at
    gpu_memory_utilization 0.2 on both GPUs (8.4142 s). At tp 1 a GPU holds all the
    weights (3.09 GB): 0.2 x 24 GB = 4.8 GB leaves no KV pool beside them and the 2 GB
    workspace, so the engine needs 0.3 (7.2 GB). Beside actor.train's ZeRO-1 states
    (14.22 GB on both GPUs) that fits on GPU 0 (with reward.infer's 0.99 GB: 22.41 GB)
    but not on GPU 1, which holds reference.infer's 3.55 GB (24.97 GB > 22.8): the
    rollout runs dp 1 on GPU 0 alone (13.4622 s). It shares GPU 0 with reward.infer and
    actor.train, so each of its runs wakes and sleeps its whole weights:
    w = s = 3_553_886_208 / 25e9 = 0.1422 s. Staleness moves to 1, so the second
    rollout follows the first (and reward.infer, r, on GPU 0) without waiting for
    actor.train; then actor.train (T), reference.infer and actor.infer in turn on GPU 1
    (I each), the transfer d of actor.infer's log-probs to actor.train's block, and the
    last actor.train: (w + G + s) + r + (w + G + s) + T + 2 I + d + T.
    """
    name = "tiny_grpo_2gpu.yaml"
    # Without the off-policy penalty: staleness 1 saves 0.47 % here (the rollout no longer
    # waits for actor.train and its 0.1422 s weight copy to GPU 0), so under the default
    # penalty the best on-policy plan, 30.6316 s, would win instead.
    problem = pinned(name, {"actor.generate": {"tp": 1}}).without_stale_penalty()
    result = exhaustive.solve(problem, SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    directory = problem.directory
    rollout = directory.template.index("actor.generate")
    refused = directory.candidate(
        rollout, (1, 1, 1), Strategy(1, 1, 1, 1, gpu_memory_utilization=0.2, max_num_seqs=16)
    )
    assert not refused.starts
    times = {
        name: directory.candidate(directory.template.index(name), p.block.extent, p.strategy).time
        for name, p in zip(directory.template.names, result.plan.placements, strict=True)
    }
    assert times["actor.generate"] == pytest.approx(13.4622, abs=1e-4)
    g, r, t = times["actor.generate"], times["reward.infer"], times["actor.train"]
    assert times["actor.infer"] == pytest.approx(times["reference.infer"], rel=1e-12)
    d = directory.cost.data_lag(False, "g")
    wake, sleep = problem.simulator.switch(rollout, result.plan.placements[rollout].strategy)
    assert wake == sleep == pytest.approx(3_553_886_208 / 25e9, rel=1e-12)
    expected = 2 * (wake + g + sleep) + r + 2 * t + 2 * times["actor.infer"] + d
    assert result.makespan == pytest.approx(expected, rel=1e-9)
    assert result.makespan == pytest.approx(30.489048209758167, rel=1e-9)
    assert result.makespan > KNOWN_OPTIMA[name] + 10.2  # 20.2312 s unpinned
    plan = plan_to_json(result.plan, directory)
    assert plan["staleness"] == {"actor": 1}
    generate = plan["vertices"]["actor.generate"]
    assert (generate["dp"], generate["tp"], generate["gpu_memory_utilization"]) == (1, 1, 0.3)
    assert generate["block"] == {"origin": [0, 0, 0], "extent": [1, 1, 1]}
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
    assert rows["actor.generate"].endswith("| dp, gpu_memory_utilization, max_num_seqs, tp |")
    assert rows["actor.infer"].endswith("| block |")
    assert rows["actor.train"].endswith("| — |")
    assert "- actor: 0 (pinned)" in report
    assert "† pinned in the instance (placement.pin)." in report
    assert "| actor.generate | GPUs 0-1 | 1 † | 2 | 1 † |" in report
    assert "| 0.2 † | 16 † |" in report
    assert "| actor.infer | GPU 1 † |" in report
    free = pinned(name, None)
    free_result = exhaustive.solve(free, SolveOptions(time_limit=20))
    free_report = render_report(free, free_result, free.simulator.simulate(free_result.plan))
    assert "†" not in free_report and "(pinned)" not in free_report
