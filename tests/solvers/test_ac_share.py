"""AC-share: the fused actor-critic template, its lambda_ac penalty, and every solver deciding it.

The shipped instance ``tiny_ppo_2gpu_ac.yaml`` is tiny_ppo_2gpu plus
``ac_share: [0, 1]``; its header gives the known optima of both templates.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlplan.cli import app as main
from rlplan.outputs.frameworks import FRAMEWORKS, export_config
from rlplan.outputs.report_md import render_report
from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import plan_from_json, plan_to_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import loads
from rlplan.rpeg.search.template_switch import convert_plan, switch_template
from rlplan.rpeg.templates import build_template
from rlplan.solvers import get_solver
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status

REPO = Path(__file__).resolve().parents[2]
AC_INSTANCE = REPO / "instances" / "tiny_ppo_2gpu_ac.yaml"

#: Known optima of tiny_ppo_2gpu_ac (k_eval = 2) without the off-policy penalty, from its
#: header: the separate template's (tiny_ppo_2gpu's plan at actor staleness 1, which hides
#: the rollout's refit) and the fused template's raw makespan (ac staleness 1).
SEPARATE_OPTIMUM = 20.431012471035498
FUSED_OPTIMUM = 19.471978201138533

EXACT = ("exhaustive", "cpsat", "milp")
ALL_SOLVERS = ("greedy", "concurrent", "local", "exhaustive", "cpsat", "milp", "auto")


def document(lambda_ac: float | None = None, critic_layers: int | None = None) -> dict:
    """The shipped AC-share instance, optionally with another lambda_ac or critic depth.

    The off-policy penalty is off (``lambda_stale`` 0): these tests price the template
    choice alone (test_staleness.py prices both penalties together).
    """
    data = loads(AC_INSTANCE.read_text(encoding="utf-8"))
    data["optimizer"]["lambda_stale"] = 0.0
    if lambda_ac is not None:
        data["optimizer"]["lambda_ac"] = lambda_ac
    if critic_layers is not None:
        data["models"]["critic"]["layers"] = critic_layers
    return data


@functools.cache
def problem(lambda_ac: float | None = None, critic_layers: int | None = None) -> Problem:
    """The problem of :func:`document` (cached)."""
    instance = parse_instance(document(lambda_ac, critic_layers), name="tiny_ppo_2gpu_ac")
    return Problem.from_instance(instance)


@functools.cache
def solved(solver: str, lambda_ac: float | None = None, critic_layers: int | None = None):
    """``solver``'s result on :func:`problem` (cached: several tests read one solve)."""
    return get_solver(solver)(
        problem(lambda_ac, critic_layers), SolveOptions(time_limit=30, seed=0)
    )


def template_optimum(prob: Problem, template: str) -> float:
    """The exhaustive oracle's raw optimal makespan of one template."""
    result = get_solver("exhaustive")(prob.variant(template), SolveOptions(time_limit=30))
    assert result.status is Status.OPTIMAL
    return result.makespan


# -- template, cost and plan files ------------------------------------------------------


@pytest.mark.parametrize("recompute", [False, True])
def test_fused_template(recompute):
    """Vertices, data edges and pub edges of the fused template (docs/templates.md)."""
    template = build_template("ppo", recompute, True, fused=True)
    assert template.names == (
        "actor.generate",
        "reference.infer",
        "reward.infer",
        "ac.infer",
        "ac.train",
    )
    assert template.trained_models == ("ac",)
    names = template.names
    data = {(names[e.src], names[e.dst]) for e in template.data_edges}
    assert data == {
        ("actor.generate", "reference.infer"),
        ("actor.generate", "reward.infer"),
        ("actor.generate", "ac.infer"),
        ("reference.infer", "ac.train"),
        ("reward.infer", "ac.train"),
        ("ac.infer", "ac.train"),
    }
    pubs = {(names[e.src], names[e.dst]): e for e in template.pub_edges}
    assert set(pubs) == {("ac.train", "actor.generate"), ("ac.train", "ac.infer")}
    assert all(edge.model == "ac" for edge in pubs.values())
    assert pubs[("ac.train", "actor.generate")].staleness_model == "ac"
    # ac.infer recomputes old log-probs only when recompute_logprobs is on: then it must use
    # the latest weights (as actor.infer does); otherwise it takes the ac staleness, as
    # critic.infer takes the critic's.
    expected = None if recompute else "ac"
    assert pubs[("ac.train", "ac.infer")].staleness_model == expected
    with pytest.raises(ValueError):
        build_template("grpo", fused=True)


def test_fused_model_has_the_actor_parameters_plus_a_value_head():
    """P_ac = P_actor + d; ac.train's candidates cost what the actor's do, up to that head."""
    from rlplan.rpeg.model.parameters import parameter_count

    prob = problem()
    spec = prob.instance.models["ac"]
    assert parameter_count(spec, "ac") == parameter_count(spec, "actor") + spec.hidden_dim
    fused = prob.variant("ac_share").directory
    separate = prob.directory
    ac_train = fused.fastest(fused.template.index("ac.train"))
    actor_train = separate.fastest(separate.template.index("actor.train"))
    assert ac_train.time == pytest.approx(actor_train.time, rel=1e-4)
    assert ac_train.time >= actor_train.time


def test_fused_plan_round_trips_through_plan_json():
    """A fused plan file records its template, loads back equal and simulates the same."""
    prob = problem()
    result = solved("exhaustive", 0.0)
    plan = result.plan
    assert plan.fused and plan.template == "ac_share"
    document_ = plan_to_json(plan, prob.directory)
    assert document_["template"] == "ac_share"
    assert set(document_["vertices"]) == {
        "actor.generate",
        "reference.infer",
        "reward.infer",
        "ac.infer",
        "ac.train",
    }
    assert document_["staleness"] == {"ac": plan.staleness_map["ac"]}
    loaded = plan_from_json(json.loads(json.dumps(document_)), prob.directory)
    assert loaded == plan
    fused_problem = problem(0.0)
    assert fused_problem.simulator.simulate(loaded).makespan == pytest.approx(
        result.makespan, rel=1e-12
    )
    # The separate template's plans say so explicitly.
    separate = solved("exhaustive")
    assert plan_to_json(separate.plan, prob.directory)["template"] == "separate"


def test_fused_plan_is_refused_where_the_instance_has_no_ac_share():
    """A fused plan for an instance without ac_share, or with a bad template name: PlanError."""
    prob = problem(0.0)
    document_ = plan_to_json(solved("exhaustive", 0.0).plan, prob.directory)
    del document_["instance"]
    data = document()
    del data["optimizer"]["staleness_candidates"]["ac_share"]
    plain = Problem.from_instance(parse_instance(data))
    with pytest.raises(PlanError) as info:
        plan_from_json(document_, plain.directory)
    assert info.value.path == "plan.template"
    assert "ac_share" in info.value.message
    document_["template"] = "fused"
    with pytest.raises(PlanError) as info:
        plan_from_json(document_, prob.directory)
    assert info.value.path == "plan.template"


# -- the objective --------------------------------------------------------------------


def test_score_is_step_time_times_one_plus_lambda_for_fused_plans_only():
    """The simulator keeps the raw makespan; the score adds the penalty to fused plans."""
    prob = problem()
    fused = solved("exhaustive", 0.0).plan
    separate = solved("exhaustive").plan
    trace = prob.simulator.simulate(fused)
    assert trace.makespan == pytest.approx(FUSED_OPTIMUM, rel=1e-12)
    assert trace.score == pytest.approx(FUSED_OPTIMUM * 1.15, rel=1e-12)
    assert trace.to_json()["template"] == "ac_share"
    evaluation = prob.simulator.evaluate(separate)
    assert evaluation.score == evaluation.makespan == pytest.approx(SEPARATE_OPTIMUM, rel=1e-12)


def test_the_shipped_instance_has_its_known_optimum():
    """Header of tiny_ppo_2gpu_ac: fused 4.7 % faster raw, separate wins on score at 0.15."""
    prob = problem()
    assert template_optimum(prob, "separate") == pytest.approx(SEPARATE_OPTIMUM, rel=1e-12)
    assert template_optimum(prob, "ac_share") == pytest.approx(FUSED_OPTIMUM, rel=1e-12)
    result = solved("exhaustive")
    assert result.status is Status.OPTIMAL
    assert result.template == "separate"
    assert result.score == pytest.approx(SEPARATE_OPTIMUM, rel=1e-12)
    assert result.bound == pytest.approx(SEPARATE_OPTIMUM, rel=1e-12)
    summary = result.ac_share_summary()
    assert summary["other"]["score_step_s"] == pytest.approx(FUSED_OPTIMUM * 1.15 / 2, rel=1e-9)
    assert summary["margin"] == pytest.approx(1 - SEPARATE_OPTIMUM / (FUSED_OPTIMUM * 1.15))


@pytest.mark.parametrize("lambda_ac", [None, 0.0])
@pytest.mark.parametrize("solver", ["cpsat", "milp"])
def test_exact_backends_agree_with_the_oracle_on_template_and_score(solver, lambda_ac):
    """CP-SAT and the MILP choose the oracle's template and prove its score (1e-4 rounding)."""
    oracle = solved("exhaustive", lambda_ac)
    result = solved(solver, lambda_ac)
    assert result.status is Status.OPTIMAL, result.message
    assert result.template == oracle.template
    assert result.score == pytest.approx(oracle.score, rel=2e-4)
    # The reported bound is the smaller of the two templates' bounds, never above the optimum.
    assert result.bound <= oracle.score * (1 + 1e-12)
    bounds = [entry["bound_s"] for entry in result.templates.values()]
    assert result.bound == pytest.approx(min(bounds), rel=1e-12)
    assert set(result.stats["templates"]) == {"separate", "ac_share"}


def test_optimal_only_when_both_templates_are_closed():
    """A template left open keeps the combined result from OPTIMAL, and bounds it."""
    from rlplan.solvers.templates import solve_templates

    prob = problem(0.0)
    exhaustive = get_solver("exhaustive")

    def separate_open(variant, options):
        result = exhaustive(variant, options)
        if not variant.directory.fused:
            # As if the separate template had run out of time with a weak bound,
            # below the fused template's proven optimum.
            result.bound, result.status = 0.9 * variant.score_bound, Status.FEASIBLE
        return result

    result = solve_templates(prob, SolveOptions(time_limit=30), separate_open, "exhaustive")
    assert result.template == "ac_share"  # the better plan is still the fused one
    assert result.bound == pytest.approx(0.9 * prob.variant("separate").score_bound)
    assert result.status is Status.FEASIBLE


def test_time_the_fused_solve_leaves_goes_back_to_an_open_separate_template():
    """The separate template ends open on its first solve only: the time the fused solve
    leaves goes to the separate template again, cut off at the better score known (the
    fused optimum, the better plan at lambda_ac 0), and that solve's bound closes the
    separate template, so the combined result is OPTIMAL."""
    from rlplan.solvers.templates import solve_templates

    prob = problem(0.0)
    exhaustive = get_solver("exhaustive")
    calls = []

    def separate_open_once(variant, options):
        calls.append((variant.directory.fused, options.cutoff))
        result = exhaustive(variant, options)
        if len(calls) == 1:
            result.bound, result.status = 0.9 * variant.score_bound, Status.FEASIBLE
        return result

    result = solve_templates(prob, SolveOptions(time_limit=30), separate_open_once, "exhaustive")
    assert [fused for fused, _ in calls] == [False, True, False]
    assert calls[2][1] == pytest.approx(result.score, rel=1e-12)
    assert result.template == "ac_share"
    assert result.status is Status.OPTIMAL


# -- lambda_ac 0 and 10 -----------------------------------------------------------------

#: Two instances at lambda_ac 0, one where the fused template is faster and one where it
#: is not (the comments give the reason in the cost model):
#:
#: * critic of the actor's size (the shipped instance): the fused model drops critic.train
#:   and the critic's forward (ac.infer replaces critic.infer at the actor's size, which is
#:   the critic's) and its staleness 1 hides the reshard to the rollout: 2 x 9.7360 s
#:   against 2 x 10.2155 s (each with the rollout's wake and sleep);
#: * a 2-layer critic: critic.infer and critic.train cost almost nothing (0.015 s and
#:   0.045 s on one GPU beside reward.infer), while the fused template must run ac.infer,
#:   a forward of the whole 24-layer actor (0.246 s), as old log-probs are not recomputed
#:   in the separate template (engine.recompute_logprobs false): the separate template
#:   is faster (2 x 9.6451 s against 2 x 9.7360 s).
CASES = {"fusion faster": None, "fusion slower": 2}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lambda_zero_fusion_wins_whenever_it_is_faster(case):
    """With lambda_ac 0 the winner is the template with the smaller raw optimum."""
    critic_layers = CASES[case]
    prob = problem(0.0, critic_layers)
    separate = template_optimum(prob, "separate")
    fused = template_optimum(prob, "ac_share")
    assert (fused < separate) == (case == "fusion faster")  # the construction holds
    expected = "ac_share" if fused < separate else "separate"
    for solver in EXACT:
        result = solved(solver, 0.0, critic_layers)
        assert result.template == expected, solver
        assert result.score == pytest.approx(min(fused, separate), rel=2e-4), solver
    # The heuristics choose by score too: whatever they find, a fused plan wins only if faster.
    for solver in ("greedy", "concurrent", "local", "auto"):
        result = solved(solver, 0.0, critic_layers)
        entries = result.templates
        other = "separate" if result.template == "ac_share" else "ac_share"
        if entries[other]["score_s"] is not None:
            assert result.score <= entries[other]["score_s"] * (1 + 1e-12), solver
    assert solved("local", 0.0, critic_layers).template == expected


@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_lambda_ten_fusion_never_wins(solver):
    """With lambda_ac 10 every solver keeps the separate template, even where fusion is faster."""
    result = solved(solver, 10.0)
    assert result.status.has_plan
    assert result.template == "separate"
    assert not result.plan.fused
    assert result.score == result.makespan


@pytest.mark.parametrize("solver", ALL_SOLVERS)
def test_every_solver_decides_the_template(solver):
    """At lambda_ac 0 every solver finds the fused plan, which is 4.7 % faster."""
    result = solved(solver, 0.0)
    assert result.status.has_plan
    assert result.template == "ac_share", solver
    assert result.score == result.makespan  # no penalty at lambda_ac 0
    assert result.score <= SEPARATE_OPTIMUM


# -- the local search's move ------------------------------------------------------------


def test_switch_move_carries_plans_between_templates():
    """convert_plan gives a valid plan of the other template; switch_template repairs memory."""
    import random

    from rlplan.rpeg.search.moves import MoveContext

    prob = problem()
    separate = solved("exhaustive").plan
    fused_dir = prob.directory.variant(True)
    converted = convert_plan(separate, prob.directory, fused_dir)
    # ac takes the actor's staleness (1 in the separate optimum)
    assert separate.staleness_map["actor"] == 1
    assert converted.fused and converted.staleness_map == {"ac": 1}
    names = dict(zip(fused_dir.template.names, converted.placements, strict=True))
    by_name = dict(zip(prob.directory.template.names, separate.placements, strict=True))
    assert names["actor.generate"] == by_name["actor.generate"]
    assert names["ac.train"].block == by_name["actor.train"].block
    back = convert_plan(converted, fused_dir, prob.directory)
    assert not back.fused and set(back.staleness_map) == {"actor", "critic"}
    context = MoveContext(prob.directory, prob.instance.optimizer)
    (moved,) = switch_template(separate, context, random.Random(0), prob.simulator)
    assert moved.fused and prob.simulator.evaluate(moved).feasible


# -- reports and exports ---------------------------------------------------------------


def test_result_json_and_reports_show_raw_time_score_template_and_margin():
    """result.json, report.md and the terminal line say which template won and by how much."""
    prob = problem()
    result = solved("exhaustive")
    document_ = result.to_json()
    assert document_["template"] == "separate"
    assert document_["step_time_s"] == pytest.approx(SEPARATE_OPTIMUM / 2)
    assert document_["score_step_s"] == pytest.approx(SEPARATE_OPTIMUM / 2)
    summary = document_["ac_share"]
    assert summary["winner"] == "separate" and summary["lambda_ac"] == 0.15
    assert summary["other"]["template"] == "ac_share"
    assert summary["other"]["step_time_s"] == pytest.approx(FUSED_OPTIMUM / 2, rel=1e-9)
    assert summary["margin"] > 0
    json.dumps(document_, allow_nan=False)
    line = result.describe_template()
    assert line.startswith("separate won") and "ac_share" in line and "% lower" in line
    report = render_report(prob, result, prob.simulator.simulate(result.plan))
    assert "best ac_share plan" in report and "lambda_ac" in report
    fused = solved("exhaustive", 0.0)
    report = render_report(problem(0.0), fused, problem(0.0).simulator.simulate(fused.plan))
    assert "| ac.train |" in report and "fused actor-critic" in report


def test_plans_without_ac_share_keep_their_results():
    """Without ac_share: no ac_share summary, and the score is the makespan."""
    data = document()
    del data["optimizer"]["staleness_candidates"]["ac_share"]
    prob = Problem.from_instance(parse_instance(data))
    result = get_solver("exhaustive")(prob, SolveOptions(time_limit=30))
    assert result.makespan == pytest.approx(SEPARATE_OPTIMUM, rel=1e-12)
    assert result.score == result.makespan and result.lambda_ac is None
    assert "ac_share" not in result.to_json()
    assert result.describe_template() is None


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_export_config_refuses_a_fused_plan(framework):
    """No framework has a fused actor-critic: the export is refused in one line saying so."""
    prob = problem(0.0)
    with pytest.raises(PlanError, match="fused actor-critic"):
        export_config(prob, solved("exhaustive", 0.0).plan, framework, "plan.json")


def test_cli_solve_and_simulate_a_fused_plan(tmp_path, capsys):
    """solve writes a fused plan.json that simulate and export-config read back."""
    instance = tmp_path / "tiny_ppo_2gpu_ac0.yaml"
    text = AC_INSTANCE.read_text(encoding="utf-8").replace("lambda_ac: 0.15", "lambda_ac: 0")
    instance.write_text(text, encoding="utf-8")
    out = tmp_path / "run"
    code = main.main(
        ["solve", str(instance), "--solver", "exhaustive", "--out", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "template     ac_share won" in printed and "score" in printed
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["template"] == "ac_share"
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["template"] == "ac_share" and result["ac_share"]["other"] is not None
    assert "ac_share" in (out / "report.html").read_text(encoding="utf-8")
    assert main.main(["simulate", str(instance), str(out / "plan.json")]) == 0
    assert "template     ac_share" in capsys.readouterr().out


def test_cli_ac_share_for_grpo_is_one_line_and_exit_2(tmp_path):
    """A GRPO config enabling AC-share: one stderr line naming the field, exit 2."""
    data = loads((REPO / "instances" / "tiny_grpo_2gpu.yaml").read_text(encoding="utf-8"))
    data["optimizer"]["staleness_candidates"]["ac_share"] = [0, 1]
    path = tmp_path / "grpo_ac.yaml"
    path.write_text(json.dumps(data), encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(REPO / "main.py"), "check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert "optimizer.staleness_candidates.ac_share" in lines[0] and "PPO only" in lines[0]


def test_local_search_switches_template_from_a_separate_start():
    """Started from a separate plan at lambda_ac 0, the local search moves to the fused one."""
    from rlplan.solvers.local import improve

    prob = problem(0.0)
    start = solved("greedy", 10.0).plan  # separate (lambda_ac 10), valid at lambda_ac 0 too
    assert not start.fused
    plan, stats = improve(prob, start, SolveOptions(time_limit=30, seed=0), 30, 3000)
    assert plan.fused
    assert stats["templates"]["separate"]["score_s"] is not None
    assert prob.simulator.evaluate(plan).score < prob.simulator.evaluate(start).score
