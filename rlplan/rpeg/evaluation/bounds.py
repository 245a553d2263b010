"""Lower bounds on the makespan of ``k_eval`` steps, valid over the whole plan space."""

from __future__ import annotations

from dataclasses import dataclass

from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.templates import unroll


@dataclass(frozen=True)
class LowerBounds:
    """The two plan-independent lower bounds of the specification (seconds of makespan).

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
    """

    compute: float
    critical_path: float

    @property
    def best(self) -> float:
        """The larger (tighter) of the two."""
        return max(self.compute, self.critical_path)

    @property
    def source(self) -> str:
        """Which of the two is :attr:`best`: ``critical_path`` or ``compute``."""
        return "critical_path" if self.critical_path >= self.compute else "compute"


def lower_bounds(directory: CandidateDirectory, on_policy: bool = False) -> LowerBounds:
    """Compute both lower bounds for an instance.

    ``on_policy`` bounds only the plans whose trained models all have
    staleness 0 (its critical path then has every pub edge of step 0).
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
    count = len(template.vertices)
    delays = template.data_delays
    finish = [0.0] * (count * instance.k_eval)
    predecessors: dict[int, list[tuple[int, float]]] = {}
    for edge in unroll(template, instance.k_eval, staleness):
        delay = delays[edge.template_edge] if 0 <= edge.template_edge < len(delays) else 0.0
        predecessors.setdefault(edge.dst, []).append((edge.src, delay))
    for run in range(count * instance.k_eval):  # run ids are a topological order
        ready = max((finish[p] + delay for p, delay in predecessors.get(run, ())), default=0.0)
        finish[run] = ready + fastest[run % count]
    critical = max(finish)
    if instance.steady_state:
        critical = instance.k_eval * steady_cycle_bound(template, fastest, staleness)
    return LowerBounds(compute=compute, critical_path=critical)


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
