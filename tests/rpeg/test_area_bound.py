"""The area-and-path bound (docs/cost-model.md#lower-bounds).

The hand-computed case: a chain A -> B and a vertex C apart, one step, on
2 GPUs. A and B each run in 1 s on both GPUs (2 GPU-s) or in 1.5 s on one
(1.5 GPU-s); C runs in 1 s on one GPU (1 GPU-s). The path is
max(t_A + t_B, t_C) and the area bound (GPU-seconds) / 2:

========  ======  ============================  =======
A, B      path    area                          larger
========  ======  ============================  =======
wide      2.0     (2 + 2 + 1) / 2 = 2.5         2.5
mixed     2.5     (2 + 1.5 + 1) / 2 = 2.25      2.5
narrow    3.0     (1.5 + 1.5 + 1) / 2 = 2.0     3.0
========  ======  ============================  =======

so the bound is 2.5, above both the path alone (2.0, every vertex at its
fastest: the critical-path bound) and the area alone (2.0).
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from rlplan.rpeg.evaluation.area_bound import (
    Choice,
    area_path_bound,
    busy_window_bound,
    vertex_choices,
)
from rlplan.rpeg.evaluation.bounds import lower_bounds
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.search.sampling import random_plan

WIDE, NARROW = Choice(1.0, 2.0, 0), Choice(1.5, 1.5, 0)
CHOICES = ((WIDE, NARROW), (WIDE, NARROW), (Choice(1.0, 1.0, 0),))


def chain_and_apart(times):
    """The path of the hand case: A -> B, and C on its own."""
    return max(times[0] + times[1], times[2])


def test_the_bound_of_the_hand_case():
    assert area_path_bound(CHOICES, chain_and_apart, [2], 1) == pytest.approx(2.5)


def test_each_term_binds_somewhere_in_the_hand_case():
    # Without the area the path alone gives 2.0; without the path the area alone gives 2.0.
    assert area_path_bound(CHOICES, lambda times: 0.0, [2], 1) == pytest.approx(2.0)
    assert area_path_bound(CHOICES, chain_and_apart, [1000], 1) == pytest.approx(2.0)


def test_k_eval_steps_of_area():
    # Two steps of GPU-seconds: wide 2 x 5 / 2 = 5.0, narrow 2 x 4 / 2 = 4.0 (path 3.0).
    assert area_path_bound(CHOICES, chain_and_apart, [2], 2) == pytest.approx(4.0)


def test_each_pool_holds_its_own_area():
    # A and B only in pool 1 (1 GPU), C in pool 0 (1 GPU). Pool 1 holds A's and B's
    # GPU-seconds alone: wide 4.0, mixed 3.5, narrow 3.0 s (paths 2.0, 2.5, 3.0), so
    # the bound is 3.0; over both pools' 2 GPUs together it would be 2.5.
    in_pool_1 = [tuple(dataclasses.replace(c, pool=1) for c in options) for options in CHOICES[:2]]
    pooled = (*in_pool_1, CHOICES[2])
    assert area_path_bound(pooled, chain_and_apart, [1, 1], 1) == pytest.approx(3.0)


def test_a_stopped_search_returns_a_lower_bound():
    exact = area_path_bound(CHOICES, chain_and_apart, [2], 1)
    for limit in range(4):
        stopped = area_path_bound(CHOICES, chain_and_apart, [2], 1, node_limit=limit)
        assert 2.0 <= stopped <= exact


def test_a_vertex_without_a_choice_has_no_bound():
    assert area_path_bound(((), (WIDE,)), max, [2], 1) == float("inf")


def test_choices_are_the_pareto_front_of_the_directory(load_problem):
    problem = load_problem("tiny_grpo_4gpu.yaml")
    for vertex, front in enumerate(vertex_choices(problem.directory)):
        points = {
            (c[0].time, s[0] * s[1] * s[2] * c[0].time)
            for s, c in problem.directory.options[vertex].items()
            if c
        }
        kept = {(c.time, c.area) for c in front}
        assert kept <= points
        for time, area in points:
            dominated = any(t <= time and a <= area and (t, a) != (time, area) for t, a in kept)
            assert (time, area) in kept or dominated


@pytest.mark.parametrize(
    "path",
    [
        "instances/ppo_8b_1x2x8_h100.yaml",
        "instances/grpo_7b_h100_h20_2pools.yaml",
        "tests/data/tiny_grpo_1x2x4_sliced.yaml",
        "tests/data/tiny_two_pools_grpo.yaml",
        "instances/tiny_lag_grpo_2gpu_async.yaml",
    ],
)
def test_no_plan_is_faster_than_the_bound(path):
    """Random plans (memory aside: time does not depend on it) never beat the bound."""
    problem = Problem.load(path)
    bound = lower_bounds(problem.directory).area_path
    rng = random.Random(7)
    for draw in range(200):
        plan = random_plan(problem.directory, rng, with_order=draw % 2 == 1)
        assert problem.simulator.evaluate(plan).makespan >= bound * (1 - 1e-12)


def test_the_bound_is_tighter_than_the_critical_path_at_scale(load_problem):
    # ppo_70b on 256 GPUs: every fastest candidate takes the whole cluster, so
    # running them one after another costs far more than the longest path.
    bounds = load_problem("ppo_70b_4x8x8_h100.yaml").bounds
    assert bounds.area_path > 1.3 * bounds.critical_path
    assert bounds.source == "area_path"


def test_the_steady_state_bound_is_below_every_period(load_problem):
    problem = load_problem("tiny_lag_grpo_2gpu_async.yaml")
    instance = problem.instance
    optimizer = dataclasses.replace(instance.optimizer, objective="steady_state")
    steady = Problem.from_instance(dataclasses.replace(instance, optimizer=optimizer))
    bound = steady.bounds.area_path
    assert bound >= steady.bounds.critical_path
    rng = random.Random(3)
    for _ in range(200):
        plan = random_plan(steady.directory, rng)
        trace = steady.simulator.simulate(plan)
        assert trace.period * instance.k_eval >= bound * (1 - 1e-12)


def test_a_choice_is_kept_beside_a_better_one_of_another_pool():
    # Two independent vertices, each 1 s on pool 0's one GPU (1 GPU-s) or 1 s on 1.5
    # GPUs' worth of pool 1 (1.5 GPU-s): both on pool 0 need 2.0 s, one on each 1.5 s.
    # Dropping pool 1's choice as "dominated" by pool 0's would give 2.0.
    options = (Choice(1.0, 1.0, 0), Choice(1.0, 1.5, 1))
    assert area_path_bound((options, options), max, [1, 1], 1) == pytest.approx(1.5)


def test_the_front_keeps_each_pool_apart(load_problem):
    problem = load_problem("grpo_7b_h100_h20_2pools.yaml")
    pools = [{c.pool for c in front} for front in vertex_choices(problem.directory)]
    assert all(found == {0, 1} for found in pools)


# -- the busy window ------------------------------------------------------------------

#: The hand case of the window: A -> B and A -> C, one step, 2 GPUs. A runs 1 s on one GPU
#: (1 GPU-s), B and C each 1 s on both (2 GPU-s). The path is 2 s (A then B or C) and
#: the area (1 + 2 + 2) / 2 = 2.5 s, but B and C cannot start before A ends (head 1 s)
#: and share the 2 GPUs after it: 1 + (2 + 2) / 2 = 3 s, the makespan of A, B, C in turn.
FORK = ((Choice(1.0, 1.0, 0),), (Choice(1.0, 2.0, 0),), (Choice(1.0, 2.0, 0),))
FORK_EDGES = [(0, 1, 0.0), (0, 2, 0.0)]


def fork_path(times):
    return times[0] + max(times[1], times[2])


def test_the_window_of_the_hand_case():
    window = busy_window_bound(3, 1, FORK_EDGES)
    assert window([1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [0, 0, 0], [2]) == pytest.approx(3.0)
    assert area_path_bound(FORK, fork_path, [2], 1) == pytest.approx(2.5)
    assert area_path_bound(FORK, fork_path, [2], 1, window=window) == pytest.approx(3.0)


def test_the_window_counts_tails_and_delays():
    """The mirror case, B -> A and C -> A: B and C must end A's 1 s before the end, so
    1 + (2 + 2) / 2 = 3 s. With a 0.5 s delay on B -> A and C taking no GPU-seconds,
    B's tail is 1.5 s and B alone binds: 1.5 + 2 / 2 = 2.5 s (B and C from C's 1 s
    tail: 1 + 2 / 2 = 2 s; every run: 3 / 2 = 1.5 s)."""
    mirror = busy_window_bound(3, 1, [(1, 0, 0.0), (2, 0, 0.0)])
    assert mirror([1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [0, 0, 0], [2]) == pytest.approx(3.0)
    delayed = busy_window_bound(3, 1, [(1, 0, 0.5), (2, 0, 0.0)])
    assert delayed([1.0, 1.0, 1.0], [1.0, 2.0, 0.0], [0, 0, 0], [2]) == pytest.approx(2.5)


def test_the_window_of_one_pool_on_its_own_gpus():
    """The fork with B and C in pool 1 (1 GPU) and A in pool 0 (1 GPU): over the cluster
    1 + 4 / 2 = 3 s, over pool 1 alone 1 + 4 / 1 = 5 s."""
    window = busy_window_bound(3, 1, FORK_EDGES)
    assert window([1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [0, 1, 1], [1, 1]) == pytest.approx(5.0)
    # A pool not known (a vertex not chosen yet) counts on the cluster only.
    assert window([1.0, 1.0, 1.0], [1.0, 2.0, 2.0], [0, None, 1], [1, 1]) == pytest.approx(3.0)


def test_the_window_lifts_the_bound_at_scale(load_problem):
    """ppo_70b on 256 GPUs: every run after the first generation waits for it (62 s at
    its fastest) and then shares the cluster, so the window is far above the area."""
    problem = load_problem("ppo_70b_4x8x8_h100.yaml")
    directory = problem.directory
    staleness = {m: 1 for m in directory.template.trained_models}
    from rlplan.rpeg.evaluation.area_bound import path_bound, window_bound

    choices = vertex_choices(directory, problem.simulator.switch)
    path = path_bound(directory.template, 2, staleness)
    plain = area_path_bound(choices, path, [256], 2)
    windowed = area_path_bound(
        choices, path, [256], 2, window=window_bound(directory.template, 2, staleness)
    )
    assert windowed > 1.1 * plain
    assert problem.bounds.area_path == pytest.approx(windowed)


def test_an_engine_on_every_gpu_pays_its_wake_and_sleep(load_problem):
    """ppo_70b on 256 GPUs: a rollout engine on all 256 GPUs shares them with every other
    vertex, so it wakes and sleeps in every plan. Its shard at tp 8, pp 1 is
    2 x 70.55e9 / 8 = 17.638e9 bytes: wake 17.638e9 / (25e9 x 0.43) = 1.6408 s, sleep
    17.638e9 / 2.235e9 = 7.8918 s (level 1, docs/cost-model.md#sleep-and-wake-of-a-
    colocated-rollout-engine), so its 63.954 s candidate takes 73.487 s; the faster
    tp 4 candidate (61.958 s) wakes and sleeps twice as long: 61.958 + 3.2815 + 15.7835
    = 81.02 s. The whole-cluster choice is the least of these, 73.487 s."""
    problem = load_problem("ppo_70b_4x8x8_h100.yaml")
    directory = problem.directory
    (whole,) = [c for s, c in directory.options[0].items() if s[0] * s[1] * s[2] == 256]
    tp8 = next(c for c in whole if c.strategy.tp == 8 and c.strategy.pp == 1)
    shard = directory.cost.weight_shard("actor", tp8.strategy)
    assert shard == pytest.approx(2 * 70.55e9 / 8, rel=1e-3)
    wide = vertex_choices(directory, problem.simulator.switch)[0]
    plain = vertex_choices(directory)[0]
    assert plain[0].time == pytest.approx(whole[0].time)  # 61.958 s, no switch
    assert wide[0].time == pytest.approx(tp8.time + shard / (25e9 * 0.43) + shard / 2.235e9)
    assert wide[0].time == pytest.approx(73.487, abs=1e-3)
    # Blocks of fewer GPUs need not be colocated: their times stay, and what colocation
    # would add is kept beside them (tp 8 on 128 GPUs: 83.43 s, + 1.64 + 7.89 s).
    assert [(c.time, c.area) for c in wide[1:]] == [(c.time, c.area) for c in plain[1:]]
    assert wide[1].extra == pytest.approx(1.6408 + 7.8918, abs=2e-3)


def test_an_engine_beside_a_vertex_on_every_gpu_wakes_and_sleeps():
    """2 GPUs; an engine E (1 s on one GPU, 1 s more when colocated) and a trainer T
    apart, T either on both GPUs (1 s, 2 GPU-s) or on one (2.5 s). T on both shares E's
    GPU, so E takes 2 s: max(path 2, area (2 + 2) / 2 = 2) = 2; T on one: path 2.5.
    The bound is 2 (the optimum is 2.5: T on both GPUs runs after E, 3 s). Without the
    rule T on both would give max(1, (1 + 2) / 2) = 1.5."""
    trainer = (Choice(1.0, 2.0, 0, whole=True), Choice(2.5, 2.5, 0))
    engine = (Choice(1.0, 1.0, 0, extra=1.0),)
    assert area_path_bound((engine, trainer), max, [2], 1) == pytest.approx(2.0)
    assert area_path_bound(((Choice(1.0, 1.0, 0),), trainer), max, [2], 1) == pytest.approx(1.5)


def test_a_choice_on_every_gpu_never_dominates_one_that_forces_nothing():
    whole, part = Choice(1.0, 2.0, 0, whole=True), Choice(1.0, 2.0, 0)
    assert part.dominates(whole) and not whole.dominates(part)
    # Nor does a choice whose colocated time is longer.
    assert not Choice(1.0, 2.0, 0, extra=0.5).dominates(Choice(1.1, 2.2, 0, extra=0.1))
