"""The Perfetto / Chrome trace (rpeg/perfetto.py) against the trace-event format.

``check_trace_events`` restates what the format ("Trace Event Format", the
Google document Chrome's and Perfetto's JSON importers follow) requires of
the events this project writes, independently of the writer: it is the
validator the tests hold every written trace to.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rlplan.outputs.perfetto import gpu_span, perfetto_trace, write_perfetto
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.evaluation.simulator import Event, Trace
from rlplan.rpeg.schema.hardware import parse_hardware
from rlplan.rpeg.search.baselines import greedy_plan

REPO = Path(__file__).resolve().parents[2]
TINY_PPO = REPO / "instances" / "tiny_ppo_2gpu.yaml"


def check_trace_events(document: Any) -> list[str]:
    """Problems that would keep a trace-event document from loading; empty if none.

    Checks what the Chrome trace-event format requires and what Perfetto's
    JSON importer relies on: a ``traceEvents`` list; every event a mapping
    with ``ph``, ``name``, ``pid``, ``tid`` and ``ts``; finite numbers;
    ``X`` events with ``dur >= 0``; ``process_name`` / ``thread_name``
    metadata with a non-empty ``args.name``, one per process and thread that
    has events; and no two complete events of one thread overlapping without
    nesting.

    Parameters
    ----------
    document
        The parsed JSON document.

    Returns
    -------
    list[str]
        One line per problem.
    """
    problems: list[str] = []
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["the document must be an object with a traceEvents list"]
    named_processes: set[Any] = set()
    named_threads: set[tuple[Any, Any]] = set()
    used_threads: set[tuple[Any, Any]] = set()
    spans: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    for index, event in enumerate(document["traceEvents"]):
        where = f"traceEvents[{index}]"
        if not isinstance(event, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [key for key in ("ph", "name", "pid", "tid", "ts") if key not in event]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        numbers_ok = True
        for key in ("pid", "tid", "ts", "dur"):
            value = event.get(key)
            if key == "dur" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                problems.append(f"{where}.{key}: not a number ({value!r})")
                numbers_ok = False
            elif not math.isfinite(value):
                problems.append(f"{where}.{key}: not finite ({value!r})")
                numbers_ok = False
        if not numbers_ok:
            continue
        if not isinstance(event["name"], str) or not event["name"]:
            problems.append(f"{where}.name: must be a non-empty string")
        thread = (event["pid"], event["tid"])
        if event["ph"] == "M":
            name = (event.get("args") or {}).get("name")
            if event["name"] in ("process_name", "thread_name") and (
                not isinstance(name, str) or not name
            ):
                problems.append(f"{where}: {event['name']} metadata without args.name")
            if event["name"] == "process_name":
                named_processes.add(event["pid"])
            elif event["name"] == "thread_name":
                named_threads.add(thread)
        elif event["ph"] == "X":
            duration = event.get("dur")
            if not isinstance(duration, int | float) or isinstance(duration, bool):
                problems.append(f"{where}: complete event without dur")
                continue
            if duration < 0:
                problems.append(f"{where}.dur: negative ({duration})")
            used_threads.add(thread)
            start = round(event["ts"] * 1000)
            spans.setdefault(thread, []).append((start, start + round(duration * 1000)))
        else:
            problems.append(f"{where}.ph: {event['ph']!r} is not a phase this writer uses")
    for pid, tid in sorted(used_threads, key=str):
        if pid not in named_processes:
            problems.append(f"process {pid}: no process_name metadata")
        if (pid, tid) not in named_threads:
            problems.append(f"thread {pid}/{tid}: no thread_name metadata")
    for thread, intervals in spans.items():
        intervals.sort(key=lambda span: (span[0], -span[1]))
        open_ends: list[int] = []
        for start, end in intervals:
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                problems.append(f"thread {thread[0]}/{thread[1]}: events overlap without nesting")
                break
            open_ends.append(end)
    return problems


def hardware(racks: int, nodes: int, gpus: int) -> Any:
    return parse_hardware(
        {"preset": "h100-sxm-80g", "racks": racks, "nodes_per_rack": nodes, "gpus_per_node": gpus}
    )


def make_trace(events: list[Event], makespan: float) -> Trace:
    return Trace(
        makespan=makespan,
        k_eval=1,
        step_time=makespan,
        samples_per_s=1.0,
        generated_tokens_per_s=1.0,
        events=tuple(events),
        peak_memory_bytes=(0.0,),
        capacity_bytes=1.0,
        violation_bytes=0.0,
    )


def names(document: dict[str, Any], kind: str) -> dict[tuple[int, int], str]:
    """(pid, tid) -> name of the ``process_name`` or ``thread_name`` metadata."""
    return {
        (event["pid"], event["tid"]): event["args"]["name"]
        for event in document["traceEvents"]
        if event["ph"] == "M" and event["name"] == kind
    }


def complete(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [event for event in document["traceEvents"] if event["ph"] == "X"]


def test_validator_flags_what_perfetto_rejects():
    """The validator is not vacuous: each broken event is reported."""
    good = {"name": "a", "ph": "X", "ts": 0.0, "dur": 5.0, "pid": 1, "tid": 1}
    meta = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "p"}},
        {"name": "thread_name", "ph": "M", "ts": 0, "pid": 1, "tid": 1, "args": {"name": "t"}},
    ]
    assert check_trace_events({"traceEvents": [*meta, good]}) == []
    assert check_trace_events([good]) != []
    broken = [
        {key: value for key, value in good.items() if key != "ts"},
        {**good, "dur": -1.0},
        {**good, "ts": math.inf},
        {**good, "name": ""},
        {key: value for key, value in good.items() if key != "dur"},
    ]
    for event in broken:
        assert check_trace_events({"traceEvents": [*meta, event]}), event
    overlapping = [good, {**good, "ts": 3.0}]  # [0, 5) and [3, 8) on one thread
    assert check_trace_events({"traceEvents": [*meta, *overlapping]})
    nested = [good, {**good, "ts": 1.0, "dur": 2.0}]  # [1, 3) inside [0, 5): allowed
    assert check_trace_events({"traceEvents": [*meta, *nested]}) == []
    assert check_trace_events({"traceEvents": [meta[0], good]})  # thread unnamed


def test_hand_built_trace_per_gpu_tracks():
    """Two GPUs: a run on both, then one per GPU; a transfer between them."""
    events = [
        Event("actor.generate", 0, "compute", 0.0, 1.5, (0, 1)),
        Event("reward.infer", 0, "transfer", 1.5, 1.75, (), ("actor.generate", 0)),
        Event("reward.infer", 0, "compute", 1.75, 2.0, (1,)),
        Event("actor.train", 0, "compute", 1.5, 2.5, (0,)),
    ]
    document = perfetto_trace(make_trace(events, 2.5), hardware(1, 1, 2), instance_name="hand")
    assert check_trace_events(document) == []
    assert json.loads(json.dumps(document, allow_nan=False)) == document
    processes = names(document, "process_name")
    threads = names(document, "thread_name")
    assert sorted(processes.values()) == ["rack 0 node 0", "transfers"]
    gpu_tid = {name: key for key, name in threads.items()}
    assert set(gpu_tid) == {"GPU 0", "GPU 1", "actor.generate -> reward.infer"}
    runs = sorted(
        (threads[(e["pid"], e["tid"])], e["name"], e["ts"], e["dur"], e["cat"])
        for e in complete(document)
    )
    assert runs == [
        ("GPU 0", "actor.generate", 0.0, 1_500_000.0, "run"),
        ("GPU 0", "actor.train", 1_500_000.0, 1_000_000.0, "run"),
        ("GPU 1", "actor.generate", 0.0, 1_500_000.0, "run"),
        ("GPU 1", "reward.infer", 1_750_000.0, 250_000.0, "run"),
        (
            "actor.generate -> reward.infer",
            "actor.generate -> reward.infer",
            1_500_000.0,
            250_000.0,
            "transfer",
        ),
    ]
    transfer = next(e for e in complete(document) if e["cat"] == "transfer")
    assert transfer["args"]["from"] == "actor.generate step 0"
    assert transfer["args"]["to"] == "reward.infer step 0"
    assert document["displayTimeUnit"] == "ms"
    assert document["otherData"]["instance"] == "hand"
    assert document["otherData"]["tracks"] == "per GPU"


def test_overlapping_transfers_of_one_edge_get_a_second_lane():
    """Perfetto drops slices of one thread that overlap without nesting."""
    events = [
        Event("critic.infer", 0, "transfer", 0.0, 2.0, (), ("actor.generate", 0)),
        Event("critic.infer", 1, "transfer", 1.0, 3.0, (), ("actor.generate", 1)),
        Event("critic.infer", 2, "transfer", 2.0, 4.0, (), ("actor.generate", 2)),
    ]
    document = perfetto_trace(make_trace(events, 4.0), hardware(1, 1, 1))
    assert check_trace_events(document) == []
    threads = names(document, "thread_name")
    lanes = [threads[(e["pid"], e["tid"])] for e in complete(document)]
    edge = "actor.generate -> critic.infer"
    assert lanes == [edge, f"{edge} (2)", edge]


def test_big_cluster_has_one_track_per_block():
    """128 GPUs (> 64): tracks are blocks, not GPUs."""
    events = [
        Event("actor.generate", 0, "compute", 0.0, 1.0, tuple(range(128))),
        Event("actor.train", 0, "compute", 1.0, 2.0, tuple(range(64))),
        Event("critic.train", 0, "compute", 1.0, 1.5, tuple(range(64, 128))),
    ]
    document = perfetto_trace(make_trace(events, 2.0), hardware(2, 2, 32))
    assert check_trace_events(document) == []
    threads = names(document, "thread_name")
    assert sorted(threads.values()) == ["GPUs 0-127", "GPUs 0-63", "GPUs 64-127"]
    assert len(complete(document)) == 3
    assert names(document, "process_name") == {(1, 0): "blocks (128 GPUs)"}
    assert document["otherData"]["tracks"] == "per block"
    # The same cluster below the threshold: one track per GPU, 128 + 64 + 64 slices.
    per_gpu = perfetto_trace(make_trace(events, 2.0), hardware(2, 2, 32), max_gpu_tracks=128)
    assert check_trace_events(per_gpu) == []
    assert len(complete(per_gpu)) == 256
    assert len(names(per_gpu, "process_name")) == 4  # 2 racks x 2 nodes, no transfers


def test_gpu_span():
    assert (gpu_span([3]), gpu_span(range(8)), gpu_span([5, 0, 2])) == ("3", "0-7", "0, 2, 5")


def test_simulated_plan_trace_is_valid_and_matches_the_simulator(tmp_path):
    """The greedy plan of tiny_ppo_2gpu: every run on both GPUs, every transfer on its track."""
    problem = Problem.load(TINY_PPO)
    plan = greedy_plan(problem.directory, problem.simulator)
    trace = problem.simulator.simulate(plan)
    path = tmp_path / "trace.perfetto.json"
    write_perfetto(path, trace, problem.instance.hardware, instance_name="tiny_ppo_2gpu")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert check_trace_events(document) == []
    slices = complete(document)
    # Every run part is a slice on each of its GPUs, in the category of its kind (the
    # compute is "run"): the rollout shares both GPUs, so it wakes and sleeps.
    for kind, category in (("compute", "run"), ("wake", "wake"), ("sleep", "sleep")):
        parts = [e for e in trace.events if e.kind == kind]
        assert parts
        assert len([s for s in slices if s["cat"] == category]) == sum(len(e.gpus) for e in parts)
    for kind in ("transfer", "refit"):
        edges = [e for e in trace.events if e.kind == kind]
        assert len([s for s in slices if s["cat"] == kind]) == len(edges)
    wake = next(s for s in slices if s["cat"] == "wake")
    assert wake["name"] == "actor.generate wake"
    end = max(s["ts"] + s["dur"] for s in slices)
    assert end == pytest.approx(trace.makespan * 1e6, abs=1e-3)
    assert document["otherData"]["makespan_s"] == trace.makespan
