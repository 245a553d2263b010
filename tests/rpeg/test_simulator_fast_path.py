"""The simulator's fast path against the plain per-GPU rules (docs/simulator.md).

``Simulator.evaluate`` keeps one GPU-free time per vertex over the vertices
whose blocks share its GPUs (``Occupancy.cover``), checks memory once per
distinct placed block, skips the per-node host terms under an upper bound and
looks up what depends on the staleness alone. Here each number is recomputed
the plain way (a free time per GPU, a peak per GPU, the terms of every node)
on random plans, and must be the same to the bit.
"""

from __future__ import annotations

import dataclasses
import functools
import random

import pytest

from rlplan.rpeg.evaluation import host_memory
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.search.sampling import random_plan
from rlplan.rpeg.templates import Kind
from tests.rpeg.conftest import INSTANCES

#: The mixture-of-experts instance, a dense PPO one, an AC-share one (plans of
#: both templates) and a small GRPO one.
NAMES = (
    "published/nemo_rl_grpo_qwen3_30b_a3b_4x8_h100.yaml",
    "ppo_8b_1x2x8_h100.yaml",
    "tiny_ppo_2gpu_ac.yaml",
    "tiny_grpo_4gpu.yaml",
)
#: Host memory per node of the tight variant of the MoE instance: about half of
#: its random plans overflow it (their fullest node holds 0 to 730 GB).
TIGHT_HOST = 200e9
PLANS = 300


@functools.cache
def _tight_simulator() -> Simulator:
    """The MoE instance with :data:`TIGHT_HOST` bytes of host memory per node."""
    instance = Problem.load(str(INSTANCES / NAMES[0])).instance
    hardware = dataclasses.replace(instance.hardware, host_memory_per_node=TIGHT_HOST)
    return Simulator(CandidateDirectory(dataclasses.replace(instance, hardware=hardware)))


def _plans(simulator: Simulator, count: int = PLANS) -> list:
    """Random plans of every template of the simulator, every other one with an order."""
    directory = simulator.directory
    directories = [directory]
    if directory.instance.ac_share:
        directories.append(directory.variant(not directory.fused))
    return [
        random_plan(directories[seed % len(directories)], random.Random(seed), seed % 2 == 1)
        for seed in range(count)
    ]


def _plain_schedule(simulator: Simulator, plan) -> tuple[list[float], list[int]]:
    """End of every run and the placing order, with a free time per GPU (docs/simulator.md)."""
    simulator = simulator.for_plan(plan)
    durations, lags = simulator.durations(plan), simulator.lags(plan)
    preds, succs, indegree = simulator.graph(plan.staleness)
    count = simulator.num_vertices
    free = [0.0] * simulator.cluster.num_gpus
    end = [0.0] * simulator.num_runs

    def place(run: int) -> None:
        block = plan.placements[run % count].block
        ready = max((end[p] + (lags[e] if e >= 0 else 0.0) for p, e in preds[run]), default=0.0)
        begin = max(ready, max(free[block.start : block.end]))
        end[run] = begin + durations[run % count]
        free[block.start : block.end] = [end[run]] * block.size

    if plan.order is not None:
        sequence = [step * count + vertex for vertex, step in plan.order]
        for run in sequence:
            place(run)
        return end, sequence
    remaining, ready, placed = list(indegree), [r for r, d in enumerate(indegree) if d == 0], []

    def earliest(run: int) -> tuple[float, int]:
        block = plan.placements[run % count].block
        arrival = max((end[p] + (lags[e] if e >= 0 else 0.0) for p, e in preds[run]), default=0.0)
        return max(arrival, max(free[block.start : block.end])), run

    while ready:
        run = min(ready, key=earliest)
        ready.remove(run)
        place(run)
        placed.append(run)
        for succ in succs[run]:
            remaining[succ] -= 1
            if remaining[succ] == 0:
                ready.append(succ)
    return end, placed


def _plain_violation(simulator: Simulator, plan) -> float:
    """Worst per-GPU overflow from every GPU's peak, plus the worst node's host overflow."""
    simulator = simulator.for_plan(plan)
    gpu = max(0.0, max(simulator.peak_memory(plan)) - simulator.capacity)
    terms = simulator.host_terms(plan, simulator.candidates(plan))
    return gpu + host_memory.worst_overflow(terms, simulator.host_capacities)


def _simulators() -> list:
    return [
        *(pytest.param(name, id=name.rsplit("/", 1)[-1]) for name in NAMES),
        pytest.param("tight-host", id="moe-tight-host"),
    ]


def _simulator(load_problem, name: str) -> Simulator:
    return _tight_simulator() if name == "tight-host" else load_problem(name).simulator


@pytest.mark.parametrize("name", _simulators())
def test_evaluate_equals_the_plain_rules_bit_for_bit(load_problem, name):
    """Makespan, placing order, memory violation and factor of ``evaluate`` are the plain
    computation's, exactly (no tolerance: the fast path must not move any number)."""
    simulator = _simulator(load_problem, name)
    for plan in _plans(simulator):
        evaluation = simulator.evaluate(plan)
        end, placed = _plain_schedule(simulator, plan)
        assert evaluation.makespan == max(end), plan
        assert evaluation.order == tuple(placed), plan
        assert evaluation.violation == _plain_violation(simulator, plan), plan
        owner = simulator.for_plan(plan)
        stale = any(value > 0 for _, value in plan.staleness)
        assert evaluation.factor == (owner.stale_factor if stale else owner.factor), plan


@pytest.mark.parametrize("name", _simulators())
def test_simulate_schedules_as_the_plain_rules(load_problem, name):
    """Every run of the trace ends where the per-GPU schedule ends it."""
    simulator = _simulator(load_problem, name)
    for plan in _plans(simulator, PLANS // 3):
        end, _ = _plain_schedule(simulator, plan)
        trace = simulator.simulate(plan)
        count = simulator.for_plan(plan).num_vertices
        names = simulator.for_plan(plan).template.names
        spans = trace.run_spans()
        assert [spans[names[run % count], run // count][1] for run in range(len(end))] == end
        assert trace.makespan == max(end)


def test_the_tight_host_variant_takes_both_sides_of_the_host_bound():
    """The host bound decides some plans and the per-node terms others, some overflowing:
    the bit-for-bit test above covers both ways."""
    simulator = _tight_simulator()
    gpus_per_node = simulator.cluster.gpus_per_node
    bounded = overflowing = decided = 0
    for plan in _plans(simulator):
        candidates = simulator.candidates(plan)
        hosts = [c.host for c in candidates]
        colocated = simulator.colocated(plan)
        for vertex, vertex_spec in enumerate(simulator.template.vertices):
            if vertex_spec.kind is Kind.GENERATE and not colocated[vertex]:
                hosts[vertex] = 0.0  # an engine alone on its GPUs never sleeps
        bound = sum(
            host * min(placement.block.size, gpus_per_node)
            for host, placement in zip(hosts, plan.placements, strict=True)
        )
        terms = simulator.host_terms(plan, candidates, colocated)
        worst = host_memory.worst_overflow(terms, simulator.host_capacities)
        decided += bound <= simulator.host_capacity
        bounded += bound > simulator.host_capacity and worst == 0.0
        overflowing += worst > 0.0
    assert decided and bounded and overflowing
