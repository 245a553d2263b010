"""The concurrent baseline: its block packing agrees with a plain first-fit scan; its deadline."""

from __future__ import annotations

import itertools
import math

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search import baselines
from rlplan.rpeg.search.baselines import _pack, concurrent_plan
from tests.solvers.conftest import load_problem


def _first_fit(choices: list[tuple[Block, ...]]) -> list[Block] | None:
    # The definition: largest part first, each on its first block free of the placed ones.
    order = sorted(range(len(choices)), key=lambda i: -choices[i][0].size)
    placed: list[Block | None] = [None] * len(choices)
    used: list[Block] = []
    for index in order:
        free = [b for b in choices[index] if not any(b.intersects(o) for o in used)]
        if not free:
            return None
        placed[index] = free[0]
        used.append(free[0])
    return placed  # type: ignore[return-value]


def test_pack_matches_first_fit_on_every_shape_combination():
    # 32 GPUs (1 rack x 4 nodes x 8): every multiset of up to three shapes,
    # with and without a part limited to the blocks of odd index (a pin-like
    # restriction that makes the bisection skip over gaps).
    problem = Problem.from_instance(load_instance("instances/ppo_8b_1x4x8_h100.yaml"))
    cluster = problem.directory.cluster
    shapes = sorted(cluster.shapes)
    checked = 0
    for count in (1, 2, 3):
        for combo in itertools.combinations_with_replacement(shapes, count):
            for restrict in (False, True):
                choices = [cluster.blocks_by_shape[shape] for shape in combo]
                if restrict:
                    choices[0] = choices[0][1::2] or choices[0]
                assert _pack(list(choices)) == _first_fit(list(choices)), combo
                checked += 1
    assert checked > 100


def _repairs(monkeypatch) -> list[int]:
    """Count the memory repairs the baselines run (one per assembled plan)."""
    calls: list[int] = []
    repair = baselines.repair_memory

    def counted(plan, simulator, *args, **kwargs):
        calls.append(1)
        return repair(plan, simulator, *args, **kwargs)

    monkeypatch.setattr(baselines, "repair_memory", counted)
    return calls


def test_a_passed_deadline_stops_the_concurrent_baseline_after_its_first_partition(monkeypatch):
    problem = Problem.from_instance(load_instance("instances/ppo_8b_1x4x8_h100.yaml"))
    calls = _repairs(monkeypatch)
    every = concurrent_plan(problem.directory, problem.simulator)
    tried = len(calls)
    calls.clear()
    first = concurrent_plan(problem.directory, problem.simulator, deadline=-math.inf)
    assert every is not None and first is not None
    # The first partition and the greedy plan it is compared with; the others are skipped.
    assert tried > 3
    assert len(calls) == 2


# -- GPU pools ----------------------------------------------------------------------------
H100_H20 = "instances/grpo_7b_h100_h20_2pools.yaml"


def _pooled() -> Problem:
    return Problem.from_instance(load_instance(H100_H20))


def test_the_concurrent_baseline_gives_each_depth_group_a_pool():
    """On 8 H100 + 8 H20 the rollout goes to the H20 node and the rest to the H100 node.

    The depth groups are {generate}, {actor, reference and reward inference},
    {train}. Partitioning the whole cluster as on one pool ranks each group's
    partitions alone: the rollout's fastest block is the H100 node, which it then
    shares with the training (all but the reward model run there in turn). Giving
    the rollout the H20 node (memory-bound decoding where bandwidth is cheap) lets
    it run beside the H100 work (staleness 1): 113.99 s against 124.26 s.
    """
    problem = _pooled()
    directory, simulator = problem.directory, problem.simulator
    plan = concurrent_plan(directory, simulator)
    names = directory.template.names
    pools = {names[v]: directory.cluster.pool_name(p.block) for v, p in enumerate(plan.placements)}
    assert pools == {
        "actor.generate": "h20",
        "actor.infer": "h100",
        "reference.infer": "h100",
        "reward.infer": "h100",
        "actor.train": "h100",
    }
    depths = directory.template.depths()
    groups = [[v for v in range(len(depths)) if depths[v] == d] for d in range(max(depths) + 1)]
    whole, whole_makespan = baselines._assemble(
        directory,
        simulator,
        [baselines.group_options(group, directory) for group in groups],
        math.inf,
    )
    assert whole is not None
    assert simulator.evaluate(plan).makespan < 0.95 * whole_makespan


def test_pool_assignments_go_by_estimated_time_and_stay_in_their_pool():
    """Every group's blocks lie in its assigned pool; the first assignment has the smallest
    sum of the groups' best estimates, and every assignment of 3 groups to 2 pools is tried."""
    directory = _pooled().directory
    depths = directory.template.depths()
    groups = [[v for v in range(len(depths)) if depths[v] == d] for d in range(max(depths) + 1)]
    assignments = baselines._pool_assignments(directory, groups)
    assert len(assignments) == 2 ** len(groups)
    sums = []
    for ranked in assignments:
        pools = set()
        for options in ranked:
            pools.add(frozenset(b.pool for _, _, part in options for b, _ in part.values()))
        assert all(len(found) == 1 for found in pools)
        sums.append(sum(options[0][0] for options in ranked))
    assert sums == sorted(sums)


def test_one_pool_tries_no_pool_assignment(monkeypatch):
    """A one-type cluster keeps the one-pool rule: no assignment of groups to pools."""

    def refused(*args, **kwargs):
        raise AssertionError("pool assignments on a one-pool cluster")

    monkeypatch.setattr(baselines, "_pool_assignments", refused)
    problem = Problem.from_instance(load_instance("instances/tiny_grpo_4gpu.yaml"))
    assert concurrent_plan(problem.directory, problem.simulator) is not None


def _full_ranking(group, directory):
    """Every (partition, part shapes) of ``group`` that packs, ranked by its estimate and
    the number of parts (ties in enumeration order): the ranking before the early stop."""

    options, seen = [], set()
    for partition in baselines._set_partitions(group):
        for shapes in itertools.product(directory.cluster.shapes, repeat=len(partition)):
            key = tuple(sorted(zip(map(tuple, partition), shapes, strict=True)))
            if key in seen:
                continue
            seen.add(key)
            choices = [
                tuple(
                    b
                    for b in directory.blocks(part[0], shape)
                    if all(directory.allows(v, b) for v in part[1:])
                )
                for part, shape in zip(partition, shapes, strict=True)
            ]
            blocks = baselines._pack(choices) if all(choices) else None
            if blocks is None or any(
                not directory.options[v].get(b.extent)
                for part, b in zip(partition, blocks, strict=True)
                for v in part
            ):
                continue
            slowest = max(
                sum(directory.options[v][b.extent][0].time for v in part)
                for part, b in zip(partition, blocks, strict=True)
            )
            assignment = {
                v: (b, directory.options[v][b.extent][0])
                for part, b in zip(partition, blocks, strict=True)
                for v in part
            }
            options.append((slowest, -len(partition), assignment))
    options.sort(key=lambda option: option[:2])
    return options


@pytest.mark.parametrize("name", ["ppo_8b_1x2x8_h100.yaml", "grpo_7b_h100_h20_2pools.yaml"])
def test_group_options_are_the_first_of_the_full_ranking(name):
    """Ranking by estimate before packing, and packing only until RANKED_LIMIT pack,
    gives the first RANKED_LIMIT partitions of the full ranking (PPO's inference group
    of four vertices: 602 (partition, shapes) pack on 16 GPUs)."""
    problem = load_problem(name)
    directory = problem.directory
    for group in (g for g in baselines.depth_groups(directory) if len(g) > 1):
        full = _full_ranking(group, directory)
        found = baselines.group_options(group, directory)
        assert len(found) == min(len(full), baselines.RANKED_LIMIT)
        assert found == full[: baselines.RANKED_LIMIT]
