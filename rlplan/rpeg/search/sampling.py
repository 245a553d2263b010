"""Random plans of the plan space (for benchmarks, property tests and restarts)."""

from __future__ import annotations

import random

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.templates import unroll


def random_plan(
    directory: CandidateDirectory, rng: random.Random, with_order: bool = False
) -> Plan:
    """A uniformly drawn (block, candidate) per vertex and staleness per trained model.

    The plan respects every per-vertex rule of the plan space (blocks,
    strategies, memory of the vertex alone) but may overflow memory when
    vertices share GPUs. With ``with_order`` a random topological order is
    drawn as well.
    """
    placements = []
    for vertex, per_shape in enumerate(directory.options):
        shape = rng.choice(sorted(per_shape))
        candidate = rng.choice(per_shape[shape])
        placements.append(
            Placement(rng.choice(directory.blocks(vertex, shape)), candidate.strategy)
        )
    choices = directory.instance.optimizer.staleness_candidates
    staleness = make_staleness(
        {model: rng.choice(choices[model]) for model in directory.template.trained_models}
    )
    plan = Plan(tuple(placements), staleness)
    if with_order:
        plan = plan.with_order(random_topological_order(directory, plan, rng))
    return plan


def random_topological_order(
    directory: CandidateDirectory, plan: Plan, rng: random.Random
) -> tuple[tuple[int, int], ...]:
    """A random topological order of the plan's runs (Kahn's algorithm, random picks)."""

    count = len(directory.template.vertices)
    runs = count * directory.instance.k_eval
    edges = unroll(directory.template, directory.instance.k_eval, plan.staleness_map)
    indegree = [0] * runs
    successors: list[list[int]] = [[] for _ in range(runs)]
    for edge in edges:
        indegree[edge.dst] += 1
        successors[edge.src].append(edge.dst)
    ready = [run for run in range(runs) if indegree[run] == 0]
    order = []
    while ready:
        run = ready.pop(rng.randrange(len(ready)))
        order.append((run % count, run // count))
        for succ in successors[run]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                ready.append(succ)
    return tuple(order)
