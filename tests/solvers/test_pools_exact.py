"""Two GPU pools: the oracle, CP-SAT and the MILP agree on an optimum derived by hand.

The instance (tests/data/tiny_two_pools_grpo.yaml) has pool ``fast`` (2 GPUs of
400 TFLOP/s and 0.5 TB/s) and pool ``wide`` (2 GPUs of 100 TFLOP/s and 2 TB/s),
joined by a 12.5 GB/s link. Its plan space holds four plans: the rollout and the
training each on either pool (one block of 2 GPUs per pool, one strategy per
vertex). The optimum rolls out on ``wide`` (decoding is memory-bound) and
trains on ``fast`` (training is compute-bound); the derivation is below.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.solvers import cpsat, exhaustive, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status

TWO_POOLS = Path(__file__).resolve().parent.parent / "data" / "tiny_two_pools_grpo.yaml"

# -- The optimum by hand ----------------------------------------------------------------
# Actor: L 2 layers, d 512, f 2048 (gated, c 3), h 64, kv 8, V 4096, untied.
#   P_l = d (d + 2 kv h) + d d + 3 d f = 786_432 + 262_144 + 3_145_728 = 4_194_304
#   head = V d = 2_097_152 (and as many embedding parameters); P = 12_582_912; 2P = 25_165_824 B
# Workload: B K = 16 sequences, S 64, T 512 for every sequence; dp 2 gives a replica n = 8.
# Both pools: GEMMs at peak (gemm_efficiency 1, m_half 0, no non-GEMM time), decode at the
# full bandwidth with no step overhead; PCIe 25e9 B/s and alpha_coll 1e-5 s inside a node,
# host rates 25e9 B/s, the bare-copy sleep and wake; the rule reward R = 16/16 x 1e-3 s.
#
# Rollout G (tp 1, u 0.5: a 11 GB KV pool holds all 8 sequences, so one prefill chunk and
# 8 sequences in flight for all 512 decode rounds):
#   prefill, one chunk of 8 x 64 = 512 tokens: L (2 P_l 512 + 2 S^2 d 8) + 2 head 512
#     = 2 (4_294_967_296 + 33_554_432) + 2_147_483_648 = 10_804_527_104 FLOPs
#   decode round x (context 64 + x) reads W = 2 (L P_l + head) = 20_971_520 B of weights and
#     KV 2 L kv h 2 = 4096 B per token of 8 sequences: every round is memory-bound (its
#     GEMM, <= 186_646_528 FLOPs, takes <= 1.9e-6 s even on wide; the read >= 1.05e-5 s).
#     Sum over x = 1..512: 512 W + 4096 x 8 x sum(64 + x) = 10_737_418_240 + 32_768 x 164_096
#     = 16_114_515_968 B.
#   G_fast = 10_804_527_104 / 400e12 + 16_114_515_968 / 0.5e12 = 0.03225604325376 s
#   G_wide = 10_804_527_104 / 100e12 + 16_114_515_968 / 2e12   = 0.00816530325504 s
# Training T (dp 2, one microbatch of 8 sequences of 576 tokens, 4608 tokens):
#   FLOPs 3 (L (2 P_l 4608 + 2 x 576^2 x 512 x 8) + 2 head 4608) = 3 x 102_072_582_144;
#   the dp gradient all-reduce of 2P: 2 x 1e-5 + 25_165_824 / 25e9 = 0.00102663296 s.
#   T_fast = 306_217_746_432 / 400e12 + 0.00102663296 = 0.00179217732608 s
#   T_wide = 306_217_746_432 / 100e12 + 0.00102663296 = 0.00408881042432 s
# On one pool (colocated) the rollout wakes and sleeps, 2P / 25e9 = 0.00100663296 s each,
# the data edge is free and the refit a device copy 2P / (bandwidth / 2): 1.00663296e-4 s
# on fast, 2.5165824e-5 s on wide. Across pools the data edge (B K 576 x 8 = 73_728 B) takes
# d = 5e-5 + 73_728 / 12.5e9 = 5.589824e-5 s and the refit p = 5e-5 + 2P / 12.5e9
# = 0.00206326592 s.
#
# Staleness 0: each step is rollout, reward, training, and the second rollout waits for
# the first training's refit, so with k_eval 2 the makespan is 2 (G + d + R + T) + p
# (with the wake and sleep in G and d = 0 on one pool):
#   rollout wide, train fast: 2 (0.00816530325504 + 5.589824e-5 + 0.001 + 0.00179217732608)
#                             + 0.00206326592 = 0.02409002356224 s   <- the optimum
#   both on wide:  2 (0.00816530325504 + 0.00201326592 + 0.001 + 0.00408881042432)
#                  + 2.5165824e-5 = 0.03055992502272 s
#   both on fast:  2 (0.03225604325376 + 0.00201326592 + 0.001 + 0.00179217732608)
#                  + 1.00663296e-4 = 0.07422363629568 s
#   rollout fast, train wide: 2 (0.03225604325376 + 5.589824e-5 + 0.001 + 0.00408881042432)
#                             + 0.00206326592 = 0.07686476975616 s
OPTIMUM = 0.02409002356224
#: The hand figures hold to the rounding of the decimal sums above.
HAND = 1e-9
#: The backends report the simulation of their plan, the same plan.
REL = 1e-6


@functools.cache
def problem() -> Problem:
    """The two-pool instance."""
    return Problem.load(str(TWO_POOLS))


@functools.cache
def solved(backend: str) -> Result:
    """The oracle's ("exhaustive"), CP-SAT's or the MILP's result, OPTIMAL."""
    solve = {"exhaustive": exhaustive.solve, "cpsat": cpsat.solve, "milp": milp.solve}[backend]
    result = solve(problem(), SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    return result


def pools_of(result: Result) -> tuple[str, str]:
    """The pools of the rollout and of the training in ``result``'s plan."""
    cluster = problem().directory.cluster
    generate, train = result.plan.placements
    return cluster.pool_name(generate.block), cluster.pool_name(train.block)


def test_the_oracle_finds_the_hand_optimum_on_two_pools():
    result = solved("exhaustive")
    assert pools_of(result) == ("wide", "fast")
    assert result.makespan == pytest.approx(OPTIMUM, rel=HAND)


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_prove_the_two_pool_optimum(backend):
    """OPTIMAL, the oracle's plan and makespan, and a bound no higher than it."""
    result = solved(backend)
    assert pools_of(result) == ("wide", "fast")
    assert result.makespan == pytest.approx(solved("exhaustive").makespan, rel=REL)
    assert result.bound <= OPTIMUM * (1 + 1e-9)


def test_the_hand_terms_are_the_directory_s():
    """G and T per pool as derived above: each pool prices its own candidates."""
    directory = problem().directory
    times = {
        (vertex, directory.cluster.names[block.pool]): directory.options[vertex][block.extent][
            0
        ].time
        for vertex in (0, 1)
        for block in directory.cluster.blocks
    }
    assert times[(0, "fast")] == pytest.approx(0.03225604325376, rel=HAND)
    assert times[(0, "wide")] == pytest.approx(0.00816530325504, rel=HAND)
    assert times[(1, "fast")] == pytest.approx(0.00179217732608, rel=HAND)
    assert times[(1, "wide")] == pytest.approx(0.00408881042432, rel=HAND)
