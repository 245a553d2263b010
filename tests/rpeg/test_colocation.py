"""Colocation costs (docs/cost-model.md#colocation) against hand computations.

The small DPO instance of tests/rpeg/conftest.py (P = 106_496 parameters, one GPU,
HBM 1e9 B/s; see tests/rpeg/test_cost_v2.py) with four distinct host rates, so that
a transfer priced at the wrong one shows:

    host-to-device pinned 4e9, device-to-host pinned 2e9,
    host-to-device pageable 1e9, device-to-host pageable 5e8 (B/s per GPU).

Bytes per GPU with tp = pp = dp = 1:
    weight shard 2P = 212_992;  ZeRO-1 training states 2P + 2P + 12P = 16P = 1_703_936.
"""

from __future__ import annotations

import pytest

from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.cost import CostModel, Strategy
from rlplan.rpeg.model.plan import Placement, Plan, make_staleness
from rlplan.rpeg.templates import Kind, Vertex

GENERATE = Vertex("actor", Kind.GENERATE)
REFERENCE = Vertex("reference", Kind.INFER)
TRAIN = Vertex("actor", Kind.TRAIN)
RATES = {
    "host_to_device_pinned": 4e9,
    "device_to_host_pinned": 2e9,
    "host_to_device_pageable": 1e9,
    "device_to_host_pageable": 5e8,
}
SHARD = 212_992
STATES = 1_703_936
#: Compute-only run times of the small instance (tests/rpeg/test_cost_v2.py): one
#: forward pass of the padded sequence, and training (3 forwards).
FORWARD = 2.369536e-6
TRAIN_COMPUTE = 7.108608e-6


#: The bare copy at the host rates, so these derivations read shard / rate; the
#: measured backup rate and wake fraction are tested in tests/rpeg/test_sleep_rates.py.
BARE_COPY = {"sleep_backup_rate": 1e18, "wake_link_fraction": 1.0}


def cost_of(make_instance, data, **engine) -> CostModel:
    data["hardware"].update(RATES)
    data.setdefault("engine", {}).update({**BARE_COPY, **engine})
    data["placement"]["offload"] = [False, True]
    return CostModel(make_instance(data))


def test_train_offload_prices_onload_and_offload_at_the_pinned_rates(
    small_instance_data, make_instance
):
    """engine.offload_memory pinned (the default): states in at 4e9, out at 2e9."""
    cost = cost_of(make_instance, small_instance_data)
    offload = Strategy(1, 1, 1, 1, offload=True)
    colocation = cost.colocation
    # onload 1_703_936 / 4e9 = 4.25984e-4 s; offload 1_703_936 / 2e9 = 8.51968e-4 s
    assert colocation.onload(Kind.TRAIN, "actor", offload) == pytest.approx(4.25984e-4, rel=1e-12)
    assert colocation.offload(Kind.TRAIN, "actor", offload) == pytest.approx(8.51968e-4, rel=1e-12)
    # the run: 7.108608e-6 + 4.25984e-4 + 8.51968e-4 = 1.285060608e-3 s
    assert cost.run_time(TRAIN, (1, 1, 1), offload) == pytest.approx(1.285060608e-3, rel=1e-12)
    assert colocation.held_bytes(Kind.TRAIN, "actor", offload) == STATES
    # without the flag nothing moves and nothing stays on the host
    kept = Strategy(1, 1, 1, 1)
    assert colocation.onload(Kind.TRAIN, "actor", kept) == 0.0
    assert colocation.held_bytes(Kind.TRAIN, "actor", kept) == 0.0
    assert cost.run_time(TRAIN, (1, 1, 1), kept) == pytest.approx(TRAIN_COMPUTE, rel=1e-12)


def test_train_offload_from_pageable_memory_is_slower(small_instance_data, make_instance):
    """engine.offload_memory pageable (NeMo RL's plain .to("cpu")): in at 1e9, out at 5e8."""
    cost = cost_of(make_instance, small_instance_data, offload_memory="pageable")
    offload = Strategy(1, 1, 1, 1, offload=True)
    # 1_703_936 / 1e9 = 1.703936e-3; 1_703_936 / 5e8 = 3.407872e-3;
    # + 7.108608e-6 = 5.118916608e-3 s
    assert cost.run_time(TRAIN, (1, 1, 1), offload) == pytest.approx(5.118916608e-3, rel=1e-12)


def test_infer_offload_loads_pinned_weights_and_drops_them(small_instance_data, make_instance):
    """An offloaded infer vertex loads its shard from pinned memory (even when training
    states are pageable) and stores nothing after the run."""
    cost = cost_of(make_instance, small_instance_data, offload_memory="pageable")
    offload = Strategy(1, 1, 1, 1, offload=True)
    colocation = cost.colocation
    # 212_992 / 4e9 = 5.3248e-5 s; offload 0
    assert colocation.onload(Kind.INFER, "reference", offload) == pytest.approx(5.3248e-5)
    assert colocation.offload(Kind.INFER, "reference", offload) == 0.0
    # the run: 2.369536e-6 + 5.3248e-5 = 5.5617536e-5 s
    assert cost.run_time(REFERENCE, (1, 1, 1), offload) == pytest.approx(5.5617536e-5, rel=1e-12)
    assert colocation.held_bytes(Kind.INFER, "reference", offload) == SHARD


def test_level_one_sleep_and_wake_move_the_engine_shard(small_instance_data, make_instance):
    """Sleep level 1: wake = shard / H2D pinned, sleep = shard / D2H pinned; the shard
    stays in host memory while the engine sleeps."""
    cost = cost_of(make_instance, small_instance_data)
    rollout = Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    colocation = cost.colocation
    # wake 212_992 / 4e9 = 5.3248e-5 s (no KV re-allocation cost: none is sourced);
    # sleep 212_992 / 2e9 = 1.06496e-4 s
    assert colocation.wake("actor", rollout) == pytest.approx(5.3248e-5, rel=1e-12)
    assert colocation.sleep("actor", rollout) == pytest.approx(1.06496e-4, rel=1e-12)
    assert colocation.engine_host_bytes("actor", rollout) == SHARD


def test_level_two_sleep_drops_the_weights(small_instance_data, make_instance):
    """Sleep level 2 (verl): the weights are discarded, nothing crosses the host link."""
    cost = cost_of(make_instance, small_instance_data, sleep_level=2)
    rollout = Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    colocation = cost.colocation
    assert colocation.wake("actor", rollout) == 0.0
    assert colocation.sleep("actor", rollout) == 0.0
    assert colocation.engine_host_bytes("actor", rollout) == 0.0


def test_refit_on_the_same_block_is_a_device_copy(small_instance_data, make_instance):
    """CUDA IPC refit: the shard read and written in HBM, 212_992 / (1e9 / 2) = 4.25984e-4 s;
    on another block it is the NCCL point-to-point of any pub edge."""
    cost = cost_of(make_instance, small_instance_data)
    rollout = Strategy(1, 1, 1, 1, gpu_memory_utilization=0.5, max_num_seqs=1)
    colocation = cost.colocation
    assert colocation.refit_ipc("actor", rollout) == pytest.approx(4.25984e-4, rel=1e-12)
    same = colocation.refit_lag("actor", True, True, "g", rollout)
    assert same == pytest.approx(4.25984e-4, rel=1e-12)
    # another block at level g: alpha 0 + 212_992 / 1e9 = 2.12992e-4 s, no device copy
    other = colocation.refit_lag("actor", False, False, "g", rollout)
    assert other == pytest.approx(2.12992e-4, rel=1e-12)


def test_a_colocated_plan_pays_wake_sleep_and_refit(small_instance_data, make_instance):
    """The small DPO instance on its one GPU, 2 steps at staleness 0: the rollout shares
    the GPU, so every run of it wakes and sleeps, and the refit before the second
    rollout is a device copy. One GPU runs everything in turn:

        makespan = 2 * (G + w + s + R + T) + refit

    with w = 5.3248e-5, s = 1.06496e-4 (above), refit = 4.25984e-4 (nothing else can
    run meanwhile), and G, R, T the rollout, reference and train candidate times.
    """
    data = small_instance_data
    data["hardware"].update(RATES)
    data.setdefault("engine", {}).update(BARE_COPY)
    data["optimizer"]["k_eval"] = 2
    problem = Problem.from_instance(make_instance(data))
    directory = problem.directory
    block = directory.cluster.blocks[0]
    placements = tuple(
        Placement(block, directory.options[v][(1, 1, 1)][0].strategy)
        for v in range(len(directory.template.vertices))
    )
    plan = Plan(placements, make_staleness({"actor": 0}))
    assert directory.template.names == ("actor.generate", "reference.infer", "actor.train")
    times = [directory.options[v][(1, 1, 1)][0].time for v in range(3)]
    trace = problem.simulator.simulate(plan)
    expected = 2 * (sum(times) + 5.3248e-5 + 1.06496e-4) + 4.25984e-4
    assert trace.makespan == pytest.approx(expected, rel=1e-12)
    # without the colocation costs the same plan would end 2 * (w + s) + refit earlier
    assert trace.makespan - 2 * sum(times) == pytest.approx(7.45472e-4, rel=1e-9)
    kinds = [event.kind for event in trace.events if event.vertex == "actor.generate"]
    assert kinds == ["wake", "compute", "sleep", "wake", "compute", "sleep", "refit"]


def test_dominance_keeps_a_slower_candidate_that_holds_less_host_memory():
    """An offloaded candidate may be faster and no larger on the GPU, but it holds host
    memory: the one without offload stays a candidate (a node's host memory may bind)."""
    from rlplan.rpeg.model.candidates import Candidate, _non_dominated

    fast = Candidate(0, (1, 1, 1), Strategy(1, 1, 1, 1, offload=True), 1.0, 0.0, 5.0, host=8.0)
    lean = Candidate(0, (1, 1, 1), Strategy(1, 1, 1, 2), 2.0, 0.0, 5.0, host=0.0)
    heavier = Candidate(0, (1, 1, 1), Strategy(1, 1, 1, 4, offload=True), 3.0, 0.0, 5.0, host=8.0)
    kept = _non_dominated([fast, lean, heavier], layout_free=True)
    assert set(kept) == {fast, lean}  # heavier: slower than fast, same memory and host
