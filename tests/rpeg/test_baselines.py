"""The concurrent baseline: its block packing agrees with a plain first-fit scan; its deadline."""

from __future__ import annotations

import itertools
import math

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.schema.instance import load_instance
from rlplan.rpeg.search import baselines
from rlplan.rpeg.search.baselines import _pack, concurrent_plan


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
