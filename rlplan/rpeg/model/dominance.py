"""Exact dominance pruning of the candidate directory (docs/cost-model.md#dominance-pruning).

A candidate is dominated when another of the same vertex and shape is no
slower and needs no more resident, transient and host memory, and replacing
it changes nothing else a plan's evaluation reads. Replacing it then never
lengthens a schedule nor raises a GPU's or a node's peak, so the optimum over
the plan space is unchanged.

What else an evaluation reads of a strategy is its pub lags. A pub lag
(:meth:`CostModel.pub_lag <rlplan.rpeg.model.cost.CostModel.pub_lag>`, and a
refit, :meth:`ColocationCosts.refit_lag
<rlplan.rpeg.model.colocation.ColocationCosts.refit_lag>`) depends on whether
the source's and the destination's weight layouts are equal and on the
destination's weight shard; the simulator caches it by the two layouts. So
candidates are compared only within one layout, (tp, pp, ZeRO-3 shards, ep,
etp) (:attr:`Strategy.layout <rlplan.rpeg.model.cost.Strategy.layout>`),
where a pub edge touches the vertex. The context parallel degree is not part
of it: context parallel ranks hold the same weights, and no pub lag, refit,
wake or sleep reads it (tests/rpeg/test_moe_plan_space.py checks that every
lag is a function of the layouts; docs/plan-space.md#expert-and-context-parallelism).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlplan.rpeg.strategy import DIMENSIONS

if TYPE_CHECKING:
    from rlplan.rpeg.model.candidates import Candidate


def candidate_order(candidate: Candidate) -> tuple:
    """Fastest first, then leanest, then the strategy's fields: a total order of one
    vertex's candidates on one shape."""
    strategy = candidate.strategy
    return (
        candidate.time,
        candidate.memory,
        strategy.tp,
        strategy.pp,
        strategy.microbatches,
        # One vertex's candidates differ only in the dimensions of its kind, so
        # declaration order is the tie-break order.
        *(getattr(strategy, declared.name) for declared in DIMENSIONS),
    )


def dominance_key(
    candidate: Candidate,
    layout_free: bool,
    apart: tuple[str, ...] = (),
    destination: bool = True,
) -> tuple:
    """Candidates compared for dominance: those whose pub lags are the same.

    Parameters
    ----------
    candidate
        The candidate.
    layout_free
        Whether no pub edge touches the vertex: its layout then does not matter.
    apart
        Strategy fields that must also agree (those a framework rule reads).
    destination
        Whether a pub edge ends at the vertex: the lag then reads its weight
        shard, so the whole layout must agree. A vertex that is only a pub
        source needs the layout only for the equal-layout test, and a ZeRO-3
        layout sharded over dp > 1 equals no user's layout: every such
        candidate pays the same pub lags whatever its (tp, pp, ep, etp).
    """
    kept = tuple(getattr(candidate.strategy, name) for name in apart)
    if layout_free:
        return kept
    layout = candidate.strategy.layout
    if destination or layout[2] == 1:
        return (*kept, *layout)
    return (*kept, "sharded over dp")


def non_dominated(
    candidates: list[Candidate],
    layout_free: bool = False,
    apart: tuple[str, ...] = (),
    destination: bool = True,
) -> list[Candidate]:
    """The candidates no other of the same :func:`dominance_key` dominates."""
    groups: dict[tuple, list[Candidate]] = {}
    for candidate in candidates:
        key = dominance_key(candidate, layout_free, apart, destination)
        groups.setdefault(key, []).append(candidate)
    kept = []
    for group in groups.values():
        group.sort(key=lambda c: (c.time, c.resident, c.transient, c.host, *candidate_order(c)))
        front: list[Candidate] = []
        for candidate in group:
            dominated = any(
                other.time <= candidate.time
                and other.resident <= candidate.resident
                and other.transient <= candidate.transient
                and other.host <= candidate.host
                for other in front
            )
            if not dominated:
                front.append(candidate)
        kept.extend(front)
    return kept
