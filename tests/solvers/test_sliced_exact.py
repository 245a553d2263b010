"""A sliced block beats every contiguous one, by hand and by every exact backend.

The instance (tests/data/tiny_grpo_1x2x4_sliced.yaml): one rack of two 4-GPU nodes, GRPO
with only actor.generate and actor.train, tp pinned to 1. With
``placement.sliced_blocks: true`` the optimum rolls out on GPU 0 of each node (a sliced
block of 2 GPUs) while training takes GPUs 1-3 of each node (a sliced block of 6 GPUs), one
step off-policy, 0.14632 s; without sliced blocks no 6-GPU block exists and the optimum
rolls out on one node and trains on the other, 0.15259 s. Both optima are derived by hand
below, and the exhaustive oracle, CP-SAT and the MILP agree on them.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import plan_from_json, plan_to_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.solvers import cpsat, exhaustive, local, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

INSTANCE = Path(__file__).resolve().parents[1] / "data" / "tiny_grpo_1x2x4_sliced.yaml"

# -- The two optima by hand ----------------------------------------------------------------
# Model, workload and hardware are those of tests/solvers/test_node_runs_exact.py (P_l =
# 14_811_136, P = 80_347_136, n = 96 sequences of S 128 + T 512; F 1e14, 1e12 B/s memory,
# 1e11 B/s and no latency for every transfer at every level, host copies 25e9 B/s). With tp
# pinned to 1 and one layer (pp 1), a block of k GPUs has one strategy per vertex: dp = k,
# wherever its GPUs are (every level has the same links).
# Rollout on k GPUs (n_k = 96 / k sequences per replica, memory-bound in every round):
#   G_k = 1_172_526_071_808 / k / 1e14 + (48_721_035_264 + 256 n_k 196_864) / 1e12
# Training on k GPUs (one microbatch of 96 / k sequences, ZeRO-1, gradient all-reduce):
#   T_k = 17_781_164_605_440 / k / 1e14 + 2 (k - 1) / k x 160_694_272 / 1e11
#     k   G_k (s)                              T_k (s)
#     2   0.00586263035904 + 0.051140100096    0.0889058230272 + 0.00160694272
#     4   0.00293131517952 + 0.049930567680    0.0444529115136 + 0.00241041408
#     6   0.00195420995968 + 0.049527392256    0.0296352743424 + 0.0026782378666..
#     8   0.00146565758976 + 0.049325801472    0.0222264557568 + 0.00281214976
# A colocated rollout wakes and sleeps W_s = 2P / 25e9 = 0.00642777088 s each; the samples
# travel l_d = 96 x 640 x 8 B / 1e11 = 4.9152e-6 s between two blocks.
# Every plan is one of two kinds (k_eval 2; each step a rollout, then a train run):
# (a) The blocks share a GPU: the four runs hold it one at a time and the rollout wakes and
#     sleeps: makespan >= 2 (G_8 + 2 W_s) + 2 T_8 = 0.17737 s.
# (b) Disjoint blocks of g and t GPUs: makespan = G_g + l_d + T_t + max(G_g, T_t) at
#     staleness 1 (rollout 1 runs right after rollout 0; train 1 waits for train 0 and for
#     rollout 1). It falls as g or t grows, so only the largest disjoint pairs count.
#     Contiguous blocks are aligned ranges of 1, 2, 4 GPUs in a node, a node, the rack: the
#     largest disjoint pair is one node each, (4, 4): 2 G_4 + l_d + T_4 = 0.15259 s.
#     Sliced blocks add the in-node ranges 0, 1, 2-3, 0-2, 1-3, ... on both nodes: 2 + 6
#     (GPU 0 and GPUs 1-3 of each node, or GPU 3 and GPUs 0-2), 4 + 4 (GPUs 0-1 and 2-3 of
#     each node) and 6 + 2. (2, 6): G_2 > T_6, so 2 G_2 + l_d + T_6 = 0.14632 s; (6, 2):
#     G_6 + l_d + 2 T_2 = 0.23560 s; (4, 4) as above.
# With sliced blocks (b) at (2, 6) is the optimum, 0.14632388831915 s, 4.1 % below the
# contiguous optimum (b) at (4, 4), 0.15259200651264 s.

HAND_REL = 1e-12
G = {
    k: 1_172_526_071_808 / k / 1e14 + (48_721_035_264 + 256 * (96 // k) * 196_864) / 1e12
    for k in (1, 2, 4, 6, 8)
}
T = {
    k: 17_781_164_605_440 / k / 1e14 + 2 * (k - 1) / k * 160_694_272 / 1e11 for k in (1, 2, 4, 6, 8)
}
SWITCH = 0.00642777088
LAG = 4.9152e-6
SLICED_OPTIMUM = 2 * G[2] + LAG + T[6]
CONTIGUOUS_OPTIMUM = 2 * G[4] + LAG + T[4]
REL = 1e-9


def document(sliced: bool = True) -> dict:
    """The instance as a YAML document, with ``placement.sliced_blocks`` set."""
    data = copy.deepcopy(read_yaml_file(INSTANCE))
    data["placement"]["sliced_blocks"] = sliced
    return data


@functools.cache
def problem(sliced: bool = True) -> Problem:
    """The instance's problem with or without sliced blocks."""
    return Problem.from_instance(parse_instance(document(sliced), name="sliced"))


@functools.cache
def solved(backend: str, sliced: bool) -> Result:
    """A backend's OPTIMAL result ("oracle", "cpsat" or "milp")."""
    module = {"oracle": exhaustive, "cpsat": cpsat, "milp": milp}[backend]
    result = module.solve(problem(sliced), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    return result


def test_the_hand_derived_figures():
    """The optima of the derivation, and the plans they beat."""
    assert abs(SLICED_OPTIMUM - 0.14632388831914667) < 1e-15
    assert abs(CONTIGUOUS_OPTIMUM - 0.15259200651264) < 1e-15
    assert G[2] > T[6] and G[4] > T[4]
    colocated = 2 * (G[8] + 2 * SWITCH) + 2 * T[8]
    assert min(colocated, G[6] + LAG + 2 * T[2]) > CONTIGUOUS_OPTIMUM > SLICED_OPTIMUM


@pytest.mark.parametrize("extent", [(1, 2, 1), (1, 2, 3), (1, 1, 4), (1, 2, 4)])
def test_each_shape_takes_its_hand_derived_times(extent):
    """One candidate per (vertex, shape), dp = its GPUs, at G_k and T_k: a sliced block of
    k GPUs costs what k GPUs cost (every level has the same links here)."""
    directory = problem().directory
    gpus = extent[0] * extent[1] * extent[2]
    rollout, train = (directory.options[v][extent] for v in (0, 1))
    assert len(rollout) == len(train) == 1
    assert rollout[0].strategy.dp == train[0].strategy.dp == gpus
    assert rollout[0].time == pytest.approx(G[gpus], rel=HAND_REL)
    assert train[0].time == pytest.approx(T[gpus], rel=HAND_REL)


@pytest.mark.parametrize(
    ("sliced", "expected"), [(True, SLICED_OPTIMUM), (False, CONTIGUOUS_OPTIMUM)]
)
def test_the_oracle_finds_the_hand_derived_optimum(sliced, expected):
    """Sliced: rollout on one GPU of each node, training on the three others of each."""
    result = solved("oracle", sliced)
    assert result.makespan == pytest.approx(expected, rel=HAND_REL)
    rollout, train = (p.block for p in result.plan.placements)
    assert not rollout.intersects(train)
    assert result.plan.staleness_map == {"actor": 1}
    if sliced:
        assert (rollout.extent, train.extent) == ((1, 2, 1), (1, 2, 3))
        assert set(rollout.gpus()) | set(train.gpus()) == set(range(8))
    else:
        assert rollout.extent == train.extent == (1, 1, 4)


@pytest.mark.parametrize("sliced", [True, False])
@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_prove_the_oracle_optimum(backend, sliced):
    """OPTIMAL at the oracle's makespan, with a bound no higher, symmetry breaking on."""
    result, oracle = solved(backend, sliced), solved("oracle", sliced)
    assert result.makespan == pytest.approx(oracle.makespan, rel=REL)
    assert result.bound <= oracle.score * (1 + 1e-12)
    assert result.stats["symmetry_breaking"] is True


def test_the_local_search_reaches_a_sliced_split():
    """From the baselines the moves reach the sliced optimum."""
    result = local.solve(problem(), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.makespan == pytest.approx(SLICED_OPTIMUM, rel=REL)
    assert result.plan.placements[1].block.extent == (1, 2, 3)


def test_the_optimum_round_trips_through_a_plan_file_and_the_cli(cli, tmp_path):
    """plan.json holds the sliced block as origin and extent; simulate reads it back."""
    directory = problem().directory
    plan = solved("oracle", True).plan
    data = plan_to_json(plan, directory)
    assert data["vertices"]["actor.train"]["block"] == {"origin": [0, 0, 1], "extent": [1, 2, 3]}
    assert plan_from_json(json.loads(json.dumps(data)), directory) == plan
    data.pop("instance")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, _ = cli("simulate", INSTANCE, path, "--trace", tmp_path / "trace.json")
    assert code == 0 and f"{SLICED_OPTIMUM:.4f}" in out
    trace = json.loads((tmp_path / "trace.json").read_text(encoding="utf-8"))
    train = [e for e in trace["events"] if e["vertex"] == "actor.train" and e["kind"] == "compute"]
    assert {tuple(e["gpus"]) for e in train} == {(1, 2, 3, 5, 6, 7)}


def test_without_the_option_the_plan_file_is_refused_in_one_line(cli, tmp_path):
    """A sliced block outside the plan space names the block and the option; exit 2."""
    data = plan_to_json(solved("oracle", True).plan, problem().directory)
    data.pop("instance")
    with pytest.raises(PlanError, match=r"placement\.sliced_blocks: true") as caught:
        plan_from_json(data, problem(False).directory)
    assert "plan.vertices.actor.generate.block" in str(caught.value)
    instance = tmp_path / "contiguous.yaml"
    instance.write_text(json.dumps(document(False)), encoding="utf-8")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli("simulate", instance, path)
    assert code == 2
    assert "placement.sliced_blocks" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_oracle_order_search_lets_disjoint_sliced_blocks_run_together():
    """The run-order search on the optimum plan: the rollout (GPUs 0, 4) and training
    (GPUs 1-3, 5-7) share no GPU although their hulls overlap, so the best order is the
    simulated makespan, not the 4-run chain a hull would force."""
    import time

    from rlplan.solvers.exhaustive import _OrderSearch

    plan = solved("oracle", True).plan
    search = _OrderSearch(problem(), plan, time.perf_counter() + 60)
    best, sequence = search.search(float("inf"))
    assert sequence is not None
    assert best == pytest.approx(SLICED_OPTIMUM, rel=REL)
    assert search.lower_bound() <= best


def test_gpu_units_lie_inside_or_outside_every_sliced_block():
    """With both vertices pinned to sliced blocks (GPUs 0, 4 and GPUs 1-3, 5-7) the units
    cut at each node piece: every unit is in a block's GPUs or apart from them, and the
    MILP still proves the optimum."""
    from rlplan.formulation.model import build_formulation

    data = document()
    data["placement"]["pin"] = {
        "actor.generate": {"tp": 1, "block": {"origin": [0, 0, 0], "extent": [1, 2, 1]}},
        "actor.train": {"tp": 1, "block": {"origin": [0, 0, 1], "extent": [1, 2, 3]}},
    }
    pinned = Problem.from_instance(parse_instance(data, name="pinned"))
    formulation = build_formulation(pinned, 1.0, prune=False)
    assert len(formulation.blocks) == 2
    for low, high in formulation.gpu_units:
        for block in formulation.blocks:
            inside = set(range(low, high)) & set(block.gpus())
            assert not inside or inside == set(range(low, high))
    result = milp.solve(pinned, SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(SLICED_OPTIMUM, rel=REL)


def steady_problem() -> Problem:
    """The sliced instance under the steady-state objective."""
    data = document(True)
    data["optimizer"]["objective"] = "steady_state"
    return Problem.from_instance(parse_instance(data, name="sliced_steady"))


def test_every_backend_agrees_on_the_steady_state_period_with_sliced_blocks():
    """The period of (b) is the slowest of the two chains and the pub cycle, over 1 + σ = 2
    periods: (2, 6) max(G_2, T_6, (G_2 + l_d + T_6 + refit) / 2) = G_2; (4, 4) G_4, as the
    cycle's T_4 + l_d + refit (a refit moves the 160.7 MB of weights in about 1.6 ms) stays
    under G_4; (6, 2) T_2. Sharing a GPU costs G_8 + 2 W_s + T_8 per period. So the optimum
    period is G_4 = 0.05286188285952 s (k_eval 2: score 2 G_4), on one node each or on the
    sliced 4 + 4 alike; the oracle, CP-SAT and the MILP prove it over sliced blocks too."""
    expected = 2 * G[4]
    assert G[4] < min(G[2], T[2], G[8] + 2 * SWITCH + T[8]) and T[4] + LAG + 0.002 < G[4]
    steady = steady_problem()
    options = SolveOptions(time_limit=60, threads=1, seed=0)
    for module in (exhaustive, cpsat, milp):
        result = module.solve(steady, options)
        assert result.status is Status.OPTIMAL, result.message
        assert result.score == pytest.approx(expected, rel=REL)
        assert steady.simulator.simulate(result.plan).period == pytest.approx(G[4], rel=REL)
