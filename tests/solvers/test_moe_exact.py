"""The exact backends need no change for expert parallelism: ep, etp and cp are candidate
attributes, so the oracle, CP-SAT and the MILP agree on a tiny MoE instance.

The instances (tests/rpeg/moe_instances.py): a 4-expert, top-2 actor on 2 GPUs, ep in
{1, 2, 4}, etp in {1, 2}, cp in {1, 2}, and its narrow variant (15 heads: tp 1
only). The backends give the same optimum, and a worse one when
placement.expert_parallel is [1]; on the narrow instance the gap between the two is
derived by hand from the cost model's formulas (the comment above ``DELTA``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from rlplan.solvers import cpsat, exhaustive, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Result, Status
from tests.rpeg.moe_instances import tiny_moe_problem

#: Relative agreement of the backends' simulated makespans: each reports the simulation
#: of its plan, and the optimum plan is the same one.
REL = 1e-6


@functools.cache
def oracle(expert_parallel: tuple[int, ...] = (1, 2, 4), narrow: bool = False) -> Result:
    """The exhaustive oracle's result on the tiny MoE instance (or its narrow variant)."""
    problem = tiny_moe_problem(expert_parallel, narrow)
    result = exhaustive.solve(problem, SolveOptions(time_limit=120))
    assert result.status is Status.OPTIMAL, result.message
    return result


@functools.cache
def exact(
    backend: str, expert_parallel: tuple[int, ...] = (1, 2, 4), narrow: bool = False
) -> Result:
    """CP-SAT's (``backend`` "cpsat") or the MILP's ("milp") result, OPTIMAL."""
    problem = tiny_moe_problem(expert_parallel, narrow)
    solve = {"cpsat": cpsat.solve, "milp": milp.solve}[backend]
    result = solve(problem, SolveOptions(time_limit=60, threads=1, seed=0))
    assert result.status is Status.OPTIMAL, result.message
    return result


@pytest.mark.parametrize("narrow", [False, True], ids=["tiny", "narrow"])
@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_prove_the_oracle_optimum_with_experts(backend, narrow):
    """OPTIMAL, the oracle's makespan within 1e-6, and a bound no higher than it."""
    result = exact(backend, narrow=narrow)
    assert result.makespan == pytest.approx(oracle(narrow=narrow).makespan, rel=REL)
    assert result.bound <= oracle(narrow=narrow).score * (1 + 1e-12)


def test_the_optimum_lies_in_the_directory_which_offers_expert_layouts():
    """The oracle's plan lies in the directory (ep, etp and cp among its candidates),
    which offers ep 2 and etp 2 somewhere: the exact backends see those candidates."""
    directory = tiny_moe_problem().directory
    for vertex, placement in enumerate(oracle().plan.placements):
        shape = placement.block.extent
        assert placement.strategy in {c.strategy for c in directory.options[vertex][shape]}
    kept = [c.strategy for options in directory.options for cs in options.values() for c in cs]
    assert any(s.ep == 2 for s in kept) and any(s.etp == 2 for s in kept)


def test_expert_parallelism_pays_on_the_narrow_moe():
    """The narrow actor's 15 heads admit tp 1 only, so on 2 GPUs only ep splits the
    experts. With ep free the optimum rolls out at dp 2 ep 2 (each GPU holds and reads
    2 of the 4 experts in every decode step), and is better than the optimum with
    placement.expert_parallel [1] (each GPU reads all 4)."""
    free, single = oracle(narrow=True), oracle((1,), narrow=True)
    assert free.score < single.score * (1 - 1e-3)
    generate = free.plan.placements[0].strategy
    assert (generate.dp, generate.tp, generate.ep) == (2, 1, 2)
    assert all(p.strategy.ep == 1 for p in single.plan.placements)


# -- The narrow optimum by hand -------------------------------------------------------
# The two narrow optima (oracle((1, 2, 4), True) and oracle((1,), True)) are the same
# plan but for actor.generate: dp 2 tp 1 u 0.5 s16 on both GPUs, ep 2 against ep 1.
# actor.infer and reference.infer on GPU 0 and actor.train (dp 2) on both are equal.
#
# Actor (tests/rpeg/moe_instances.py NARROW): L 8 MoE layers, d 960, 15 heads of h 64
# (q 960), kv 5, V 32000, E 4 experts of f_e 2816, k 2, gated (c 3), no shared expert.
#   attention d(q + 2 kv h) + q d = 960 x 1600 + 921_600    =   2_457_600
#   + router d E = 3_840: dense part of an MoE layer P_nr  =   2_461_440
#   one expert P_e = c d f_e = 3 x 960 x 2816                =   8_110_080
#   head V d = 32000 x 960                                   =  30_720_000
#   stage dense part D = L P_nr + head                       =  50_411_520
#   routed L E P_e = 8 x 4 x 8_110_080                       = 259_522_560
#   total P = L (P_nr + E P_e) + embedding + head            = 340_654_080
# Weight shard per GPU (tp 1): ep 1 every expert, 2P = 681_308_160 B; ep 2 half of them,
# 2(P - routed) + 2 routed / 2 = 162_263_040 + 259_522_560 = 421_785_600 B.
#
# Hardware (instances/tiny_rule_grpo_2gpu.yaml): F 165e12, gemm_efficiency 0.8,
# gemm_m_half 5, non_gemm_ratio 0.7 (non_gemm_constant and _scaling 0 by default),
# decode memory rate 1.008e12 x decode_bw_eff 0.15 = 1.512e11 B/s, decode_step_overhead
# 4e-3 s (CUDA graphs), PCIe alpha 1e-5 s and 25e9 B/s, host rates 25e9 B/s (level-1
# sleep at the bare copy), moe_imbalance 1.18 (the default) for ep > 1.
#
# Workload: B K = 16 sequences, S 256, T 512 for every sequence (no gen_quantiles), so
# a replica (dp 2) has n = 8. KV per token 2 L kv h 2 = 10_240 B; live context
# 256 + 512^2 / (2 x 512) = 512; pool 0.5 x 24e9 - shard - 2e9 = 9_318_691_840 B (ep 1),
# 9_578_214_400 B (ep 2): 1_777 (1_826) live sequences, so c = min(16, 8, ...) = 8 = n:
# one prefill chunk, no saturated phase, and the tail runs 8 sequences for all 512
# rounds (ceil(8 P(T > x - 1/2)) = 8 for x = 1..512), round x at context 256 + x.
#
# Decode round (batch 8). Expert group tokens B: 8 (ep 1), 8 x 2 = 16 (ep 2); experts
# touched E(1 - (1 - k/E)^B) = 4(1 - 2^-8) = 3.984375 and 4(1 - 2^-16) = 3.99993896...
# Weights read: 2 D + 2 L touched P_e / e, e = tp = 1 (ep 1) or ep = 2:
#   ep 1: 100_823_040 + 16 x 3.984375 x 8_110_080 = 100_823_040 + 517_017_600 = 617_840_640 B
#   ep 2: 100_823_040 + 8 x 3.99993896 x 8_110_080 = 100_823_040 + 259_518_600 = 360_341_640 B
# (every GPU with ep 1 reads nearly all 4 experts of each layer, with ep 2 its 2).
# KV read 10_240 x 8 x (256 + x) = 81_920 (256 + x) B. Memory time (W + KV) / 1.512e11:
# first round (x = 1) 4.225490e-3 s (ep 1), 2.522454e-3 s (ep 2); last (x = 512)
# 4.502349e-3 s, 2.799313e-3 s. GEMM time stays below 5e-5 s: dense 995_328_000 FLOPs
# at context 768 at 0.8 x 8/13 -> 1.2253e-5 s, routed 2 k P_e L 8 = 2_076_180_480 FLOPs
# at 2 x 8 / 3.984 = 4.02 rows (0.3563) -> 3.531e-5 s (ep 1), 8.0 rows (0.4923) x 1.18
# -> 3.016e-5 s (ep 2): every round is memory-bound. ep 2 adds the all-to-all, per MoE
# layer a dispatch and a combine of 1.18 x 2 x 8 x 960 x 2 = 36_249.6 B, half off the
# GPU: 16 (1e-5 + 0.5 x 36_249.6 / 25e9) = 1.71599872e-4 s per round.
# Sum over x = 1..512: sum(256 + x) = 262_400, KV 81_920 x 262_400 = 21.495808e9 B;
#   ep 1: (512 x 617_840_640 + 21.495808e9) / 1.512e11 = 2.234326823 s + 512 x 4e-3
#         = 4.282326823 s;
#   ep 2: (512 x 360_341_640 + 21.495808e9) / 1.512e11 = 1.362372538 s + 2.048
#         + 512 x 1.71599872e-4 = 0.087859135 s -> 3.498231672 s.
#
# Prefill, one slot of 8 x 256 = 2048 tokens: dense L(2 P_nr 2048 + 2 x 256^2 x 960 x 8)
# + 2 head 2048 = 214_538_649_600 FLOPs at 0.8 x 2048/2053 -> 1.629261e-3 s; routed
# L 2 k P_e 2048 = 531_502_202_880 FLOPs at 2 x 2048 / 4 = 1024 rows (ep 1, 0.8 x
# 1024/1029) -> 4.046193e-3 s, at 2048 rows x 1.18 (ep 2) -> 4.762907e-3 s; times
# 1 + 0.7; ep 2 adds 16 (1e-5 + 0.5 x 1.18 x 2 x 2048 x 960 x 2 / 25e9) = 3.129567e-3 s:
#   ep 1: 1.7 x 5.675454e-3 = 9.648271e-3 s; ep 2: 1.7 x 6.392168e-3 + 3.129567e-3
#   = 1.3996253e-2 s.
# Rollout G = prefill + decode: 4.291975094 s (ep 1), 3.512227925 s (ep 2), 0.779747 s apart.
#
# Colocated with the other vertices, each rollout wakes and sleeps: W = shard / 25e9 =
# 0.0272523264 s (ep 1), 0.016871424 s (ep 2). The refit train -> generate on the same
# block: ep 1 has train's layout, a device copy shard / (1.008e12 / 2) = 1.351802e-3 s;
# ep 2 does not, so a reshard 1e-5 + shard / 25e9 comes first: 1e-5 + 0.016871424 +
# 8.368762e-4 = 1.7718300e-2 s.
#
# Critical path: at staleness 0 each step is wake, rollout, sleep, the 1.0 s rule
# reward (it outlasts the 0.118 s of actor.infer and reference.infer on GPU 0 run
# meanwhile), actor.train (T, equal in both plans), then the refit before the next
# rollout. With k_eval 2: makespan = 2 (2 W + G + 1.0 + T) + C, and
#   delta = 2 (2 x 0.0103809024 + 0.7797471689) + (1.3518019e-3 - 1.7718300e-2)
#         = 2 x 0.8005089737 - 0.0163664983 = 1.584651449 s.
# (10.926551685 s with ep [1], 9.341900236 s with ep free, T = 0.116120194 s.)

#: Hand and cost model agree to float rounding (1e-15 measured): 1e-9 leaves room for
#: the order of the sums. The backends' gap is held to 1e-6 relative, the agreement
#: asked of their makespans (they report the simulation of the same plans).
HAND_REL, DELTA_REL = 1e-9, 1e-6
K_EVAL, RULE_S = 2, 1.0
P_E = 3 * 960 * 2816
DENSE = 8 * (960 * (960 + 2 * 5 * 64) + 960 * 960 + 960 * 4) + 32000 * 960
ROUTED = 8 * 4 * P_E
PARAMS = DENSE + ROUTED + 32000 * 960
SHARD = {1: 2 * PARAMS, 2: 2 * (PARAMS - ROUTED) + ROUTED}
TOUCHED = {1: 4 * (1 - 0.5**8), 2: 4 * (1 - 0.5**16)}
READ = {ep: 2 * DENSE + 2 * 8 * TOUCHED[ep] * P_E / ep for ep in (1, 2)}
DECODE_RATE, KV_ROUND = 1.008e12 * 0.15, 10_240 * 8
ALL_TO_ALL = {1: 0.0, 2: 16 * (1e-5 + 0.5 * 1.18 * 2 * 8 * 960 * 2 / 25e9)}
DECODE = {
    ep: (512 * READ[ep] + KV_ROUND * 262_400) / DECODE_RATE + 512 * (4e-3 + ALL_TO_ALL[ep])
    for ep in (1, 2)
}
_PREFILL_DENSE = (8 * (2 * 2_461_440 * 2048 + 2 * 256**2 * 960 * 8) + 2 * 30_720_000 * 2048) / (
    165e12 * 0.8 * 2048 / 2053
)
_PREFILL_ROUTED = 8 * 2 * 2 * P_E * 2048 / 165e12
PREFILL = {
    1: 1.7 * (_PREFILL_DENSE + _PREFILL_ROUTED / (0.8 * 1024 / 1029)),
    2: 1.7 * (_PREFILL_DENSE + 1.18 * _PREFILL_ROUTED / (0.8 * 2048 / 2053))
    + 16 * (1e-5 + 0.5 * 1.18 * 2 * 2048 * 960 * 2 / 25e9),
}
GENERATE = {ep: PREFILL[ep] + DECODE[ep] for ep in (1, 2)}
WAKE = {ep: SHARD[ep] / 25e9 for ep in (1, 2)}
REFIT = {1: SHARD[1] / 5.04e11, 2: 1e-5 + SHARD[2] / 25e9 + SHARD[2] / 5.04e11}
#: The makespan expert parallelism saves on the narrow instance: 1.584651449 s.
DELTA = K_EVAL * (2 * (WAKE[1] - WAKE[2]) + GENERATE[1] - GENERATE[2]) + REFIT[1] - REFIT[2]


def test_the_narrow_optima_differ_in_the_rollouts_ep_only():
    """The ep-free and ep-[1] optima share every placement but the rollout's ep."""
    free, single = oracle(narrow=True).plan, oracle((1,), narrow=True).plan
    assert free.placements[1:] == single.placements[1:]
    assert free.staleness == single.staleness
    rollout, other = free.placements[0], single.placements[0]
    assert rollout.block == other.block
    assert (rollout.strategy.ep, other.strategy.ep) == (2, 1)
    assert dataclasses.replace(other.strategy, ep=2) == rollout.strategy


@pytest.mark.parametrize("ep", [1, 2])
def test_the_narrow_rollout_takes_its_hand_derived_time(ep):
    """Every decode round is memory-bound at the hand-derived weight reads, 8 sequences
    run, and the rollout takes the hand-derived prefill plus 512 rounds."""
    problem = tiny_moe_problem(narrow=True)
    placement = oracle((1,), narrow=True).plan.placements[0]
    strategy = dataclasses.replace(placement.strategy, ep=ep)
    cost, shape = problem.directory.cost, placement.block.extent
    assert cost.effective_concurrency("actor", strategy) == 8
    levels = cost.cluster.group_levels(shape, 2, 1, 1, 1, ep, 1)
    for x in (1, 512):
        hand = (READ[ep] + KV_ROUND * (256 + x)) / DECODE_RATE + ALL_TO_ALL[ep] + 4e-3
        round_time = cost.decode_round(
            "actor", strategy, np.array([8.0]), np.array([256.0 + x]), levels
        )
        assert float(round_time[0]) == pytest.approx(hand, rel=HAND_REL)
    candidate = problem.directory.candidate(0, shape, strategy)
    assert candidate.time == pytest.approx(GENERATE[ep], rel=HAND_REL)
    assert problem.simulator.switch(0, strategy) == pytest.approx(
        (WAKE[ep], WAKE[ep]), rel=HAND_REL
    )


@pytest.mark.parametrize("backend", ["oracle", "cpsat", "milp"])
def test_expert_parallelism_saves_the_hand_derived_makespan(backend):
    """Each backend's narrow optimum with ep free and with ep [1] is the oracle's, the
    oracle's is 2 (2 W + G + 1.0 + T) + C, and the two lie DELTA = 1.584651 s apart."""
    lists = {2: (1, 2, 4), 1: (1,)}
    solved = {
        ep: oracle(eps, narrow=True) if backend == "oracle" else exact(backend, eps, narrow=True)
        for ep, eps in lists.items()
    }
    problem = tiny_moe_problem(narrow=True)
    assert problem.instance.optimizer.k_eval == K_EVAL
    index = [v.name for v in problem.simulator.template.vertices].index("actor.train")
    placement = oracle(narrow=True).plan.placements[index]
    train = problem.directory.candidate(index, placement.block.extent, placement.strategy)
    for ep, result in solved.items():
        reference = oracle(lists[ep], narrow=True).makespan
        assert result.makespan == pytest.approx(reference, rel=REL)
        chain = K_EVAL * (2 * WAKE[ep] + GENERATE[ep] + RULE_S + train.time) + REFIT[ep]
        assert reference == pytest.approx(chain, rel=HAND_REL)
    gap = solved[1].makespan - solved[2].makespan
    assert gap == pytest.approx(DELTA, rel=DELTA_REL)
    assert abs(DELTA - 1.584651449) < 1e-9  # the figure of the derivation
