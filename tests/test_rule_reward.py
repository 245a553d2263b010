"""Rule-based rewards: a CPU stage carried as a fixed delay on data edges (docs/templates.md).

``instances/tiny_rule_grpo_2gpu.yaml`` is tiny_grpo_2gpu with its reward model
replaced by ``{kind: rule, seconds_per_sample: 0.25, workers: 4}`` and
on-policy training only (staleness 0). Its figures, read off the candidate
directory (the cost model's own tests check them):

* G = 8.414196 s: the rollout, tp 2 on both GPUs at gpu_memory_utilization 0.2
  (the fastest; every listed utilisation gives the same time, since all 16
  sequences fit);
* W = 1_776_943_104 / 25e9 = 0.071078 s: the rollout's wake and, as long, its
  sleep: it shares both GPUs, so each run loads its weight shard 2P/tp from the
  host before it and puts it back after it (docs/cost-model.md#colocation);
* I = 0.500632 s: actor.infer alone on GPU 0;
* R = 0.325061 s: reference.infer pp 2 on both GPUs. Alone on GPU 1 (0.500632 s)
  its weights would bring GPU 1 to 22.57 GB beside actor.train's states and the
  engine's share, above the 21.73 GB usable (24 GB less the 5 % reserve and its
  default fixed 1 GiB);
* T = 0.937983 s: actor.train, tp 2 on both GPUs (the fastest train that fits
  beside the engine's 0.2 x 24 GB: dp 2 would hold the whole model's weights
  and gradients on each GPU and overflows it);
* C = 1_776_943_104 / (1.008e12 / 2) = 3.5257e-3 s: the refit actor.train (tp 2)
  -> actor.generate (tp 2), a device copy on the same block in the same layout,
  which the next rollout waits for at staleness 0;
* X = 1.193216e-05 s: a data lag between the two-GPU block and a one-GPU block.

The rule stage: D = ceil(B*K / w) * t = ceil(4*4 / 4) * 0.25 = 4 * 0.25 = 1.0 s.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import yaml

from rlplan.formulation import build_formulation
from rlplan.formulation import rows as formulation_rows
from rlplan.formulation.schedule import earliest_ends
from rlplan.outputs.gantt import CPU_LABEL, CPU_ROW, gantt_figure
from rlplan.outputs.perfetto import perfetto_trace
from rlplan.rpeg.errors import InstanceError, PlanError
from rlplan.rpeg.evaluation.bounds import lower_bounds
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import plan_from_json
from rlplan.rpeg.schema.fingerprint import instance_fingerprint
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.models import RuleReward
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.rpeg.templates import RULE_STAGE, _without_reward, build_template
from rlplan.solvers import SolveOptions, solve
from rlplan.solvers.result import Status

ROOT = Path(__file__).resolve().parent.parent
RULE = ROOT / "instances" / "tiny_rule_grpo_2gpu.yaml"
TINY_GRPO = ROOT / "instances" / "tiny_grpo_2gpu.yaml"

G, I, R, T, X = 8.414196, 0.500632, 0.325061, 0.937983, 1.193216e-05  # noqa: E741
W = 1_776_943_104 / 25e9
C = 1_776_943_104 / (1.008e12 / 2)
D = 1.0
#: The optimum of tiny_rule_grpo_2gpu. With staleness 0 every step is the chain
#: rollout (with its wake and sleep) -> (rule stage) -> train -> refit -> next
#: rollout, and D = 1.0 s outlasts R + I + X = 0.8257 s, the GPU work the stage
#: overlaps (reference.infer on both GPUs, then actor.infer on GPU 0). So any plan
#: takes at least k (W + G + W + D + T) + C with k = 2 and T the fastest train that
#: fits, which shares the rollout's block and layout:
#: 2 (0.071078 + 8.414196 + 0.071078 + 1.0 + 0.937983) + 0.003526 = 20.992194 s.
#: The hand plan attains it.
OPTIMUM = 2 * (W + G + W + D + T) + C
BOTH = {"origin": [0, 0, 0], "extent": [1, 1, 2]}
ONE_0 = {"origin": [0, 0, 0], "extent": [1, 1, 1]}
#: The optimal plan: rollout, reference.infer and train on both GPUs, actor.infer on one.
HAND_PLAN = {
    "staleness": {"actor": 0},
    "vertices": {
        "actor.generate": {
            "block": BOTH,
            "dp": 1,
            "pp": 1,
            "tp": 2,
            "gpu_memory_utilization": 0.2,
            "max_num_seqs": 16,
        },
        "actor.infer": {"block": ONE_0, "dp": 1, "pp": 1, "tp": 1, "microbatches": 8},
        "reference.infer": {"block": BOTH, "dp": 1, "pp": 2, "tp": 1, "microbatches": 8},
        "actor.train": {"block": BOTH, "dp": 1, "pp": 1, "tp": 2, "microbatches": 8},
    },
}


def _document(**reward) -> dict:
    """tiny_rule_grpo_2gpu's document with ``models.reward`` replaced."""
    document = read_yaml_file(str(RULE))
    document["models"]["reward"] = reward
    return document


def _problem(**reward) -> Problem:
    return Problem.from_instance(parse_instance(_document(**reward), "rule"))


# ----------------------------------------------------------------------------
# The stage's time
# ----------------------------------------------------------------------------


def test_stage_time_is_the_largest_chunk_times_the_time_per_sample():
    """ceil(B*K / w) * t, with the samples split into w chunks."""
    assert RuleReward(0.25, 4).stage_seconds(16) == 1.0  # 4 per worker x 0.25 s
    assert RuleReward(0.25, 3).stage_seconds(16) == 1.5  # chunks of 6, 5, 5: 6 x 0.25 s
    assert RuleReward(0.1, 32).stage_seconds(16) == pytest.approx(0.1)  # one sample each
    assert RuleReward(0.002).stage_seconds(8192) == pytest.approx(16.384)  # one worker
    assert RuleReward(0.0, 1).stage_seconds(16) == 0.0
    instance = Problem.load(str(RULE)).instance
    assert instance.reward_rule == RuleReward(0.25, 4)
    assert instance.reward_rule_seconds == D
    assert "reward" not in instance.models


# ----------------------------------------------------------------------------
# The template: no reward.infer, a delay on the edges that replace it
# ----------------------------------------------------------------------------


def _delays(template) -> dict[tuple[str, str], float]:
    names = template.names
    return {(names[e.src], names[e.dst]): e.delay_s for e in template.data_edges}


@pytest.mark.parametrize(
    ("algorithm", "fused", "consumers"),
    [
        ("grpo", False, ["actor.train"]),
        ("ppo", False, ["actor.train", "critic.train"]),
        ("ppo", True, ["ac.train"]),
    ],
)
def test_template_replaces_reward_infer_by_delay_edges(algorithm, fused, consumers):
    template = build_template(algorithm, True, True, fused=fused, reward_delay=2.5)
    assert "reward.infer" not in template.names
    assert [template.names[e.dst] for e in template.stage_edges] == consumers
    for edge in template.stage_edges:
        assert (template.names[edge.src], edge.delay_s, edge.stage) == (
            "actor.generate",
            2.5,
            RULE_STAGE,
        )
    # Every other data edge keeps no delay, and the model-reward template is unchanged.
    assert sum(template.data_delays) == 2.5 * len(consumers)
    model = build_template(algorithm, True, True, fused=fused)
    assert "reward.infer" in model.names and not model.stage_edges
    assert build_template("dpo", True, True, reward_delay=2.5) == build_template("dpo", True, True)


def test_an_existing_rollout_edge_stays_one_edge_with_the_larger_constraint():
    """generate -> train already there: one edge, with the delay (lag + delay >= lag)."""
    names = ["actor.generate", "reward.infer", "actor.train"]
    data = [
        ("actor.generate", "reward.infer"),
        ("actor.generate", "actor.train"),
        ("reward.infer", "actor.train"),
    ]
    kept_names, kept, delays = _without_reward(names, data, 3.0)
    assert kept_names == ["actor.generate", "actor.train"]
    assert kept == [("actor.generate", "actor.train")]
    assert delays == {("actor.generate", "actor.train"): 3.0}


# ----------------------------------------------------------------------------
# The simulator: the delay in every data lag, the stage in the trace
# ----------------------------------------------------------------------------


def test_the_delay_sets_the_makespan_of_a_tiny_grpo_plan():
    """The hand plan's makespan, with the stage (D = 1.0 s) and without it (t = 0).

    Per step: W + G + W on both GPUs, then R on both and I on GPU 0 (done at
    W + G + W + R + I, its data to train at + X = 0.8257 s after the rollout's
    run) while the rule stage runs on the CPU until W + G + W + D; train starts
    then, and the next rollout after train and the refit C. So
    2 (W + G + W + D + T) + C = 20.992194 s. With t = 0 train starts at
    W + G + W + R + I + X: 2 (W + G + W + R + I + X + T) + C = 20.643605 s, so the
    stage costs 2 (D - R - I - X) = 2 (1.0 - 0.825705) = 0.348590 s.
    """
    problem = Problem.load(str(RULE))
    plan = plan_from_json(HAND_PLAN, problem.directory)
    times = [c.time for c in problem.simulator.candidates(plan)]
    assert times == pytest.approx([G, I, R, T], abs=1e-6)
    assert problem.simulator.switch(0, plan.placements[0].strategy) == pytest.approx(
        (W, W), rel=1e-12
    )
    evaluation = problem.simulator.evaluate(plan)
    assert evaluation.feasible
    rule_makespan = evaluation.makespan
    assert rule_makespan == pytest.approx(2 * (W + G + W + D + T) + C, abs=1e-5)
    assert rule_makespan == pytest.approx(20.992194, abs=1e-5)
    free = _problem(kind="rule", seconds_per_sample=0.0, workers=4)
    free_makespan = free.simulator.evaluate(plan_from_json(HAND_PLAN, free.directory)).makespan
    assert free_makespan == pytest.approx(2 * (W + G + W + R + I + X + T) + C, abs=1e-5)
    assert free_makespan == pytest.approx(20.643605, abs=1e-5)
    assert rule_makespan - free_makespan == pytest.approx(2 * (D - R - I - X), abs=1e-5)


def test_simulator_lags_add_the_delay_on_the_same_block_and_across_blocks():
    problem = Problem.load(str(RULE))
    template = problem.directory.template
    edge = next(i for i, e in enumerate(template.data_edges) if e.stage == RULE_STAGE)
    same = plan_from_json(HAND_PLAN, problem.directory)
    assert problem.simulator.lags(same)[edge] == D
    apart = {name: dict(entry) for name, entry in HAND_PLAN["vertices"].items()}
    gpu0, gpu1 = (
        {"origin": [0, 0, 0], "extent": [1, 1, 1]},
        {"origin": [0, 0, 1], "extent": [1, 1, 1]},
    )
    apart["actor.generate"] = {
        "block": gpu0,
        "dp": 1,
        "pp": 1,
        "tp": 1,
        "gpu_memory_utilization": 0.5,
        "max_num_seqs": 16,
    }
    apart["actor.train"] = {"block": gpu1, "dp": 1, "pp": 1, "tp": 1, "microbatches": 8}
    split = plan_from_json({"staleness": {"actor": 0}, "vertices": apart}, problem.directory)
    transfer = problem.directory.cost.data_lag(False, "g")
    assert transfer > 0
    assert problem.simulator.lags(split)[edge] == pytest.approx(transfer + D, rel=1e-12)


def test_trace_has_one_cpu_event_per_step_after_the_rollout():
    problem = Problem.load(str(RULE))
    trace = problem.simulator.simulate(plan_from_json(HAND_PLAN, problem.directory))
    # the stage reads the rollout's samples when its run ends, after the engine's sleep
    rollouts = {
        e.step: e for e in trace.events if e.vertex == "actor.generate" and e.kind == "sleep"
    }
    stages = [e for e in trace.events if e.kind == "cpu"]
    assert [e.step for e in stages] == [0, 1]
    for event in stages:
        assert (event.vertex, event.gpus, event.source) == (
            RULE_STAGE,
            (),
            ("actor.generate", event.step),
        )
        assert event.start == rollouts[event.step].end
        assert event.end == pytest.approx(event.start + D, abs=1e-12)
    assert not any(e.vertex == "reward.infer" for e in trace.events)
    document = trace.to_json()
    assert next(e for e in document["events"] if e["kind"] == "cpu")["gpus"] == []


# ----------------------------------------------------------------------------
# Bounds and the exact backends
# ----------------------------------------------------------------------------


def test_critical_path_bound_carries_the_delay():
    """Fastest candidates, staleness 0: 2 (G + max(I, R, D) + T_f) = 2 (G + D + T_f) = 20.619514 s.

    T_f = 0.895561 s is the fastest train (dp 2), which fits alone but not
    beside the rollout engine: the bound ignores that, so it lies below the optimum.
    """
    fastest_train = 0.895561
    bounds = lower_bounds(Problem.load(str(RULE)).directory)
    assert bounds.critical_path == pytest.approx(2 * (G + D + fastest_train), abs=1e-5)
    assert bounds.critical_path <= OPTIMUM


@pytest.mark.parametrize("backend", ["exhaustive", "cpsat", "milp"])
def test_exact_backends_reach_the_hand_derived_optimum(backend):
    """Each backend: OPTIMAL at 20.992194 s, and its plan simulates to its makespan."""
    problem = Problem.load(str(RULE))
    result = solve(backend, problem, SolveOptions(time_limit=60, threads=1))
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(OPTIMUM, abs=1e-5)
    assert problem.simulator.simulate(result.plan).makespan == pytest.approx(result.makespan)
    assert result.bound <= result.makespan * (1 + 1e-12)
    raw = result.stats.get("cp_bound_s", result.stats.get("milp_bound_s"))
    if raw is not None:  # the model's own bound: a delay left out puts it 2 D lower
        formulation = build_formulation(problem, result.stats["heuristic_start_makespan"])
        assert raw >= OPTIMUM - 1e-5 - formulation.rounding_tolerance()


def test_a_longer_stage_moves_the_optimum_by_k_eval_times_its_growth():
    """t = 0.5: D = 4 x 0.5 = 2.0 s on the same chain, so the optimum grows by 2 x (2 - 1) s."""
    problem = _problem(kind="rule", seconds_per_sample=0.5, workers=4)
    for backend in ("exhaustive", "cpsat"):
        result = solve(backend, problem, SolveOptions(time_limit=60, threads=1))
        assert result.status is Status.OPTIMAL, result.message
        assert result.makespan == pytest.approx(OPTIMUM + 2.0, abs=1e-5)


def test_formulation_rows_and_earliest_schedule_carry_the_delay():
    """The delay edge's plain row is start >= end + D; the earliest schedule is the simulator's."""
    problem = Problem.load(str(RULE))
    plan = plan_from_json(HAND_PLAN, problem.directory)
    f = build_formulation(problem, OPTIMUM)
    names = problem.directory.template.names
    generate, train = names.index("actor.generate"), names.index("actor.train")
    plain = [
        row
        for row in formulation_rows.data_rows(f)
        if (row.before, row.after) == (f.run(generate, 0), f.run(train, 0)) and not row.conditions
    ]
    assert [row.lag for row in plain] == [f.to_units(D)]
    assert f.to_units(D) == math.floor(D / f.unit + 1e-9) > 0
    chosen = [f.assignment_of(v, p) for v, p in enumerate(plan.placements)]
    trace = problem.simulator.simulate(plan)
    starts = [0] * f.num_runs
    for event in trace.events:
        if event.kind == "compute":
            starts[f.run(names.index(event.vertex), event.step)] = f.to_units(event.start)
    ends = earliest_ends(f, chosen, plan.staleness_map, starts)
    assert abs(max(ends) * f.unit - trace.makespan) <= f.rounding_tolerance()


# ----------------------------------------------------------------------------
# Outputs
# ----------------------------------------------------------------------------


def test_gantt_perfetto_and_report_show_the_cpu_stage(tmp_path, cli):
    problem = Problem.load(str(RULE))
    trace = problem.simulator.simulate(plan_from_json(HAND_PLAN, problem.directory))
    hardware = problem.instance.hardware
    axes = gantt_figure(trace, hardware).axes[0]
    assert CPU_LABEL in [label.get_text() for label in axes.get_yticklabels()]
    assert any(line.get_gid() == CPU_ROW for line in axes.get_lines())
    assert axes.get_ylim() == (hardware.num_gpus + 1, 0)
    document = perfetto_trace(trace, hardware)
    processes = {
        e["pid"]: e["args"]["name"] for e in document["traceEvents"] if e["name"] == "process_name"
    }
    stages = [e for e in document["traceEvents"] if e.get("cat") == "cpu"]
    assert len(stages) == 2 and {processes[e["pid"]] for e in stages} == {"CPU"}
    assert {e["name"] for e in stages} == {RULE_STAGE}
    out = tmp_path / "run"
    code, _, _ = cli("solve", RULE, "--solver", "greedy", "--out", out, "--quiet")
    assert code == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| reward.rule | none (CPU) | 4 workers |" in report
    assert "Reward: reward.rule: a rule-based reward (no model, no GPU) on 4 CPU workers" in report
    assert "reward.rule" in (out / "report.html").read_text(encoding="utf-8")
    assert '"reward.infer"' not in (out / "plan.json").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------
# Bad input: one line naming the field, exit 2
# ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reward", "field", "words"),
    [
        (
            {"kind": "rule", "seconds_per_sample": -0.1},
            "models.reward.seconds_per_sample",
            "non-negative",
        ),
        ({"kind": "rule"}, "models.reward.seconds_per_sample", "missing"),
        (
            {"kind": "rule", "seconds_per_sample": 0.1, "workers": 0},
            "models.reward.workers",
            "positive integer",
        ),
        (
            {"kind": "rule", "seconds_per_sample": 0.1, "workers": 1.5},
            "models.reward.workers",
            "positive integer",
        ),
        ({"kind": "rules", "seconds_per_sample": 0.1}, "models.reward.kind", "unknown kind"),
        (
            {"kind": "rule", "seconds_per_sample": 0.1, "layers": 2},
            "models.reward.layers",
            "a model field",
        ),
        (
            {"kind": "rule", "seconds_per_sample": 0.1, "preset": "qwen2.5-0.5b"},
            "models.reward.preset",
            "a model field",
        ),
        ({"seconds_per_sample": 0.1}, "models.reward.seconds_per_sample", "add kind: rule"),
        (
            {"kind": "rule", "seconds_per_sample": 1e9},
            "models.reward.seconds_per_sample",
            "plausible range",
        ),
    ],
)
def test_bad_rule_rewards_exit_2_naming_the_field(tmp_path, cli, reward, field, words):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_document(**reward)), encoding="utf-8")
    code, _, err = cli("check", path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and words in lines[0], err


def test_a_rule_stands_only_for_the_reward():
    document = _document(kind="rule", seconds_per_sample=0.1)
    document["models"]["actor"] = {"kind": "rule", "seconds_per_sample": 0.1}
    with pytest.raises(InstanceError) as caught:
        parse_instance(document)
    assert caught.value.path == "models.actor.kind"


def test_kind_model_is_the_default():
    """An explicit kind: model is the same instance (and fingerprint) as none."""
    document = read_yaml_file(str(TINY_GRPO))
    plain = parse_instance(document, "a")
    document["models"]["reward"] = {"kind": "model", **document["models"]["reward"]}
    explicit = parse_instance(document, "a")
    assert explicit.models == plain.models and explicit.reward_rule is None
    assert instance_fingerprint(explicit) == instance_fingerprint(plain)
    rule = parse_instance(_document(kind="rule", seconds_per_sample=0.25, workers=4), "a")
    other = dataclasses.replace(rule, reward_rule=RuleReward(0.25, 2))
    assert instance_fingerprint(rule) != instance_fingerprint(other)


def test_a_plan_or_pin_naming_reward_infer_is_refused():
    problem = Problem.load(str(RULE))
    listed = {**HAND_PLAN, "vertices": {**HAND_PLAN["vertices"]}}
    listed["vertices"]["reward.infer"] = {
        "block": BOTH,
        "dp": 2,
        "pp": 1,
        "tp": 1,
        "microbatches": 8,
    }
    with pytest.raises(PlanError) as caught:
        plan_from_json(listed, problem.directory)
    assert caught.value.path == "plan.vertices.reward.infer"
    assert "reward is a rule" in caught.value.message
    document = _document(kind="rule", seconds_per_sample=0.25, workers=4)
    document["placement"]["pin"] = {"reward.infer": {"tp": 1}}
    with pytest.raises(InstanceError) as caught:
        parse_instance(document)
    assert caught.value.path == "placement.pin.reward.infer"


def test_a_rule_reward_of_dpo_is_ignored_with_a_warning():
    document = read_yaml_file(str(ROOT / "instances" / "tiny_dpo_2gpu.yaml"))
    document["models"]["reward"] = {"kind": "rule", "seconds_per_sample": 0.1}
    instance = parse_instance(document)
    assert instance.reward_rule is None
    assert any("models.reward is not used by dpo" in w for w in instance.warnings)
