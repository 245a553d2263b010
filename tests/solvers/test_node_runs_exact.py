"""A block of three whole nodes beats every aligned block, by hand and by every exact backend.

The instance (tests/data/tiny_grpo_1x4x1_runs.yaml): one rack of four one-GPU nodes,
GRPO with only actor.generate and actor.train. With ``placement.node_blocks: any`` the
optimum rolls out on one node while the other three nodes train (one step off-policy),
0.19199 s; with ``aligned`` no block holds three nodes and the optimum runs both on all
four, one after the other, 0.22516 s. Both optima are derived by hand below, and the
exhaustive oracle, CP-SAT and the MILP agree on them.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
from pathlib import Path

import pytest

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.plan import Placement, Plan, plan_from_json, plan_to_json
from rlplan.rpeg.schema.instance import parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from rlplan.solvers import cpsat, exhaustive, local, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

INSTANCE = Path(__file__).resolve().parents[1] / "data" / "tiny_grpo_1x4x1_runs.yaml"

# -- The two optima by hand ----------------------------------------------------------------
# Model (one layer, d 1024, q 1024, 1 key/value head of h 64, gated FFN f 4096, V 32000):
#   P_l = d (q + 2 kv h) + q d + 3 d f = 1024 x 1152 + 1024^2 + 3 x 1024 x 4096 = 14_811_136
#   head V d = 32_768_000; P = P_l + V d (embedding) + V d (head)             = 80_347_136
# Workload: n = B K = 96 sequences, S 128, T 512 for every sequence (l = S + T = 640).
# Hardware (all synthetic, hand-checkable): F 1e14 at efficiency 1 (no m_half, no non-GEMM
# time), bandwidth 1e12 at decode_bw_eff 1, no decode-step overhead, every transfer
# 1e11 B/s with no latency, host copies 25e9 B/s. With one GPU per node tp = 1, and with
# one layer pp = 1, so a block of k nodes has one strategy per vertex: dp = k.
#
# Rollout on k nodes (dp k, n_k = 96/k sequences per replica, all in flight: the 12 GB
# engine share minus the 160.7 MB weights holds 46 million KV tokens of 256 B):
#   prefill, one chunk: FLOPs = 2 P_l n_k S + 2 S^2 q n_k + 2 head n_k S, over F;
#   decode round x = 1..512 at context S + x: weights read W = 2 (P_l + head) = 95_158_272 B
#   plus the KV 256 B per token (2 L kv h 2) x n_k (S + x), over 1e12 B/s. Memory-bound in
#   every round: at k = 1 the round's FLOPs n (2 P_l + 4 q (S+x) + 2 head) take 91.86 us at
#   x = 1 and 93.87 us at x = 512 against 98.33 us and 110.89 us of memory (both affine in
#   x); at k > 1 the FLOPs shrink k-fold and the weights stay. Sum over x:
#   T W + 256 n_k (T S + T (T+1) / 2) = 48_721_035_264 + 256 n_k x 196_864 bytes.
#     k  prefill FLOPs        decode bytes     G_k (s)
#     1  1_172_526_071_808    53_559_164_928   0.01172526071808 + 0.053559164928 = 0.06528442564608
#     2    586_263_035_904    51_140_100_096   0.00586263035904 + 0.051140100096 = 0.05700273045504
#     3    390_842_023_936    50_333_745_152   0.00390842023936 + 0.050333745152 = 0.05424216539136
#     4    293_131_517_952    49_930_567_680   0.00293131517952 + 0.049930567680 = 0.05286188285952
# Training on k nodes (one microbatch of b = 96/k sequences of 640 tokens, ZeRO-1):
#   3 passes x (2 P_l b l + 2 l^2 q b + 2 head b l) / F, plus the gradient all-reduce
#   2 (k-1)/k x 2P / 1e11 (level n: the nodes of a block share a rack, wherever it starts):
#     k  FLOPs                 all-reduce (s)     T_k (s)
#     1  17_781_164_605_440    0                  0.1778116460544
#     2   8_890_582_302_720    0.00160694272      0.0905127657472
#     3   5_927_054_868_480    0.0021425902933..  0.0614131389781333
#     4   4_445_291_151_360    0.00241041408      0.0468633255936
# A colocated rollout wakes and sleeps its weights 2P / 25e9 = W_s = 0.00642777088 s each;
# the samples travel 96 x 640 x 8 B / 1e11 = l_d = 4.9152e-6 s between two blocks.
#
# Every plan is one of two kinds (k_eval = 2; each step a rollout, then a train run):
# (a) The blocks share a GPU. All four runs hold it, one at a time, and the rollout is
#     colocated (wakes and sleeps): makespan >= 2 (G_min + 2 W_s) + 2 T_min with the
#     fastest of each, G_4 and T_4: 2 (0.05286188285952 + 0.01285554176)
#     + 2 x 0.0468633255936 = 0.22516150042624 s. Both on the whole rack at staleness 1
#     reach it (no refit lies within two steps: rollout t waits for train t-2).
# (b) Disjoint blocks of k_g + k_t <= 4 nodes. Train 0 waits for rollout 0 and the
#     transfer, train 1 for train 0 and for rollout 1, which follows rollout 0 on its GPUs:
#     makespan >= G + l_d + T + max(G, T). For (k_g, k_t) = (1, 3) that is 2 G_1 + l_d + T_3
#     = 0.13056885129216 + 0.0000049152 + 0.0614131389781333 = 0.1919869054702933 s, which
#     staleness 1 reaches (rollout 1 runs right after rollout 0); (2, 2) gives
#     G_2 + l_d + 2 T_2 = 0.23803317 s, and every k_t <= 2 at least that much (T_1 > 2 T_2).
# With node_blocks any, (b) at (1, 3) is the optimum: 0.19198690547029 s (one rollout
# node, three training nodes; staleness 0 would make rollout 1 wait for train 0). With
# node_blocks aligned no block holds three nodes, (b) gives at least 0.23803317 s, so
# (a) is the optimum: 0.22516150042624 s, 14.7 % slower.

HAND_REL = 1e-12
G = {1: 0.06528442564608, 2: 0.05700273045504, 3: 0.05424216539136, 4: 0.05286188285952}
T = {1: 0.1778116460544, 2: 0.0905127657472, 3: 0.0614131389781333, 4: 0.0468633255936}
SWITCH = 0.00642777088
LAG = 4.9152e-6
#: The optimum over runs of nodes, (b) at (1, 3).
RUNS_OPTIMUM = 2 * G[1] + LAG + T[3]
#: The optimum over aligned blocks, (a) on the whole rack.
ALIGNED_OPTIMUM = 2 * (G[4] + 2 * SWITCH) + 2 * T[4]
#: The backends' simulated makespans agree to float rounding (they simulate the same plans).
REL = 1e-9


def document(node_blocks: str = "any", **placement) -> dict:
    """The instance as a YAML document, with ``placement.node_blocks`` and other keys set."""
    data = copy.deepcopy(read_yaml_file(INSTANCE))
    data["placement"].update(node_blocks=node_blocks, **placement)
    return data


@functools.cache
def problem(node_blocks: str = "any") -> Problem:
    """The instance's problem with ``placement.node_blocks`` set."""
    return Problem.from_instance(parse_instance(document(node_blocks), name="runs"))


@functools.cache
def solved(backend: str, node_blocks: str) -> Result:
    """A backend's OPTIMAL result ("oracle", "cpsat" or "milp")."""
    module = {"oracle": exhaustive, "cpsat": cpsat, "milp": milp}[backend]
    result = module.solve(problem(node_blocks), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    return result


def test_the_hand_derived_figures():
    """The two optima are the figures of the derivation."""
    assert abs(RUNS_OPTIMUM - 0.1919869054702933) < 1e-15
    assert abs(ALIGNED_OPTIMUM - 0.22516150042624) < 1e-15
    assert G[2] + LAG + 2 * T[2] > ALIGNED_OPTIMUM > RUNS_OPTIMUM


@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
def test_each_shape_takes_its_hand_derived_times(nodes):
    """One candidate per (vertex, shape), dp = nodes, at the hand-derived G_k and T_k; the
    colocated rollout's wake and sleep and the sample transfer are W_s and l_d."""
    directory = problem().directory
    rollout, train = (directory.options[v][(1, nodes, 1)] for v in (0, 1))
    assert len(rollout) == len(train) == 1
    assert rollout[0].strategy.dp == train[0].strategy.dp == nodes
    assert rollout[0].time == pytest.approx(G[nodes], rel=HAND_REL)
    assert train[0].time == pytest.approx(T[nodes], rel=HAND_REL)
    assert problem().simulator.switch(0, rollout[0].strategy) == pytest.approx(
        (SWITCH, SWITCH), rel=HAND_REL
    )
    assert directory.cost.data_lag(False, "n") == pytest.approx(LAG, rel=HAND_REL)


@pytest.mark.parametrize(
    ("node_blocks", "expected"), [("any", RUNS_OPTIMUM), ("aligned", ALIGNED_OPTIMUM)]
)
def test_the_oracle_finds_the_hand_derived_optimum(node_blocks, expected):
    """Runs of nodes: rollout on one node, training on the three others, staleness 1.
    Aligned blocks: both on the whole rack."""
    result = solved("oracle", node_blocks)
    assert result.makespan == pytest.approx(expected, rel=HAND_REL)
    rollout, train = (p.block for p in result.plan.placements)
    if node_blocks == "any":
        assert (rollout.extent, train.extent) == ((1, 1, 1), (1, 3, 1))
        assert not rollout.intersects(train)
        assert result.plan.staleness_map == {"actor": 1}
    else:
        assert rollout.extent == train.extent == (1, 4, 1)


@pytest.mark.parametrize("node_blocks", ["any", "aligned"])
@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_prove_the_oracle_optimum(backend, node_blocks):
    """OPTIMAL at the oracle's makespan, with a bound no higher, symmetry breaking on."""
    result, oracle = solved(backend, node_blocks), solved("oracle", node_blocks)
    assert result.makespan == pytest.approx(oracle.makespan, rel=REL)
    assert result.bound <= oracle.score * (1 + 1e-12)
    assert result.stats["symmetry_breaking"] is True


def test_the_local_search_reaches_a_three_node_block():
    """From the baselines (both vertices on the whole rack) the moves reach the optimum."""
    result = local.solve(problem(), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.makespan == pytest.approx(RUNS_OPTIMUM, rel=REL)
    assert result.plan.placements[1].block.extent == (1, 3, 1)


def _plan(rollout: tuple, train: tuple, staleness: int = 1) -> Plan:
    """The plan with the two vertices on blocks (origin, extent), at their one candidate."""
    directory = problem().directory
    placements = []
    for vertex, (origin, extent) in enumerate((rollout, train)):
        block = directory.cluster.block_index[(origin, extent)]
        placements.append(Placement(block, directory.options[vertex][extent][0].strategy))
    return Plan(tuple(placements), (("actor", staleness),))


def test_the_reflected_optimum_simulates_the_same():
    """Rollout on node 3 and training on nodes 0-2 (the reflection n -> 3 - n)."""
    plan = _plan(((0, 3, 0), (1, 1, 1)), ((0, 0, 0), (1, 3, 1)))
    assert problem().simulator.evaluate(plan).makespan == pytest.approx(RUNS_OPTIMUM, rel=REL)


def test_blocks_overlapping_in_part_share_their_common_gpus():
    """Rollout on nodes 0-2 and training on nodes 1-3 share nodes 1 and 2: the rollout is
    colocated and the four runs go one after another, 2 (G_3 + 2 W_s) + 2 T_3."""
    simulator = problem().simulator
    plan = _plan(((0, 0, 0), (1, 3, 1)), ((0, 1, 0), (1, 3, 1)))
    assert simulator.colocated(plan) == (True, False)
    expected = 2 * (G[3] + 2 * SWITCH) + 2 * T[3]
    assert simulator.evaluate(plan).makespan == pytest.approx(expected, rel=REL)
    trace = simulator.simulate(plan)
    spans = sorted(trace.run_spans().values())
    assert all(a[1] <= b[0] + 1e-12 for a, b in itertools.pairwise(spans))


def test_memory_of_blocks_overlapping_in_part_counts_both_vertices():
    """At gpu_memory_utilization 1 the engine takes all 24 GB: alone on nodes 0-2 it fits,
    training alone on nodes 1-3 fits, but on nodes 1 and 2 the training states (8P bytes at
    dp 3) come on top: the overflow is found though no placed block holds both."""
    data = document("any", gpu_memory_utilization=[1.0])
    full = Problem.from_instance(parse_instance(data, name="full"))
    directory, simulator = full.directory, full.simulator
    placements = []
    for vertex, origin in enumerate(((0, 0, 0), (0, 1, 0))):
        block = directory.cluster.block_index[(origin, (1, 3, 1))]
        placements.append(Placement(block, directory.options[vertex][(1, 3, 1)][0].strategy))
    plan = Plan(tuple(placements), (("actor", 1),))
    states = directory.options[1][(1, 3, 1)][0].resident
    assert states == pytest.approx(8 * 80_347_136, rel=HAND_REL)  # 4P + 12P / 3
    peaks = simulator.peak_memory(plan)
    assert peaks[0] == pytest.approx(24e9, rel=1e-12)  # the engine alone: it fits
    assert peaks[3] < 24e9  # training alone fits
    assert simulator.gpu_violation(plan) == pytest.approx(states, rel=1e-9)
    assert simulator.gpu_violation(plan) == pytest.approx(max(peaks) - 24e9, rel=1e-9)


def test_a_plan_file_with_a_three_node_block_loads_simulates_and_exports(cli, tmp_path):
    """plan.json round-trips the block; simulate and export-config accept it."""
    directory = problem().directory
    plan = solved("oracle", "any").plan
    data = plan_to_json(plan, directory)
    assert data["vertices"]["actor.train"]["block"] == {"origin": [0, 1, 0], "extent": [1, 3, 1]}
    assert plan_from_json(json.loads(json.dumps(data)), directory) == plan
    path = tmp_path / "plan.json"
    data.pop("instance")
    path.write_text(json.dumps(data), encoding="utf-8")
    code, out, _ = cli("simulate", INSTANCE, path, "--trace", tmp_path / "trace.json")
    assert code == 0 and "0.0960" in out
    trace = json.loads((tmp_path / "trace.json").read_text(encoding="utf-8"))
    train = [e for e in trace["events"] if e["vertex"] == "actor.train" and e["kind"] == "compute"]
    assert {tuple(e["gpus"]) for e in train} == {(1, 2, 3)}
    code, out, _ = cli("export-config", path, "--framework", "verl", "--instance", INSTANCE)
    assert code == 0 and "trainer.nnodes=3" in out
    code, out, _ = cli("export-config", path, "--framework", "slime", "--instance", INSTANCE)
    assert code == 0 and "--actor-num-nodes 3" in out


def test_an_aligned_plan_space_refuses_the_three_node_block():
    """The same plan file is outside the aligned plan space, in one line naming the block."""
    data = plan_to_json(solved("oracle", "any").plan, problem().directory)
    data.pop("instance")
    with pytest.raises(PlanError, match="aligned power-of-two groups of nodes") as caught:
        plan_from_json(data, problem("aligned").directory)
    assert "plan.vertices.actor.train.block" in str(caught.value)


def test_reports_say_which_blocks_share_gpus_and_which_plan_space_is_proven():
    """A group on blocks overlapping in part is not nested, and report.md says so; the
    optimality note names the plan space's node blocks."""
    from rlplan.outputs.report_md import render_report
    from rlplan.outputs.vocabulary import framework_markdown, framework_view

    plan = _plan(((0, 0, 0), (1, 3, 1)), ((0, 1, 0), (1, 3, 1)))
    trace = problem().simulator.simulate(plan)
    (group,) = framework_view(problem(), plan, trace)["colocated"]
    assert group["gpus"] == [0, 1, 2, 3]
    assert (group["same_block"], group["nested"]) == (False, False)
    text = "\n".join(framework_markdown(framework_view(problem(), plan, trace)))
    assert "(blocks overlapping in part)" in text
    for node_blocks, words in (
        ("any", "runs of whole nodes in a rack"),
        ("aligned", "aligned power-of-two groups of nodes in a rack"),
    ):
        result = solved("oracle", node_blocks)
        report = render_report(problem(node_blocks), result, None)
        assert f"over the plan space: blocks of aligned power-of-two GPUs in a node, {words}" in (
            report
        )
