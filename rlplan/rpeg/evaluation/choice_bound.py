"""A makespan bound of every plan that gives one vertex a given candidate.

A plan that runs vertex v with a candidate of time t on g GPUs has every
other vertex at no less than its fastest time and no less than its least
GPU-seconds, so its makespan is at least the larger of

* the longest path of the ``k_eval`` unrolled steps with v at t and every
  other vertex at its fastest time (no transfer lags, the fixed delays of
  data edges, every trained model at its largest staleness candidate), and
* the busy-window bound of the same graph with v's GPU-seconds g·t on its
  pool and every other vertex's least GPU-seconds on the cluster (with
  h = t = 0 it is the area bound: ``k_eval`` steps of GPU-seconds over the
  GPUs).

A rollout engine on every GPU of a one-pool cluster shares its GPUs with
every other vertex, so it wakes and sleeps in every plan: t is then its time
plus both (as in :func:`rlplan.rpeg.evaluation.area_bound.vertex_choices`).
Both terms only grow with t, so a candidate whose bound is above the best
known makespan is in no plan that beats it: the exact models leave those
assignments out (docs/formulation.md#assignments-no-better-plan-can-use).
"""

from __future__ import annotations

from collections.abc import Callable

from rlplan.rpeg.evaluation.area_bound import path_bound, vertex_choices, window_bound
from rlplan.rpeg.model.candidates import Candidate, CandidateDirectory
from rlplan.rpeg.model.shapes import pool_of
from rlplan.rpeg.templates import Kind


class ChoiceBound:
    """Lower bounds (s) on the makespan of the plans that give one vertex one candidate.

    Parameters
    ----------
    directory
        The plan space.
    switch
        The simulator's ``switch(vertex, strategy, pool)`` (an engine's wake
        and sleep); None leaves the forced wake and sleep out.
    """

    def __init__(self, directory: CandidateDirectory, switch: Callable | None = None) -> None:
        instance, template = directory.instance, directory.template
        self.count, k_eval = len(template.vertices), instance.k_eval
        staleness = {
            model: max(instance.optimizer.staleness_candidates[model])
            for model in template.trained_models
        }
        self.path = path_bound(template, k_eval, staleness)
        self.window = window_bound(template, k_eval, staleness)
        # Each vertex's (time, GPU-seconds) front per shape: its least of each lies on it.
        choices = vertex_choices(directory)
        self.fastest = [min((c.time for c in cs), default=float("inf")) for cs in choices]
        self.least_area = [min((c.area for c in cs), default=0.0) for cs in choices]
        self.pool_gpus = [pool.hardware.num_gpus for pool in instance.pools]
        self.switch = switch if self.count > 1 else None
        self.engines = {
            v for v, vertex in enumerate(template.vertices) if vertex.kind is Kind.GENERATE
        }
        self.num_gpus = instance.num_gpus

    def forced_switch(self, vertex: int, shape: tuple) -> bool:
        """Whether ``vertex`` on ``shape`` is an engine that wakes and sleeps in every plan."""
        return self.switch is not None and vertex in self.engines and gpus(shape) == self.num_gpus

    def __call__(self, vertex: int, shape: tuple, candidate: Candidate) -> float:
        """The bound of the plans running ``vertex`` as ``candidate`` on a block of ``shape``."""
        time = candidate.time
        if self.forced_switch(vertex, shape):
            time += sum(self.switch(vertex, candidate.strategy, pool_of(shape)))
        return self.of_time(vertex, time, gpus(shape), pool_of(shape))

    def of_time(self, vertex: int, time: float, size: int, pool: int) -> float:
        """The bound of the plans running ``vertex`` for ``time`` s on ``size`` GPUs of ``pool``."""
        times, areas = list(self.fastest), list(self.least_area)
        pools: list[int | None] = [None] * self.count
        times[vertex], areas[vertex], pools[vertex] = time, size * time, pool
        return max(self.path(times), self.window(times, areas, pools, self.pool_gpus))

    def usable(
        self, vertex: int, shape: tuple, candidates: tuple[Candidate, ...], limit: float
    ) -> tuple[Candidate, ...]:
        """The candidates of ``vertex`` on ``shape`` whose bound is at most ``limit`` (s).

        The bound grows with the candidate's time and candidates come fastest
        first, so the first one above ``limit`` ends the list, except where
        the wake and sleep, which differ by strategy, are added.
        """
        if self.forced_switch(vertex, shape):
            return tuple(c for c in candidates if self(vertex, shape, c) <= limit)
        for index, candidate in enumerate(candidates):
            if self(vertex, shape, candidate) > limit:
                return candidates[:index]
        return candidates


def gpus(shape: tuple) -> int:
    """GPUs of a block shape."""
    return shape[0] * shape[1] * shape[2]
