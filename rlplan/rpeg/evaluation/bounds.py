"""Lower bounds on the makespan of ``k_eval`` steps, valid over the whole plan space."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlplan.rpeg.evaluation.area_bound import (
    area_path_bound,
    path_bound,
    vertex_choices,
    window_bound,
)
from rlplan.rpeg.model.candidates import CandidateDirectory


@dataclass(frozen=True)
class LowerBounds:
    """The plan-independent lower bounds (seconds of makespan).

    Attributes
    ----------
    compute
        Total FLOPs of ``k_eval`` steps at peak on every GPU. Valid because a
        run's time on n GPUs is at least its FLOPs over ``n * peak`` (the
        model only adds efficiency losses, rounding and communication). With
        GPU pools the cluster's peak is the sum of each pool's GPUs times its
        peak: however the runs are spread over the pools, no more FLOPs are
        done per second.
    critical_path
        Longest path of the unrolled graph with every vertex at its fastest
        candidate, no transfer lag (but the fixed delay of a data edge, a
        rule reward's stage, which every plan pays), and every trained model
        at its largest staleness candidate (the fewest edges). Under the
        steady-state objective: ``k_eval`` times :func:`steady_cycle_bound`.
    area_path
        The smallest, over every choice of one candidate per vertex, of the
        larger of that choice's critical path and its ``k_eval`` steps of
        GPU-seconds spread over the GPUs (each pool's over that pool's) and,
        for the makespan objective, its busy windows (the runs that start
        after a head and end before a tail share the GPUs in between): runs
        hold their GPUs exclusively (:mod:`rlplan.rpeg.evaluation.area_bound`).
        At least :attr:`critical_path`.
    """

    compute: float
    critical_path: float
    area_path: float = 0.0

    @property
    def best(self) -> float:
        """The largest (tightest) of the three."""
        return max(self.compute, self.critical_path, self.area_path)

    @property
    def source(self) -> str:
        """Which one is :attr:`best`: ``area_path``, ``critical_path`` or ``compute``.

        On a tie the simpler bound is named: the critical path before the
        area-and-path bound, which equals it when the area does not bind.
        """
        if self.critical_path >= max(self.compute, self.area_path):
            return "critical_path"
        return "area_path" if self.area_path >= self.compute else "compute"


def lower_bounds(
    directory: CandidateDirectory, on_policy: bool = False, switch: Callable | None = None
) -> LowerBounds:
    """Compute the lower bounds for an instance.

    ``on_policy`` bounds only the plans whose trained models all have
    staleness 0 (its critical path then has every pub edge of step 0).
    ``switch`` (the simulator's ``switch``) adds a rollout engine's wake and
    sleep where its block forces colocation (:func:`vertex_choices`).
    """
    instance, template = directory.instance, directory.template
    # A vertex's FLOPs are the pool's alike (they count the model's work only).
    flops = sum(directory.cost.vertex_flops(vertex) for vertex in template.vertices)
    peak = sum(pool.hardware.flops_per_gpu * pool.hardware.num_gpus for pool in instance.pools)
    compute = instance.k_eval * flops / peak
    fastest = []
    for index in range(len(template.vertices)):
        candidate = directory.fastest(index)
        fastest.append(candidate.time if candidate is not None else float("inf"))
    staleness = {
        model: 0 if on_policy else max(instance.optimizer.staleness_candidates[model])
        for model in template.trained_models
    }
    k_eval = instance.k_eval
    if instance.steady_state:

        def path(times):
            return k_eval * steady_cycle_bound(template, times, staleness)

        window = None
    else:
        path = path_bound(template, k_eval, staleness)
        window = window_bound(template, k_eval, staleness)
    critical = path(fastest)
    pool_gpus = [pool.hardware.num_gpus for pool in instance.pools]
    area_path = area_path_bound(
        vertex_choices(directory, switch), path, pool_gpus, k_eval, window=window
    )
    return LowerBounds(compute=compute, critical_path=critical, area_path=area_path)


def steady_cycle_bound(template, fastest: list[float], staleness: dict[str, int]) -> float:
    """A lower bound on the steady-state period of every plan (s).

    Every cycle of a plan's event graph bounds its period by its weight over
    its height (docs/simulator.md, "The steady-state period"): a vertex's
    chain gives its fastest time, and a pub edge from w to u at staleness σ
    closes the cycle u -> ... -> w -> u of one step's data edges, of height
    1 + σ, whose weight is at least the longest path from u to w at the
    fastest times with the fixed delays and no transfer lags.
    """
    count = len(template.vertices)
    delays = template.data_delays
    bound = max(fastest, default=0.0)
    for pub in template.pub_edges:
        # Longest path from pub.dst, every vertex's run included; data edges go forward.
        reach = [float("-inf")] * count
        reach[pub.dst] = fastest[pub.dst]
        for _ in range(count):
            for index, edge in enumerate(template.data_edges):
                delay = delays[index] if index < len(delays) else 0.0
                value = reach[edge.src] + delay + fastest[edge.dst]
                if value > reach[edge.dst]:
                    reach[edge.dst] = value
        if reach[pub.src] > float("-inf"):
            sigma = staleness[pub.staleness_model] if pub.staleness_model is not None else 0
            bound = max(bound, reach[pub.src] / (1 + sigma))
    return bound
