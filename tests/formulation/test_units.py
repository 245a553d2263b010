"""Maximal GPU units: the fast dominance search equals the all-pairs definition."""

from __future__ import annotations

import pytest

from rlplan.compare.pareto import plan_points
from rlplan.formulation import build_formulation
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.schema.instance import load_instance, parse_instance


def _all_pairs(f, vertices):
    # The definition: a unit is dropped when another unit's covering blocks
    # include its own for every vertex (one unit kept per identical signature).
    signatures = {}
    for unit in f.gpu_units:
        signature = tuple(frozenset(f.covering_blocks(v, unit)) for v in vertices)
        if any(signature) and signature not in signatures:
            signatures[signature] = unit
    items = list(signatures.items())
    return tuple(
        unit
        for signature, unit in items
        if not any(
            other != signature and all(a <= b for a, b in zip(signature, other, strict=True))
            for other, _ in items
        )
    )


def _problems():
    yield Problem.from_instance(load_instance("instances/ppo_8b_1x2x8_h100.yaml"))
    yield Problem.from_instance(load_instance("tests/data/tiny_grpo_2x2gpu.yaml"))
    # 64 GPUs (4 racks x 2 nodes x 8), as the Pareto runner shapes them.
    point = plan_points("instances/ppo_8b_1x2x8_h100.yaml", [64], None)[0]
    import yaml

    yield Problem.from_instance(parse_instance(yaml.safe_load(point.variant.text), name="p64"))


@pytest.mark.parametrize("problem", list(_problems()), ids=["16", "2x2", "64"])
def test_maximal_units_equal_the_all_pairs_definition(problem):
    f = build_formulation(problem, 100.0, prune=False)
    everyone = tuple(range(f.num_vertices))
    for vertices in (everyone, (0,), (0, 1), everyone[2:]):
        assert f.maximal_units(vertices) == _all_pairs(f, vertices)
