"""The exact simulator (docs/simulator.md): properties over random plans and hand cases."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplan.rpeg.errors import PlanError
from rlplan.rpeg.evaluation.simulator import RUN_KINDS
from rlplan.rpeg.search.sampling import random_plan
from rlplan.rpeg.templates import Kind, run_id, unroll

#: Instances of ``instances/`` the property tests draw plans on: the tiny ones
#: and the 16-GPU ones.
PROPERTY_INSTANCES = (
    "tiny_ppo_2gpu.yaml",
    "tiny_ppo_2gpu_sync.yaml",
    "tiny_grpo_2gpu.yaml",
    "tiny_grpo_4gpu.yaml",
    "tiny_dpo_2gpu.yaml",
    "tiny_dpo_4gpu.yaml",
    "ppo_8b_1x2x8_h100.yaml",
    "grpo_7b_1x2x8_h100.yaml",
    "dpo_8b_1x2x8_a100.yaml",
)

PLANS = {
    "name": st.sampled_from(PROPERTY_INSTANCES),
    "seed": st.integers(min_value=0, max_value=2**32 - 1),
    "with_order": st.booleans(),
}

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, database=None)


def _draw(load_problem, name, seed, with_order):
    problem = load_problem(name)
    plan = random_plan(problem.directory, random.Random(seed), with_order=with_order)
    return problem, plan


def _compute_events(trace):
    """Each run as one event over all its parts (wake, onload, compute, offload, sleep)."""
    computes = {(e.vertex, e.step): e for e in trace.events if e.kind == "compute"}
    return {
        key: dataclasses.replace(computes[key], kind="run", start=start, end=end)
        for key, (start, end) in trace.run_spans().items()
    }


def _template_lags(directory, plan):
    """Lag of every template edge (data, then pub) from the cost model's transfer rules.

    A pub edge into the rollout on its trainer's block is a CUDA IPC refit: it adds the
    engine's weight shard read and written at the memory bandwidth, 2 * shard / HBM
    (docs/cost-model.md#colocation).
    """
    cost, cluster, template = directory.cost, directory.cluster, directory.template
    lags = []
    for edge in template.data_edges:
        first, second = plan.placements[edge.src].block, plan.placements[edge.dst].block
        lags.append(cost.data_lag(first == second, cluster.span_level(first, second)))
    for edge in template.pub_edges:
        source, target = plan.placements[edge.src], plan.placements[edge.dst]
        same_block = source.block == target.block
        # the weight layout (tp, pp, ZeRO-3 shards) of section 10
        same_layout = source.strategy.layout == target.strategy.layout
        level = target.block.level if same_block else cluster.span_level(source.block, target.block)
        lag = cost.pub_lag(edge.model, same_block, same_layout, level, target.strategy)
        if same_block and template.vertices[edge.dst].kind is Kind.GENERATE:
            shard = cost.weight_shard(edge.model, target.strategy)
            lag += 2 * shard / directory.instance.hardware.memory_bandwidth
        lags.append(lag)
    return lags


def _switch(directory, plan, index):
    """Wake + sleep seconds of vertex ``index`` if it is a colocated rollout, else 0.

    Colocated: its block shares a GPU with another vertex's. Level-1 sleep moves the
    weight shard 2P/(tp*pp) to pinned host memory, at the slower of the device-to-host
    link and the engine's backup rate, and back at its fraction of the host-to-device
    link: shard / min(D2H, backup) + shard / (H2D * fraction).
    """
    vertex, own = directory.template.vertices[index], plan.placements[index].block
    if vertex.kind is not Kind.GENERATE or not any(
        other.block.intersects(own) for i, other in enumerate(plan.placements) if i != index
    ):
        return 0.0
    hardware, engine = directory.instance.hardware, directory.instance.engine
    shard = directory.cost.weight_shard(vertex.model, plan.placements[index].strategy)
    sleep = shard / min(hardware.device_to_host_pinned, engine.sleep_backup_rate)
    return shard / (hardware.host_to_device_pinned * engine.wake_link_fraction) + sleep


# -- properties over random plans ------------------------------------------------------


@PROPERTY_SETTINGS
@given(**PLANS)
def test_runs_sharing_a_gpu_never_overlap(load_problem, name, seed, with_order):
    """No two run parts (wake, onload, compute, offload, sleep) sharing a GPU overlap."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    events = [e for e in problem.simulator.simulate(plan).events if e.kind in RUN_KINDS]
    by_gpu: dict[int, list] = {}
    for event in events:
        for gpu in event.gpus:
            by_gpu.setdefault(gpu, []).append(event)
    for gpu_events in by_gpu.values():
        gpu_events.sort(key=lambda e: e.start)
        for before, after in itertools.pairwise(gpu_events):
            assert before.end <= after.start, (before, after)


@PROPERTY_SETTINGS
@given(**PLANS)
def test_every_edge_holds_with_its_lag(load_problem, name, seed, with_order):
    """Every data, pub and chain edge of the unrolled graph holds with its lag."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    directory = problem.directory
    template = directory.template
    count = len(template.vertices)
    events = _compute_events(problem.simulator.simulate(plan))
    lags = _template_lags(directory, plan)
    edges = unroll(template, directory.instance.k_eval, plan.staleness_map)
    assert edges
    for edge in edges:
        source = events[(template.names[edge.src % count], edge.src // count)]
        target = events[(template.names[edge.dst % count], edge.dst // count)]
        lag = lags[edge.template_edge] if edge.template_edge >= 0 else 0.0
        assert target.start >= source.end + lag - 1e-12 * max(1.0, source.end), edge


@PROPERTY_SETTINGS
@given(**PLANS)
def test_runs_start_as_early_as_their_constraints_allow(load_problem, name, seed, with_order):
    """Every run starts at 0, at a predecessor's end plus lag, or when a shared GPU frees."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    directory = problem.directory
    template = directory.template
    count = len(template.vertices)
    events = _compute_events(problem.simulator.simulate(plan))
    lags = _template_lags(directory, plan)
    releases: dict[tuple[str, int], set[float]] = {key: {0.0} for key in events}
    for edge in unroll(template, directory.instance.k_eval, plan.staleness_map):
        source = events[(template.names[edge.src % count], edge.src // count)]
        lag = lags[edge.template_edge] if edge.template_edge >= 0 else 0.0
        releases[(template.names[edge.dst % count], edge.dst // count)].add(source.end + lag)
    for key, event in events.items():
        for other in events.values():
            if other is not event and set(other.gpus) & set(event.gpus):
                releases[key].add(other.end)
    for key, event in events.items():
        assert event.start in releases[key], key


@PROPERTY_SETTINGS
@given(**PLANS)
def test_runs_last_their_candidate_time_on_their_block(load_problem, name, seed, with_order):
    """Each run occupies exactly its block's GPUs for its candidate's duration, plus the
    wake and sleep of a colocated rollout; its parts follow one another, the compute
    lasting the candidate's time less its onload and offload."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    directory = problem.directory
    trace = problem.simulator.simulate(plan)
    events = _compute_events(trace)
    assert len(events) == len(directory.template.vertices) * directory.instance.k_eval
    parts: dict = {}
    for event in trace.events:
        if event.kind in RUN_KINDS:
            parts.setdefault((event.vertex, event.step), []).append(event)
    colocation = directory.cost.colocation
    for (vertex_name, step), event in events.items():
        index = directory.template.index(vertex_name)
        placement = plan.placements[index]
        candidate = directory.candidate(index, placement.block.extent, placement.strategy)
        assert event.gpus == tuple(placement.block.gpus())
        expected = candidate.time + _switch(directory, plan, index)
        assert event.end - event.start == pytest.approx(expected, rel=1e-9)
        ordered = sorted(parts[(vertex_name, step)], key=lambda e: e.start)
        for before, after in itertools.pairwise(ordered):
            assert before.end == after.start
        vertex = directory.template.vertices[index]
        if vertex.kind is not Kind.GENERATE:
            moved = colocation.onload(vertex.kind, vertex.model, placement.strategy)
            moved += colocation.offload(vertex.kind, vertex.model, placement.strategy)
            compute = next(e for e in ordered if e.kind == "compute")
            assert compute.end - compute.start == pytest.approx(candidate.time - moved, rel=1e-9)


@PROPERTY_SETTINGS
@given(**PLANS)
def test_makespan_is_the_last_event_end(load_problem, name, seed, with_order):
    """The makespan equals the last event's end; step time is makespan / k_eval."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    trace = problem.simulator.simulate(plan)
    assert trace.makespan == max(e.end for e in trace.events)
    assert trace.step_time == pytest.approx(trace.makespan / trace.k_eval, rel=1e-12)
    sequences = problem.instance.workload.sequences
    assert trace.samples_per_s == pytest.approx(sequences / trace.step_time, rel=1e-12)


@PROPERTY_SETTINGS
@given(**PLANS)
def test_replaying_the_start_order_reproduces_the_schedule(load_problem, name, seed, with_order):
    """Simulating with ``order = trace.start_order`` reproduces every start and end exactly."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    simulator = problem.simulator
    trace = simulator.simulate(plan)
    replay = simulator.simulate(plan.with_order(trace.start_order))
    original = {key: (e.start, e.end) for key, e in _compute_events(trace).items()}
    replayed = {key: (e.start, e.end) for key, e in _compute_events(replay).items()}
    assert replayed == original
    assert replay.makespan == trace.makespan


@PROPERTY_SETTINGS
@given(**PLANS)
def test_evaluate_agrees_with_simulate(load_problem, name, seed, with_order):
    """The fast path and the full simulation give the same makespan and violation."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    evaluation = problem.simulator.evaluate(plan)
    trace = problem.simulator.simulate(plan)
    assert evaluation.makespan == trace.makespan
    violation = trace.violation_bytes + trace.host_violation_bytes
    assert evaluation.violation == pytest.approx(violation, rel=1e-12, abs=1e-3)
    assert evaluation.feasible == trace.feasible


@PROPERTY_SETTINGS
@given(**PLANS)
def test_peak_memory_follows_the_static_residency_rule(load_problem, name, seed, with_order):
    """Per-GPU peaks equal a recomputation: sum of per-model max resident + max transient."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    directory = problem.directory
    trace = problem.simulator.simulate(plan)
    num_gpus = directory.cluster.num_gpus
    resident: list[dict[str, float]] = [{} for _ in range(num_gpus)]
    transient = [0.0] * num_gpus
    for index, (vertex, placement) in enumerate(
        zip(directory.template.vertices, plan.placements, strict=True)
    ):
        candidate = directory.candidate(index, placement.block.extent, placement.strategy)
        for gpu in placement.block.gpus():
            models = resident[gpu]
            models[vertex.model] = max(models.get(vertex.model, 0.0), candidate.resident)
            transient[gpu] = max(transient[gpu], candidate.transient)
    expected = [sum(resident[g].values()) + transient[g] for g in range(num_gpus)]
    assert list(trace.peak_memory_bytes) == pytest.approx(expected, rel=1e-12)
    capacity = directory.instance.hardware.usable_memory
    assert trace.capacity_bytes == capacity
    assert trace.violation_bytes == pytest.approx(max(0.0, max(expected) - capacity), abs=1e-3)


@PROPERTY_SETTINGS
@given(**PLANS)
def test_transfer_events_match_positive_lags(load_problem, name, seed, with_order):
    """Each edge with a positive lag shows as one transfer event from the source's end."""
    problem, plan = _draw(load_problem, name, seed, with_order)
    directory = problem.directory
    template = directory.template
    count = len(template.vertices)
    trace = problem.simulator.simulate(plan)
    events = _compute_events(trace)
    lags = _template_lags(directory, plan)
    expected = []
    for edge in unroll(template, directory.instance.k_eval, plan.staleness_map):
        if edge.template_edge >= 0 and lags[edge.template_edge] > 0:
            source = (template.names[edge.src % count], edge.src // count)
            end = events[source].end
            target = (template.names[edge.dst % count], edge.dst // count)
            expected.append((target, source, end, end + lags[edge.template_edge]))
    transfers = [
        ((e.vertex, e.step), e.source, e.start, e.end)
        for e in trace.events
        if e.kind in ("transfer", "refit")
    ]
    transfers.sort()
    # A refit is exactly an edge bringing trained weights to the rollout.
    for event in trace.events:
        if event.kind in ("transfer", "refit"):
            kind = directory.template.vertices[directory.template.index(event.vertex)].kind
            assert (event.kind == "refit") == (kind is Kind.GENERATE), event
    expected.sort()
    # Endpoints compare exactly; times within a relative 1e-9 (pytest.approx
    # takes flat sequences only).
    assert [(t[0], t[1]) for t in transfers] == [(e[0], e[1]) for e in expected]
    assert [t[2] for t in transfers] == pytest.approx([e[2] for e in expected], rel=1e-9)
    assert [t[3] for t in transfers] == pytest.approx([e[3] for e in expected], rel=1e-9)


# -- hand cases ----------------------------------------------------------------------------


def test_one_gpu_serialises_every_run(frozen_problem, single_gpu_plan):
    """All runs on GPU 0: makespan = sum of all run durations, with the rollout's wake
    and sleep (it shares GPU 0)."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    directory = problem.directory
    plan = single_gpu_plan(directory, dict.fromkeys(directory.template.names, 0))
    trace = problem.simulator.simulate(plan)
    durations = [directory.options[v][(1, 1, 1)][0].time for v in range(6)]
    # The rollout is colocated: before each run it wakes (its weight shard 2P =
    # 1_260_191_744 bytes from pinned host memory at the default 25e9 B/s: 0.05040766976
    # s) and after it sleeps (the same bytes back at 25e9 B/s: 0.05040766976 s).
    switch = 2 * 1_260_191_744 / 25e9
    # Every data edge joins runs on the same block: lag 0. The refit actor.train 0 ->
    # actor.generate 1 (same block and layout) is a CUDA IPC copy, 2 * 1_260_191_744 /
    # 1.008e12 = 2.50038 ms, shorter than critic.train 0 which runs meanwhile, so one GPU
    # runs the 2 steps x 6 runs back to back: makespan = 2 * (sum(durations) + switch).
    assert trace.makespan == pytest.approx(2 * (sum(durations) + switch), rel=1e-12)
    assert not [e for e in trace.events if e.kind == "transfer"]
    (refit,) = [e for e in trace.events if e.kind == "refit"]
    assert refit.end - refit.start == pytest.approx(2 * 1_260_191_744 / 1.008e12, rel=1e-12)
    wakes = [e for e in trace.events if e.kind == "wake"]
    assert [e.end - e.start for e in wakes] == pytest.approx([1_260_191_744 / 25e9] * 2)
    # list order with sigma = 0 on one GPU: step 0 in template order, then step 1
    assert trace.start_order == tuple((v, t) for t in range(2) for v in range(6))
    # throughput: B*K = 32 samples and 32 * T = 32 * 256 = 8192 generated tokens per step
    assert trace.samples_per_s == pytest.approx(32 / trace.step_time, rel=1e-12)
    assert trace.generated_tokens_per_s == pytest.approx(8192 / trace.step_time, rel=1e-12)


def test_generated_tokens_follow_the_quantiles(frozen_problem):
    """Generated tokens per step are B*K*E[T] with piecewise-uniform lengths (section 10)."""
    problem = frozen_problem("frozen_ppo_8b_1x2x8_h100.yaml")
    plan = random_plan(problem.directory, random.Random(0))
    trace = problem.simulator.simulate(plan)
    # quantiles [[0.5, 400], [0.9, 900], [1.0, 1024]]: half the lengths uniform on (0, 400],
    # 0.4 on (400, 900], 0.1 on (900, 1024]:
    #   E[T] = 0.5*200 + 0.4*650 + 0.1*962 = 100 + 260 + 96.2 = 456.2 tokens per sequence
    # B*K = 512*4 = 2048 sequences -> 2048 * 456.2 = 934_297.6 tokens per step
    assert trace.generated_tokens_per_s == pytest.approx(934_297.6 / trace.step_time, rel=1e-12)


def test_non_topological_order_is_rejected(frozen_problem, single_gpu_plan):
    """An order placing a run before its predecessor is an error, not a schedule."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    directory = problem.directory
    plan = single_gpu_plan(directory, dict.fromkeys(directory.template.names, 0))
    good = tuple((v, t) for t in range(2) for v in range(6))
    # swap actor.generate and reference.infer at step 0
    bad = ((1, 0), (0, 0), *good[2:])
    with pytest.raises(PlanError, match="not a topological order"):
        problem.simulator.simulate(plan.with_order(bad))


# -- staleness on a hand-built plan ------------------------------------------------------
#
# frozen tiny PPO (tests/data/frozen_tiny_ppo_2gpu.yaml), every vertex on one GPU:
#   GPU 0: actor.generate, critic.infer, critic.train
#   GPU 1: reference.infer, reward.infer, actor.train
# pub lag actor.train (GPU 1) -> actor.generate (GPU 0), another block at level g,
#   destination tp = pp = 1: alpha_p2p_g + 2P/(1*1) * beta_p2p_g
#   = 8e-6 + 1_260_191_744 / 25e9 = 8e-6 + 0.05040766976 = 0.05041566976 s
#   (P(actor) = 630_095_872, see test_cost.py)

SPLIT = {
    "actor.generate": 0,
    "critic.infer": 0,
    "critic.train": 0,
    "reference.infer": 1,
    "reward.infer": 1,
    "actor.train": 1,
}
PUB_LAG = 0.05041566976


def _split_plan(problem, single_gpu_plan, actor_staleness):
    plan = single_gpu_plan(problem.directory, SPLIT)
    return plan.with_staleness("actor", actor_staleness)


def test_split_plan_is_feasible(frozen_problem, single_gpu_plan):
    """The hand-built split plan fits both GPUs."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    peaks = problem.simulator.peak_memory(_split_plan(problem, single_gpu_plan, 1))
    # (footprints from the block comment of test_cost.py)
    # GPU 0: actor 0 (the rollout keeps nothing resident) + critic 7_903_393_792
    #        + transient (the rollout engine, 0.5 x 24e9) 12_000_000_000 = 19_903_393_792
    # GPU 1: actor 10_081_533_952 + reference 1_260_191_744 + reward 987_924_224
    #        + transient (actor.train) 9_007_267_840 = 21_336_917_760   (both <= 22.8e9)
    assert peaks == pytest.approx([19_903_393_792, 21_336_917_760], rel=1e-12)


def test_staleness_one_overlaps_generation_with_training(frozen_problem, single_gpu_plan):
    """sigma = 1: generation of step 1 starts before training of step 0 ends."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    plan = _split_plan(problem, single_gpu_plan, 1)
    assert plan.staleness_map == {"actor": 1, "critic": 0}
    trace = problem.simulator.simulate(plan)
    assert trace.feasible
    events = _compute_events(trace)
    generate0, generate1 = events[("actor.generate", 0)], events[("actor.generate", 1)]
    train0 = events[("actor.train", 0)]
    assert generate1.start < train0.end
    assert train0.start < generate1.end  # the two runs overlap in time
    assert generate1.start >= generate0.end  # chain edge


def test_staleness_zero_waits_for_training_and_publication(frozen_problem, single_gpu_plan):
    """sigma = 0: generation of step 1 starts no earlier than train step 0's end + pub lag."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    plan = _split_plan(problem, single_gpu_plan, 0)
    trace = problem.simulator.simulate(plan)
    events = _compute_events(trace)
    generate1, train0 = events[("actor.generate", 1)], events[("actor.train", 0)]
    assert generate1.start >= train0.end + PUB_LAG - 1e-12
    # GPU 0 is idle by then (critic.train 0 ends first), so the pub edge decides exactly
    assert generate1.start == pytest.approx(train0.end + PUB_LAG, rel=1e-12)
    transfers = [
        e for e in trace.events if e.kind == "refit" and (e.vertex, e.step) == ("actor.generate", 1)
    ]
    assert len(transfers) == 1
    assert transfers[0].end - transfers[0].start == pytest.approx(PUB_LAG, rel=1e-9)
    # staleness 1 removes that wait, so it is strictly faster here
    faster = problem.simulator.evaluate(_split_plan(problem, single_gpu_plan, 1))
    assert faster.makespan < trace.makespan


def test_run_ids_match_start_order_entries(frozen_problem, single_gpu_plan):
    """start_order lists (vertex, step) pairs, one per run, sorted by start time."""
    problem = frozen_problem("frozen_tiny_ppo_2gpu.yaml")
    trace = problem.simulator.simulate(_split_plan(problem, single_gpu_plan, 1))
    assert sorted(run_id(v, t, 6) for v, t in trace.start_order) == list(range(12))
    events = _compute_events(trace)
    names = problem.directory.template.names
    starts = [events[(names[v], t)].start for v, t in trace.start_order]
    assert starts == sorted(starts)


def test_old_logprobs_use_the_latest_weights_whatever_the_staleness(frozen_problem):
    """Actor staleness 1: the rollout of step 1 overlaps training of step 0, but actor.infer
    of step 1 waits for actor.train of step 0 and its weights (the synchronous pub edge)."""
    from rlplan.rpeg.evaluation.problem import Problem
    from tests.rpeg.conftest import place_on_single_gpus

    instance = frozen_problem("frozen_tiny_ppo_2gpu.yaml").instance
    engine = dataclasses.replace(instance.engine, recompute_logprobs=True)
    problem = Problem.from_instance(dataclasses.replace(instance, engine=engine))
    assert "actor.infer" in problem.directory.template.names
    # the split plan, with actor.infer beside the rollout on GPU 0
    plan = place_on_single_gpus(problem.directory, {**SPLIT, "actor.infer": 0}, staleness=0)
    plan = plan.with_staleness("actor", 1)
    trace = problem.simulator.simulate(plan)
    # GPU 0: actor 1_260_191_744 + critic 7_903_393_792 + transient (critic.train)
    #        6_517_964_800 = 15_681_550_336 (actor.infer's 2_760_900_608 is smaller): fits
    assert trace.feasible
    events = _compute_events(trace)
    generate1, train0 = events[("actor.generate", 1)], events[("actor.train", 0)]
    infer1 = events[("actor.infer", 1)]
    assert generate1.start < train0.end  # the rollout does not wait (staleness 1)
    # the old log-probs do: actor.train 0 on GPU 1 -> actor.infer 1 on GPU 0 is the pub
    # lag PUB_LAG = 0.05041566976 s of the split plan (same p2p of 2P at level g)
    assert infer1.start >= train0.end + PUB_LAG - 1e-12
    transfers = {
        (e.vertex, e.step, e.source): e.end - e.start for e in trace.events if e.kind == "transfer"
    }
    assert transfers[("actor.infer", 1, ("actor.train", 0))] == pytest.approx(PUB_LAG, rel=1e-9)
    assert ("actor.generate", 1, ("actor.train", 0)) not in transfers
