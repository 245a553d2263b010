"""Group move: repartition the GPUs among the vertices of one DAG depth at once.

The inference vertices of a PPO step (actor, reference, reward, critic) run
between generation and training and depend on nothing but the rollout. On
the whole cluster they run one after another; in two halves they run side
by side, each twice as long, the step a little shorter. One vertex at a time
the path between the two is uphill: the first vertex to move to a half runs
twice as long while the others still hold every GPU. :func:`repartition_group`
takes the whole step: it puts one depth group on one of its best-ranked
partitions of the cluster (the concurrent baseline's,
:func:`rlplan.rpeg.search.baselines.group_options`), each vertex on its
fastest strategy there that fits in memory (docs/solvers.md#local).
"""

from __future__ import annotations

import random
import weakref
from typing import TYPE_CHECKING

from rlplan.rpeg.evaluation.simulator import Simulator
from rlplan.rpeg.model.candidates import CandidateDirectory
from rlplan.rpeg.model.frameworks.conform import conform, framework_problems
from rlplan.rpeg.model.plan import Placement, Plan
from rlplan.rpeg.search.baselines import GroupOption, depth_groups, group_options
from rlplan.rpeg.search.state import SearchState

if TYPE_CHECKING:
    from rlplan.rpeg.search.moves import MoveContext

#: Fastest candidates of a moved vertex tried before it keeps its leanest one.
FIT_TRIES = 16

#: Largest depth group whose partitions are ranked (the set partitions of n vertices
#: grow as the Bell numbers: 15 for 4, 203 for 6).
LARGEST_GROUP = 6


def _ranked(directory: CandidateDirectory) -> list[list[GroupOption]]:
    """The ranked partitions (:func:`~rlplan.rpeg.search.baselines.group_options`) of
    each depth group of two to :data:`LARGEST_GROUP` vertices that has two or more;
    looked up once per directory, since the move asks on every proposal."""
    found = _RANKED.get(directory)
    if found is None:
        found = [
            options
            for options in (
                group_options(group, directory)
                for group in depth_groups(directory)
                if 2 <= len(group) <= LARGEST_GROUP
            )
            if len(options) > 1
        ]
        _RANKED[directory] = found
    return found


#: Each directory's movable depth groups' partitions, weakly keyed.
_RANKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def groups_repartition(directory: CandidateDirectory) -> bool:
    """Whether some depth group has two vertices or more and two partitions or more."""
    return bool(_ranked(directory))


def repartition(plan: Plan, option: GroupOption, simulator: Simulator) -> Plan | None:
    """``plan`` with one group's vertices on ``option``'s blocks, each on the fastest
    strategy that fits; None if the group does not fit even on its leanest strategies.

    First fit, not a full repair: every moved vertex first takes its leanest candidate
    on its new block (the least resident memory, which the vertices sharing a GPU
    hold at once, then the least in all); if that plan overflows, nothing fits. Then each
    vertex in turn takes the first of its :data:`FIT_TRIES` fastest candidates that
    keeps the plan within memory. A proposal costs at most ``1 + FIT_TRIES`` memory
    checks per vertex (a full :func:`~rlplan.rpeg.search.baselines.repair_memory`
    scans every candidate of every vertex per step, hundreds of checks).
    """
    directory = simulator.directory
    moved = [
        (vertex, directory.options[vertex][block.extent], block)
        for vertex, (block, _) in option[2].items()
    ]
    for vertex, candidates, block in moved:
        leanest = min(candidates, key=lambda c: (c.resident, c.memory, c.time))
        plan = plan.with_placement(vertex, Placement(block, leanest.strategy))
    plan = conform(directory, plan)
    if simulator.memory_violation(plan) > 0:
        return None
    for vertex, candidates, block in moved:
        current = plan.placements[vertex].strategy
        for candidate in candidates[:FIT_TRIES]:
            if candidate.strategy == current:
                break  # the candidates are fastest first: the rest are slower
            trial = conform(
                directory, plan.with_placement(vertex, Placement(block, candidate.strategy))
            )
            if simulator.memory_violation(trial) <= 0:
                plan = trial
                break
    return None if framework_problems(directory, plan) else plan


def repartition_group(state: SearchState, context: MoveContext, rng: random.Random) -> list[Plan]:
    """One depth group on another of its best-ranked partitions, fitted in memory
    (:func:`repartition`); no proposal when it does not fit or changes nothing."""
    simulator = context.simulator
    # the simulator's memory check is that of its own directory: the fused AC-share
    # variant's context carries none
    if simulator is None or simulator.directory is not context.directory:
        return []
    ranked = _ranked(context.directory)
    if not ranked:
        return []
    options = rng.choice(ranked)
    plan = repartition(state.plan, rng.choice(options), simulator)
    return [] if plan is None or plan == state.plan else [plan]
