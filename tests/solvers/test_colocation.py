"""Colocation is not free: the optimum of tests/data/tiny_grpo_4gpu_slow_host.yaml.

tiny_grpo_4gpu with every host rate at 2 GB/s (its header). Two plans compete:

* colocated (tiny_grpo_4gpu's optimum): every vertex on the 4 GPUs in turn, the
  rollout dp 2 tp 2 (G4 = 2.1840 s), reference.infer and reward.infer dp 4, actor.train
  dp 2 tp 2. The rollout shares its GPUs, so each of its runs wakes and sleeps: its
  shard 2P/tp = 630_095_872 B at 2e9 B/s, 0.31505 s each way; the refit before the
  second rollout is a device copy of the shard, 630_095_872 / (1.008e12 / 2) = 1.25019
  ms. Makespan 2 * (w + G4 + s + R4 + W4 + T4) + refit = 6.1446 s;
* split: the rollout alone on GPUs 0-1 (tp 2, G2 = 2.2610 s, no wake or sleep),
  reference.infer, reward.infer and actor.train dp 2 on GPUs 2-3. Each step waits for
  the data (d = 8e-6 + 98_304 / 25e9 = 11.93 us) and the next rollout for the weights
  over NCCL (p = 8e-6 + 630_095_872 / 25e9 = 25.212 ms): 2 * (G2 + d + R2 + W2 + T2) +
  p = 5.4003 s.

Without wake and sleep (w = s = 0: a host link too fast to matter) the colocated plan
would be the optimum, 2 * 2.4415 + refit = 4.8844 s, far below the split one; with them
the split plan wins.
The exhaustive oracle, CP-SAT and the MILP all find it.
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import yaml

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness, plan_to_json
from rlplan.rpeg.schema.yamlio import loads
from rlplan.rpeg.search.state import SearchState
from rlplan.solvers import cpsat, exhaustive, milp
from rlplan.solvers.options import SolveOptions
from rlplan.solvers.result import Status
from tests.solvers.conftest import ROOT

SLOW_HOST = os.path.join(ROOT, "tests", "data", "tiny_grpo_4gpu_slow_host.yaml")
NAMES = ("actor.generate", "reference.infer", "reward.infer", "actor.train")
#: Bytes and rates of the derivation (module docstring).
SHARD = 630_095_872
HOST_RATE = 2e9
HBM = 1.008e12


def _problem(host_rate: float = HOST_RATE) -> Problem:
    problem = Problem.load(SLOW_HOST)
    if host_rate == HOST_RATE:
        return problem
    instance = problem.instance
    rates = dict.fromkeys(
        (
            "host_bandwidth",
            "host_to_device_pinned",
            "host_to_device_pageable",
            "device_to_host_pinned",
            "device_to_host_pageable",
        ),
        host_rate,
    )
    hardware = dataclasses.replace(instance.hardware, **rates)
    return Problem.from_instance(dataclasses.replace(instance, hardware=hardware))


def _plan(problem: Problem, rows) -> Plan:
    blocks = {(b.start, b.size): b for b in problem.directory.cluster.blocks}
    assert problem.directory.template.names == NAMES
    placements = tuple(Placement(blocks[(start, size)], strategy) for start, size, strategy in rows)
    return Plan(placements, make_staleness({"actor": 0}))


COLOCATED = [
    (0, 4, Strategy(2, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32)),
    (0, 4, Strategy(4, 1, 1, 1)),
    (0, 4, Strategy(4, 1, 1, 1)),
    (0, 4, Strategy(2, 1, 2, 1)),
]
SPLIT = [
    (0, 2, Strategy(1, 1, 2, 1, gpu_memory_utilization=0.2, max_num_seqs=32)),
    (2, 2, Strategy(2, 1, 1, 1)),
    (2, 2, Strategy(2, 1, 1, 1)),
    (2, 2, Strategy(2, 1, 1, 1)),
]


def _times(problem: Problem, plan: Plan) -> list[float]:
    return [candidate.time for candidate in problem.simulator.candidates(plan)]


def test_the_colocated_plan_pays_wake_sleep_and_the_device_refit():
    problem = _problem()
    plan = _plan(problem, COLOCATED)
    generate, reference, reward, train = _times(problem, plan)
    assert generate == pytest.approx(2.1840, abs=5e-5)
    wake = sleep = SHARD / HOST_RATE  # 0.315047936 s
    refit = SHARD / (HBM / 2)  # 1.25019e-3 s
    expected = 2 * (wake + generate + sleep + reference + reward + train) + refit
    assert problem.simulator.evaluate(plan).makespan == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(6.1446, abs=5e-5)
    # The same plan at a host link too fast to matter (1e16 B/s: 63 ns each way): the
    # device refit (1.25 ms) is all that is left.
    free = _problem(1e16)
    assert free.simulator.evaluate(plan).makespan == pytest.approx(
        2 * (generate + reference + reward + train + 2 * SHARD / 1e16) + refit, rel=1e-12
    )


def test_the_split_plan_pays_no_colocation_but_the_transfers():
    problem = _problem()
    plan = _plan(problem, SPLIT)
    assert not any(problem.simulator.colocated(plan))
    generate, reference, reward, train = _times(problem, plan)
    cost = problem.directory.cost
    data = cost.data_lag(False, "g")
    weights = 8e-6 + SHARD / 25e9
    assert data == pytest.approx(8e-6 + 98_304 / 25e9, rel=1e-12)
    # reference.infer and reward.infer wait for the rollout's data (both at d); reward
    # follows reference on GPUs 2-3, actor.train follows reward.
    expected = 2 * (generate + data + reference + reward + train) + weights
    assert problem.simulator.evaluate(plan).makespan == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(5.4003, abs=5e-5)


def test_the_exhaustive_optimum_splits_only_because_colocation_costs():
    """With the colocation costs the oracle's optimum is the split plan; without them
    (a host link too fast to matter) it is the colocated plan, 0.5 s faster."""
    problem = _problem()
    split = problem.simulator.evaluate(_plan(problem, SPLIT)).makespan
    result = exhaustive.solve(problem, SolveOptions(time_limit=60))
    assert result.status is Status.OPTIMAL
    assert result.makespan == pytest.approx(split, rel=1e-12)
    assert not any(problem.simulator.colocated(result.plan))
    free = _problem(1e16)
    colocated = free.simulator.evaluate(_plan(free, COLOCATED)).makespan
    unpriced = exhaustive.solve(free, SolveOptions(time_limit=60))
    assert unpriced.makespan == pytest.approx(colocated, rel=1e-12)
    assert any(free.simulator.colocated(unpriced.plan))
    assert colocated < split - 0.5


@pytest.mark.parametrize("backend", ["cpsat", "milp"])
def test_exact_backends_price_colocation_as_the_simulator(backend):
    """CP-SAT and the MILP prove the split optimum; their objective is the simulated one
    within the rounding tolerance (a colocation term left out of a model would find the
    colocated plan at 4.88 s, or a bound below the optimum)."""
    problem = _problem()
    optimum = problem.simulator.evaluate(_plan(problem, SPLIT)).makespan
    solve = {"cpsat": cpsat.solve, "milp": milp.solve}[backend]
    result = solve(problem, SolveOptions(time_limit=60, threads=2))
    assert result.status is Status.OPTIMAL, result.message
    assert result.makespan == pytest.approx(optimum, rel=1e-4)
    assert result.makespan >= optimum * (1 - 1e-12)
    raw = result.stats.get("cp_bound_s", result.stats.get("milp_bound_s"))
    assert optimum * (1 - 1e-4) <= raw <= optimum * (1 + 1e-12)
    assert not any(problem.simulator.colocated(result.plan))


# -- host memory ------------------------------------------------------------------------


def _small_host(tmp_path, capacity: float) -> str:
    """The slow-host instance with ``capacity`` bytes of host memory per node, as a file."""
    with open(SLOW_HOST, encoding="utf-8") as stream:
        data = loads(stream.read())
    data["hardware"]["host_memory_per_node"] = capacity
    path = tmp_path / "small_host.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def test_host_memory_overflow_is_infeasible_with_a_diagnosis(cli, tmp_path):
    """With 2 GB of host memory per node the colocated plan does not fit: its sleeping
    rollout keeps its shard 630_095_872 B on each of its 4 GPUs, all on node 0:
    4 x 630_095_872 = 2_520_383_488 B > 2e9 B. simulate says so in one line (node, bytes
    needed against available, the vertices holding them) and exits 1."""
    path = _small_host(tmp_path, 2e9)
    problem = Problem.load(path)
    plan = _plan(problem, COLOCATED)
    evaluation = problem.simulator.evaluate(plan)
    assert not evaluation.feasible
    assert evaluation.violation == pytest.approx(2_520_383_488 - 2e9, rel=1e-12)
    # the local search's penalty grows with the host overflow too
    state = SearchState.of(plan, evaluation, problem.simulator.capacity)
    assert state.score > evaluation.score * (1 + 1e-3)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan_to_json(plan, problem.directory)), encoding="utf-8")
    code, out, _ = cli("simulate", path, plan_file)
    assert code == 1
    assert (
        "INFEASIBLE: node 0 overflows host memory: needs 2.52 GB of 2.00 GB (actor.generate)"
        in out.splitlines()
    )
    # the split plan's rollout never sleeps: it holds no host memory and fits
    split = problem.simulator.simulate(_plan(problem, SPLIT))
    assert split.feasible and split.host_memory_bytes == (0.0,)


def test_the_exact_optimum_respects_host_memory(tmp_path):
    """tiny_grpo_4gpu (host link 25 GB/s) with 2 GB of host memory per node: its
    colocated optimum (the rollout sleeping on all 4 GPUs, 2.52 GB of host memory) no
    longer fits, so the optimum moves; the oracle, CP-SAT and the MILP agree on it (a
    host-memory row left out of a model would return the colocated plan)."""
    with open(os.path.join(ROOT, "instances", "tiny_grpo_4gpu.yaml"), encoding="utf-8") as f:
        data = loads(f.read())
    data["hardware"]["host_memory_per_node"] = 2e9
    path = tmp_path / "tight_host.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    problem = Problem.load(str(path))
    unconstrained = _plan(problem, COLOCATED)
    assert problem.simulator.simulate(unconstrained).host_violation_bytes == pytest.approx(
        2_520_383_488 - 2e9, rel=1e-12
    )
    oracle = exhaustive.solve(problem, SolveOptions(time_limit=60))
    assert oracle.status is Status.OPTIMAL
    assert oracle.makespan > problem.simulator.evaluate(unconstrained).makespan
    for solve in (cpsat.solve, milp.solve):
        result = solve(problem, SolveOptions(time_limit=60, threads=2))
        assert result.status is Status.OPTIMAL, result.message
        assert result.makespan == pytest.approx(oracle.makespan, rel=1e-4)
        assert result.makespan >= oracle.makespan * (1 - 1e-12)
        assert problem.simulator.simulate(result.plan).feasible
