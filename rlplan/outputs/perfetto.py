"""A trace in the Chrome trace-event format, for ui.perfetto.dev and chrome://tracing.

:func:`perfetto_trace` turns a simulator :class:`~rlplan.rpeg.evaluation.simulator.Trace` into
the JSON object form of the format ("Trace Event Format", the Google
document the Chrome and Perfetto JSON importers follow): ``{"traceEvents":
[...], "displayTimeUnit": "ms", "otherData": {...}}`` where

* every run is a complete event (``"ph": "X"``) named after its vertex, with
  ``ts`` and ``dur`` in microseconds and the step, GPUs and seconds in
  ``args``;
* each GPU is a thread (track) of a process per node, or, on clusters of
  more than ``max_gpu_tracks`` GPUs, each block a thread of one process, so
  the file stays small and readable; with GPU pools the nodes are each
  pool's, the processes carry the pool's name and blocks get one process
  per pool;
* a run's wake, sleep, onload and offload (docs/simulator.md) are complete
  events of their own on the run's GPUs, named ``<vertex> <kind>`` and of
  category ``<kind>`` (the compute is category ``run``);
* transfers (the lags of data and weight edges, category ``transfer``, and
  refits of a rollout engine, ``refit``) are complete events on their own
  process, one thread per edge (``actor.generate -> critic.infer``);
* CPU stages (a rule reward, ``reward.rule``) are complete events on a
  ``CPU`` process, one thread per stage;
* process and thread names (and sort indices) are metadata events
  (``"ph": "M"``).

Events on one thread never overlap (Perfetto nests overlapping slices of a
thread, and drops those that do not nest): runs on one GPU are exclusive in
the simulator, and an event that would overlap the events already on its
thread goes to a further thread of the same name with a ``(2)``, ``(3)``,
... suffix. Times are rounded to the nanosecond.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlplan.outputs.files import write_json
from rlplan.outputs.pool_groups import PoolSpan, pool_spans, span_of
from rlplan.rpeg.evaluation.simulator import EDGE_KINDS, Event, Trace
from rlplan.rpeg.schema.hardware import Hardware
from rlplan.rpeg.schema.pools import Pool

#: Clusters with more GPUs than this get one track per block instead of per GPU.
MAX_GPU_TRACKS = 64


def _ns(seconds: float) -> int:
    """Seconds as whole nanoseconds."""
    return round(seconds * 1e9)


def _us(nanoseconds: int) -> float:
    """Nanoseconds as microseconds (the format's time unit)."""
    return nanoseconds / 1000


def gpu_span(gpus: Iterable[int]) -> str:
    """GPUs for people: ``"3"``, ``"0-7"``, ``"0, 2, 5"`` or ``"0-1, 8-9"`` (a sliced block)."""
    ranges: list[list[int]] = []
    for gpu in sorted(gpus):
        if ranges and ranges[-1][1] == gpu - 1:
            ranges[-1][1] = gpu
        else:
            ranges.append([gpu, gpu])
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


@dataclass
class _Lanes:
    """Threads of one track name: events go to the first lane they do not overlap."""

    name: str
    order: int
    tids: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)


class _Builder:
    """Allocates pids and tids and collects events and their metadata."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.metadata: list[dict[str, Any]] = []
        self.next_tid = 1
        self.lanes: dict[tuple[int, Any], _Lanes] = {}

    def process(self, pid: int, name: str) -> None:
        """Name process ``pid`` and sort it by its id."""
        self.metadata.append(_meta("process_name", pid, 0, {"name": name}))
        self.metadata.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))

    def track(self, pid: int, key: Any, name: str, order: int) -> None:
        """Declare the track ``key`` of process ``pid`` with its first thread."""
        lanes = self.lanes[(pid, key)] = _Lanes(name, order)
        self._new_lane(pid, lanes)

    def _new_lane(self, pid: int, lanes: _Lanes) -> int:
        """Add a thread to ``lanes``; returns its index."""
        tid = self.next_tid
        self.next_tid += 1
        lanes.tids.append(tid)
        lanes.ends.append(-1)
        count = len(lanes.tids)
        label = lanes.name if count == 1 else f"{lanes.name} ({count})"
        self.metadata.append(_meta("thread_name", pid, tid, {"name": label}))
        self.metadata.append(
            _meta("thread_sort_index", pid, tid, {"sort_index": lanes.order * 1000 + count})
        )
        return count - 1

    def complete(
        self, pid: int, key: Any, name: str, category: str, start: int, end: int, args: dict
    ) -> None:
        """Add a complete event from ``start`` to ``end`` (ns) on the declared track ``key``."""
        end = max(end, start)
        lanes = self.lanes[(pid, key)]
        lane = next((index for index, busy in enumerate(lanes.ends) if busy <= start), None)
        if lane is None:
            lane = self._new_lane(pid, lanes)
        lanes.ends[lane] = end
        tid = lanes.tids[lane]
        self.events.append(
            {
                "name": name,
                "cat": category,
                "ph": "X",
                "ts": _us(start),
                "dur": _us(end - start),
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )


def _meta(kind: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _run_args(event: Event) -> dict[str, Any]:
    return {
        "vertex": event.vertex,
        "step": event.step,
        "gpus": gpu_span(event.gpus),
        "start_s": event.start,
        "end_s": event.end,
        "duration_s": event.end - event.start,
    }


def perfetto_trace(
    trace: Trace,
    hardware: Hardware,
    *,
    instance_name: str = "",
    max_gpu_tracks: int = MAX_GPU_TRACKS,
    pools: Sequence[Pool] = (),
) -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object.

    Parameters
    ----------
    trace
        A simulated trace (its events' times in seconds).
    hardware
        The cluster it ran on (GPU count, nodes, racks).
    instance_name
        Named in ``otherData``.
    max_gpu_tracks
        Up to this many GPUs, one track per GPU grouped by node; beyond,
        one track per block.
    pools
        The instance's pools (:attr:`Instance.pools
        <rlplan.rpeg.schema.instance.Instance.pools>`); with more than one,
        nodes are each pool's and processes are named after their pool
        (``pool fast rack 0 node 0``, ``pool fast blocks (16 GPUs)``).

    Returns
    -------
    dict[str, Any]
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``;
        metadata events first, then complete events by start time.
    """
    builder = _Builder()
    per_gpu = hardware.num_gpus <= max_gpu_tracks
    runs = [event for event in trace.events if event.kind not in (*EDGE_KINDS, "cpu")]
    transfers = [event for event in trace.events if event.kind in EDGE_KINDS]
    stages = [event for event in trace.events if event.kind == "cpu"]
    spans = pool_spans(pools)
    if per_gpu:
        gpu_pid = _gpu_processes(builder, hardware, spans)
        transfer_pid = max(gpu_pid.values(), default=0) + 1
    else:
        block_pid = _block_processes(builder, hardware, spans, runs)
        transfer_pid = max(len(spans), 1) + 1
    for event in sorted(runs, key=lambda e: (e.start, e.end, e.vertex, e.step)):
        start, end = _ns(event.start), _ns(event.end)
        args = _run_args(event)
        compute = event.kind == "compute"
        name = event.vertex if compute else f"{event.vertex} {event.kind}"
        category = "run" if compute else event.kind
        if per_gpu:
            for gpu in event.gpus:
                builder.complete(gpu_pid[gpu], gpu, name, category, start, end, args)
        else:
            gpus = tuple(event.gpus)
            builder.complete(block_pid[gpus], gpus, name, category, start, end, args)
    if transfers:
        builder.process(transfer_pid, "transfers")
        edges: dict[tuple[str, str], int] = {}
        for event in sorted(transfers, key=lambda e: (e.start, e.end, e.vertex, e.step)):
            source = event.source[0] if event.source else "?"
            edge = (source, event.vertex)
            name = f"{source} -> {event.vertex}"
            if edge not in edges:
                edges[edge] = len(edges)
                builder.track(transfer_pid, edge, name, edges[edge])
            start, end = _ns(event.start), _ns(event.end)
            args = {
                "from": f"{source} step {event.source[1]}" if event.source else "",
                "to": f"{event.vertex} step {event.step}",
                "start_s": event.start,
                "end_s": event.end,
                "duration_s": event.end - event.start,
            }
            builder.complete(transfer_pid, edge, name, event.kind, start, end, args)
    if stages:
        _cpu_stages(builder, stages, transfer_pid + 1)
    builder.events.sort(key=lambda item: (item["ts"], item["pid"], item["tid"]))
    return {
        "traceEvents": builder.metadata + builder.events,
        "displayTimeUnit": "ms",
        "otherData": {
            "instance": instance_name,
            "makespan_s": trace.makespan,
            "step_time_s": trace.step_time,
            "k_eval": trace.k_eval,
            "gpus": hardware.num_gpus,
            "tracks": "per GPU" if per_gpu else "per block",
            **({"pools": {span.name: gpu_span(span.gpus) for span in spans}} if spans else {}),
        },
    }


def _gpu_processes(
    builder: _Builder, hardware: Hardware, spans: tuple[PoolSpan, ...]
) -> dict[int, int]:
    """One process per node (per pool's node with pools), one track per GPU; GPU -> pid."""
    gpu_pid: dict[int, int] = {}
    node_pid: dict[tuple[int, int], int] = {}
    for gpu in range(hardware.num_gpus):
        span = span_of(spans, gpu) if spans else None
        shape = hardware if span is None else span.pool.hardware
        first = 0 if span is None else span.first
        key = (first, (gpu - first) // shape.gpus_per_node)
        if key not in node_pid:
            node_pid[key] = len(node_pid) + 1
            rack, in_rack = divmod(key[1], shape.nodes_per_rack)
            pool = "" if span is None else f"pool {span.name} "
            builder.process(node_pid[key], f"{pool}rack {rack} node {in_rack}")
        gpu_pid[gpu] = node_pid[key]
        builder.track(gpu_pid[gpu], gpu, f"GPU {gpu}", gpu)
    return gpu_pid


def _block_processes(
    builder: _Builder, hardware: Hardware, spans: tuple[PoolSpan, ...], runs: list[Event]
) -> dict[tuple[int, ...], int]:
    """One process of blocks (one per pool with pools), one track per block; block -> pid."""
    blocks = sorted({tuple(event.gpus) for event in runs}, key=lambda g: (g[0], -len(g)))
    if not spans:
        builder.process(1, f"blocks ({hardware.num_gpus} GPUs)")
    for index, span in enumerate(spans):
        builder.process(index + 1, f"pool {span.name} blocks ({len(span.gpus)} GPUs)")
    block_pid = {}
    for order, gpus in enumerate(blocks):
        block_pid[gpus] = 1 + (spans.index(span_of(spans, gpus[0])) if spans else 0)
        builder.track(block_pid[gpus], gpus, f"GPUs {gpu_span(gpus)}", order)
    return block_pid


def _cpu_stages(builder: _Builder, stages: list[Event], pid: int) -> None:
    """CPU stages on process ``pid`` (``CPU``), one track per stage name."""
    builder.process(pid, "CPU")
    for order, name in enumerate(sorted({event.vertex for event in stages})):
        builder.track(pid, name, name, order)
    for event in sorted(stages, key=lambda e: (e.start, e.end, e.vertex, e.step)):
        args = {**_run_args(event), "gpus": "none (CPU)"}
        if event.source:
            args["after"] = f"{event.source[0]} step {event.source[1]}"
        builder.complete(
            pid, event.vertex, event.vertex, "cpu", _ns(event.start), _ns(event.end), args
        )


def write_perfetto(
    path: str | os.PathLike[str],
    trace: Trace,
    hardware: Hardware,
    *,
    instance_name: str = "",
    max_gpu_tracks: int = MAX_GPU_TRACKS,
    pools: Sequence[Pool] = (),
) -> None:
    """Write :func:`perfetto_trace` to ``path`` atomically (open it in ui.perfetto.dev)."""
    document = perfetto_trace(
        trace, hardware, instance_name=instance_name, max_gpu_tracks=max_gpu_tracks, pools=pools
    )
    write_json(os.fspath(path), document)
