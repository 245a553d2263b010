"""Plan-independent lower bounds (docs/cost-model.md, lower bounds)."""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.bounds import lower_bounds
from rlplan.rpeg.model.candidates import CandidateDirectory, strategy_problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import plan_from_json
from rlplan.rpeg.search.sampling import random_plan

TINY_INSTANCES = (
    "tiny_ppo_2gpu.yaml",
    "tiny_ppo_2gpu_sync.yaml",
    "tiny_grpo_2gpu.yaml",
    "tiny_grpo_4gpu.yaml",
    "tiny_dpo_2gpu.yaml",
    "tiny_dpo_4gpu.yaml",
)


@settings(max_examples=300, deadline=None, database=None)
@given(
    name=st.sampled_from(TINY_INSTANCES),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    with_order=st.booleans(),
)
def test_bound_is_below_every_feasible_plan(load_problem, name, seed, with_order):
    """lower_bounds(directory).best <= the simulated makespan of any feasible plan."""
    problem = load_problem(name)
    plan = random_plan(problem.directory, random.Random(seed), with_order=with_order)
    evaluation = problem.simulator.evaluate(plan)
    assume(evaluation.feasible)
    bounds = lower_bounds(problem.directory)
    assert bounds.best <= evaluation.makespan
    assert bounds.compute <= evaluation.makespan
    assert bounds.critical_path <= evaluation.makespan


@pytest.mark.parametrize("name", TINY_INSTANCES)
def test_bound_is_below_the_fastest_single_block_plans(load_problem, name):
    """The bound stays below the best of many random feasible plans (a tighter check)."""
    problem = load_problem(name)
    rng = random.Random(0)
    best = float("inf")
    for _ in range(300):
        evaluation = problem.simulator.evaluate(random_plan(problem.directory, rng))
        if evaluation.feasible:
            best = min(best, evaluation.makespan)
    assert best < float("inf")
    assert lower_bounds(problem.directory).best <= best


def test_critical_path_of_tiny_ppo(frozen_problem):
    """Critical path at the largest staleness: chains of fastest candidates, no lags."""
    directory = frozen_problem("frozen_tiny_ppo_2gpu.yaml").directory
    fastest = [directory.fastest(v).time for v in range(6)]
    g, ref, rew, cri, at, ct = fastest
    # actor sigma candidates {0, 1} -> 1, critic {0} -> 0; k_eval = 2.
    # Step 0: infer_x ends at g + x; actor.train ends at g + max(ref, rew, cri) + at;
    #   critic.train ends at g + max(rew, cri) + ct.
    # Step 1 (actor sigma 1: generate 1 only after generate 0; critic sigma 0: critic.infer 1
    #   after critic.train 0 and critic.infer 0):
    #   gen1 = 2g; ref1 = max(gen1, ref0) + ref; rew1 = max(gen1, rew0) + rew;
    #   cri1 = max(gen1, cri0, ct0) + cri; at1 = max(ref1, rew1, cri1, at0) + at;
    #   ct1 = max(rew1, cri1, ct0) + ct
    ref0, rew0, cri0 = g + ref, g + rew, g + cri
    at0 = max(ref0, rew0, cri0) + at
    ct0 = max(rew0, cri0) + ct
    gen1 = 2 * g
    ref1 = max(gen1, ref0) + ref
    rew1 = max(gen1, rew0) + rew
    cri1 = max(gen1, cri0, ct0) + cri
    at1 = max(ref1, rew1, cri1, at0) + at
    ct1 = max(rew1, cri1, ct0) + ct
    expected = max(at1, ct1)
    assert lower_bounds(directory).critical_path == pytest.approx(expected, rel=1e-12)


def test_compute_bound_of_small_instance(small_instance_data, make_instance):
    """Compute bound = k_eval * total step FLOPs / (peak * GPUs), by hand on the small DPO."""
    directory = CandidateDirectory(make_instance(small_instance_data))
    # per token 2*(L*P_l + V*d) = 2*(2*36864 + 16384) = 180224 FLOP (see test_cost.py)
    # generate: prefill 4*180224 + 2*2*4^2*64 = 724992; decode E[T] = 4 tokens at the
    #   mean context S + E[T]/2 = 6: 4*(180224 + 2*4*64*6) = 733184 -> 1_458_176
    #   (see test_cost.py::test_vertex_flops_of_small_generate)
    # reference.infer: 8*180224 + 2*2*8^2*64 = 1_441_792 + 16_384 = 1_458_176
    # actor.train: 3 * 1_458_176 = 4_374_528
    # total 7_290_880 FLOP; k_eval 1, F 1e12, 1 GPU -> 7.29088e-6 s
    assert lower_bounds(directory).compute == pytest.approx(7.29088e-6, rel=1e-12)


# -- plans outside the plan space --------------------------------------------------------
#
# The frozen tiny PPO instance allows only ``placement.microbatches: [4]``, and a plan's
# micro-batch count must come from that list (docs/plan-space.md). If ``strategy_problem``
# (which ``plan_from_json`` uses to validate a plan file) ignored that list, a plan file
# with microbatches 1 would be accepted, although the "proven" lower bound holds only over
# the plan space. The plan below puts every train and infer vertex on one microbatch of 16
# sequences (dp 2) instead of the plan space's 4 microbatches of 4. (A rollout has no
# microbatches in v2: its concurrency replaces them.)


def _whole(dp, pp, tp, mb):
    return {
        "block": {"origin": [0, 0, 0], "extent": [1, 1, 2]},
        "dp": dp,
        "pp": pp,
        "tp": tp,
        "microbatches": mb,
    }


OUTSIDE_PLAN = {
    "staleness": {"actor": 0, "critic": 0},
    "vertices": {
        "actor.generate": {**_whole(1, 1, 2, 1), "concurrency": 32},
        # mb 1 is not in placement.microbatches [4]
        "reference.infer": _whole(2, 1, 1, 1),
        "reward.infer": _whole(2, 1, 1, 1),
        "critic.infer": _whole(2, 1, 1, 1),
        "actor.train": _whole(2, 1, 1, 1),
        "critic.train": _whole(2, 1, 1, 1),
    },
}


def test_strategy_problem_rejects_microbatches_outside_the_list(frozen_problem):
    """A microbatch count missing from placement.microbatches is outside the plan space."""
    directory = frozen_problem("frozen_tiny_ppo_2gpu.yaml").directory
    assert directory.instance.placement.microbatches == (4,)
    vertex = directory.template.vertices[directory.template.index("actor.train")]
    # dp*pp*tp = 2 = block size, tp 2 divides width 2 and 14 heads, mb 1 <= 32 sequences:
    # only the microbatch list excludes it
    assert strategy_problem(directory.instance, vertex, (1, 1, 2), Strategy(1, 1, 2, 4)) is None
    problem = strategy_problem(directory.instance, vertex, (1, 1, 2), Strategy(1, 1, 2, 1))
    assert problem == "microbatches 1 not among placement.microbatches (4)"


def test_plan_files_cannot_beat_the_lower_bound(frozen_problem):
    """A plan file either is rejected or simulates to at least the proven lower bound."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    try:
        plan = plan_from_json(OUTSIDE_PLAN, problem.directory)
    except PlanError as error:
        assert error.path == "plan.vertices.reference.infer"
        return
    assert problem.simulator.evaluate(plan).makespan >= lower_bounds(problem.directory).best
