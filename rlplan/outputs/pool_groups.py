"""Outputs grouped by GPU pool: each pool's GPUs, type, price and memory peak.

An instance with ``hardware.pools`` lays its pools one after another in the
flat GPU index (docs/plan-space.md#pools). The terminal summaries, the
reports, the Gantt chart and the Perfetto trace name the pool of each GPU
when there is more than one (docs/outputs.md#gpu-pools); a one-pool
instance gets no pool spans and its outputs are those of a one-type cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlplan.rpeg.evaluation.simulator import Trace
from rlplan.rpeg.schema.pools import Pool


@dataclass(frozen=True)
class PoolSpan:
    """One pool's GPUs in the flat index.

    Attributes
    ----------
    pool
        The pool (its name, hardware, price and preset).
    first
        Flat index of its first GPU.
    """

    pool: Pool
    first: int

    @property
    def name(self) -> str:
        """The pool's name."""
        return str(self.pool.name)

    @property
    def end(self) -> int:
        """One past the flat index of its last GPU."""
        return self.first + self.pool.hardware.num_gpus

    @property
    def gpus(self) -> range:
        """Flat indices of its GPUs."""
        return range(self.first, self.end)

    @property
    def gpu_type(self) -> str:
        """The preset it names, else its peak compute and memory per GPU."""
        if self.pool.preset is not None:
            return self.pool.preset
        hardware = self.pool.hardware
        return f"{hardware.flops_per_gpu / 1e12:g} TFLOP/s, {hardware.memory_per_gpu / 1e9:g} GB"

    @property
    def price(self) -> str:
        """Its price per GPU-hour, or an em dash when the instance gives none."""
        price = self.pool.price_per_gpu_hour
        return "—" if price is None else f"{price:g} per GPU-hour"

    def shape(self) -> str:
        """``racks x nodes_per_rack x gpus_per_node = N GPUs``."""
        hardware = self.pool.hardware
        return (
            f"{hardware.racks} x {hardware.nodes_per_rack} x {hardware.gpus_per_node} "
            f"= {hardware.num_gpus} GPUs"
        )


def pool_spans(pools: Sequence[Pool]) -> tuple[PoolSpan, ...]:
    """Each pool's span, in flat-index order; empty for a cluster of one pool."""
    if len(pools) <= 1:
        return ()
    spans, first = [], 0
    for pool in pools:
        spans.append(PoolSpan(pool, first))
        first += pool.hardware.num_gpus
    return tuple(spans)


def span_of(spans: Sequence[PoolSpan], gpu: int) -> PoolSpan:
    """The span holding flat GPU ``gpu``."""
    for span in spans:
        if span.first <= gpu < span.end:
            return span
    raise ValueError(f"no pool holds GPU {gpu}")


def pool_memory(trace: Trace, span: PoolSpan) -> tuple[float, float]:
    """(peak, usable capacity) per GPU of one pool, in bytes.

    The capacity is the simulator's (:attr:`Trace.gpu_capacity_bytes
    <rlplan.rpeg.evaluation.trace.Trace.gpu_capacity_bytes>`) when the trace
    has it, else the pool's usable memory.
    """
    peak = max((trace.peak_memory_bytes[gpu] for gpu in span.gpus), default=0.0)
    capacities = trace.gpu_capacity_bytes
    capacity = capacities[span.first] if capacities else span.pool.hardware.usable_memory
    return peak, capacity


def memory_lines(trace: Trace, spans: Sequence[PoolSpan], gigabytes) -> list[str]:
    """The terminal summary's memory lines, one per pool.

    Parameters
    ----------
    trace
        The simulated trace.
    spans
        The pools (:func:`pool_spans`, not empty).
    gigabytes
        Formats bytes as the summary does (``12.30 GB``).

    Returns
    -------
    list[str]
        ``memory       pool fast: peak 12.30 GB of 69.70 GB per GPU``, by pool.
    """
    lines = []
    for span in spans:
        peak, capacity = pool_memory(trace, span)
        lines.append(
            f"memory       pool {span.name}: peak {gigabytes(peak)} of {gigabytes(capacity)} "
            "per GPU"
        )
    return lines
