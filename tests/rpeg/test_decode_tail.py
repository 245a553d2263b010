"""The rollout's decode tail in closed form equals the per-token sum it replaces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.candidates import Strategy
from rlplan.rpeg.schema.instance import load_instance, parse_instance
from rlplan.rpeg.schema.yamlio import read_yaml_file
from tests.solvers.conftest import ROOT


def _per_token(cost, model, strategy, levels, in_flight) -> float:
    # The definition: one decode round per generated length x with
    # ceil(in_flight * P(T > x - 1/2)) sequences active, at context S + x.
    workload = cost.workload
    x = np.arange(1, workload.generation_length + 1, dtype=np.float64)
    active = np.ceil(in_flight * workload.survival(x - 0.5) - 1e-9)
    keep = active > 0
    rounds = cost.decode_round(
        model, strategy, active[keep], workload.context_length + x[keep], levels
    )
    return float(rounds.sum())


INSTANCES = ["ppo_8b_1x2x8_h100.yaml", "grpo_32b_2x4x8_h100.yaml", "dpo_70b_1x4x8_a100.yaml"]


@pytest.mark.parametrize("name", INSTANCES)
def test_closed_form_tail_equals_the_per_token_sum(name):
    problem = Problem.from_instance(load_instance(f"{ROOT}/instances/{name}"))
    cost = problem.directory.cost
    checked = 0
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4):
            for in_flight in (1, 7, 64, 256, 1000):
                for levels in (("g", "g", "g"), ("n", "r", "g")):
                    strategy = Strategy(
                        1, pp, tp, 1, gpu_memory_utilization=0.5, max_num_seqs=in_flight
                    )
                    expected = _per_token(cost, "actor", strategy, levels, in_flight)
                    cost._tails.clear()
                    got = cost._decode_tail("actor", strategy, levels, in_flight)
                    assert got == pytest.approx(expected, rel=1e-10), (tp, pp, in_flight)
                    checked += 1
    assert checked == 120


@settings(max_examples=60, deadline=None)
@given(
    memory_bound=st.booleans(),
    m_half=st.floats(0.0, 500.0),
    in_flight=st.integers(1, 300),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2]),
)
def test_closed_form_tail_where_gemm_and_memory_cross(memory_bound, m_half, in_flight, tp, pp):
    # A bandwidth that puts the GEMM / memory crossing inside the generation, so a
    # step's sum splits where the two lines cross (both directions of the slope).
    data = read_yaml_file(f"{ROOT}/instances/tiny_ppo_2gpu.yaml")
    data["hardware"]["memory_bandwidth"] = 3.0e11 if memory_bound else 3.0e13
    data["hardware"]["gemm_m_half"] = m_half
    problem = Problem.from_instance(parse_instance(data, name="cross"))
    cost = problem.directory.cost
    strategy = Strategy(1, pp, tp, 1, gpu_memory_utilization=0.5, max_num_seqs=in_flight)
    levels = ("g", "g", "g")
    expected = _per_token(cost, "actor", strategy, levels, in_flight)
    got = cost._decode_tail("actor", strategy, levels, in_flight)
    assert got == pytest.approx(expected, rel=1e-10)


@settings(max_examples=80, deadline=None)
@given(
    gemm=st.tuples(st.floats(-5.0, 5.0), st.floats(-0.05, 0.05)),
    memory=st.tuples(st.floats(-5.0, 5.0), st.floats(-0.05, 0.05)),
    low=st.integers(1, 50),
    length=st.integers(0, 200),
    pp=st.sampled_from([1, 2]),
)
def test_run_sums_split_where_any_two_lines_cross(gemm, memory, low, length, pp):
    # Synthetic affine GEMM and memory times (rising, falling or flat, crossing
    # anywhere or nowhere) through the real summation: it must equal the sum of
    # max(GEMM, memory) taken token by token. (Physical instances only ever have
    # memory growing faster with the context, so this covers the other branches.)
    problem = Problem.from_instance(load_instance(f"{ROOT}/instances/tiny_ppo_2gpu.yaml"))
    cost = problem.directory.cost
    context = cost.workload.context_length

    def terms(model, strategy, active, contexts, levels):
        x = np.asarray(contexts, dtype=np.float64) - context
        g = gemm[0] + gemm[1] * x
        m = memory[0] + memory[1] * x
        return g, m, 0.25 * np.ones_like(x), 0.125

    cost._decode_round_terms = terms
    strategy = Strategy(1, pp, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=4)
    high = low + length
    xs = np.arange(low, high + 1, dtype=np.float64)
    expected = float(np.sum(pp * (np.maximum(*terms(0, 0, 0, context + xs, 0)[:2]) + 0.25) + 0.125))
    got = cost._decode_runs_sum(
        "actor",
        strategy,
        ("g", "g", "g"),
        np.array([4.0]),
        np.array([float(low)]),
        np.array([float(high)]),
    )
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)
