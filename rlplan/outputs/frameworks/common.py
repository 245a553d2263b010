"""What every framework exporter needs: the plan's facts and an ordered list of settings.

:class:`PlanFacts` restates a plan through :func:`rlplan.outputs.vocabulary.framework_view`
(micro-batch sizes per GPU, the rollout's ``gpu_memory_utilization`` and
``max_num_seqs``, tp/pp/dp) plus
the blocks, so an exporter can ask which vertices share a block. A
:class:`Settings` collects, in order, the keys an exporter sets and the
comment lines it writes; each framework module renders it in its own syntax
(Hydra overrides, command-line flags, YAML).

Conventions shared by the exporters:

* ``gpu_memory_utilization`` and ``max_num_seqs`` are the plan's rollout
  strategy (the fraction is written rounded *up* to the hundredth, so the
  engine never gets less than the plan counts);
* micro-batch sizes are sequences per GPU (per data-parallel replica), token
  budgets are those sequences times the mean tokens per sequence, rounded up;
* whatever the framework cannot express is written as a comment line
  ``# not expressible in <framework>: ...``, never dropped;
* expert and context parallel keys (ep, etp, cp: :meth:`PlanFacts.degrees`)
  are written for vertices of mixture-of-experts models, and cp also where it
  is above 1, so dense plans export as they did before those dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlplan.outputs.pool_groups import pool_spans
from rlplan.outputs.vocabulary import framework_view, reward_rule_words
from rlplan.rpeg.evaluation.problem import Problem
from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.model.plan import Plan
from rlplan.rpeg.schema.pools import Pool
from rlplan.rpeg.strategy import dimension

#: The strategy dimensions the exporters translate, as declared: their labels
#: key the framework view's entries and name them in "not expressible" lines.
RECOMPUTE = dimension("recompute")
SHARDING = dimension("sharding")
OFFLOAD = dimension("offload")


def round_up(value: float, digits: int = 2) -> float:
    """``value`` rounded up to ``digits`` decimals (0.4759 -> 0.48), never below it.

    Parameters
    ----------
    value
        A non-negative number.
    digits
        Decimals kept.

    Returns
    -------
    float
        The smallest multiple of ``10**-digits`` at least ``value`` (up to a
        1e-9 relative tolerance, so 0.48 stays 0.48).
    """
    scale = 10**digits
    return math.ceil(value * scale * (1 - 1e-9)) / scale


def gpus_words(block: Block) -> str:
    """``GPUs 0-15``, ``GPU 3`` or ``GPUs 0-1,8-9`` (a sliced block)."""
    if block.size == 1:
        return f"GPU {block.start}"
    return "GPUs " + block.label().removeprefix("gpus ")


@dataclass
class Settings:
    """Ordered settings and comment lines of one exported configuration.

    Attributes
    ----------
    framework
        The framework's display name (``verl``, ``OpenRLHF``, ``NeMo RL``).
    items
        ``("set", key, value)``, ``("comment", text, None)`` entries in order.
    """

    framework: str
    items: list[tuple[str, str, Any]] = field(default_factory=list)

    def set(self, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` (a later call for the same key replaces the value)."""
        for index, (kind, existing, _) in enumerate(self.items):
            if kind == "set" and existing == key:
                self.items[index] = ("set", key, value)
                return
        self.items.append(("set", key, value))

    def comment(self, text: str) -> None:
        """A comment line (``# text``)."""
        self.items.append(("comment", text, None))

    def unsupported(self, text: str) -> None:
        """A setting of the plan the framework cannot express, as ``# not expressible in ...``."""
        self.comment(f"not expressible in {self.framework}: {text}")

    def value(self, key: str) -> Any:
        """The value set for ``key`` (``KeyError`` when it was not set)."""
        for kind, existing, value in self.items:
            if kind == "set" and existing == key:
                return value
        raise KeyError(key)


class PlanFacts:
    """A plan in framework terms, with its blocks.

    Parameters
    ----------
    problem
        The instance's problem.
    plan
        The plan to export.
    """

    def __init__(self, problem: Problem, plan: Plan) -> None:
        problem = problem.for_plan(plan)
        self.problem = problem
        self.plan = plan
        self.instance = problem.instance
        self.trace = problem.simulator.simulate(plan)
        self.view = framework_view(problem, plan, self.trace)
        names = problem.directory.template.names
        self.blocks: dict[str, Block] = {
            name: placement.block for name, placement in zip(names, plan.placements, strict=True)
        }
        self.strategies: dict[str, Strategy] = {
            name: placement.strategy for name, placement in zip(names, plan.placements, strict=True)
        }
        self.staleness = plan.staleness_map

    def has(self, name: str) -> bool:
        """Whether the plan has vertex ``name``."""
        return name in self.blocks

    @property
    def reward_rule(self) -> dict[str, Any] | None:
        """The rule reward's view (:func:`~rlplan.outputs.vocabulary.reward_rule_view`), or None."""
        return self.view.get("reward_rule")

    def reward_rule_comment(self, settings: Settings, how: str) -> None:
        """A comment line on the rule reward's CPU stage and how the framework runs it."""
        rule = self.reward_rule
        assert rule is not None
        settings.comment(f"{reward_rule_words(rule)}; {how}")

    def entry(self, name: str) -> dict[str, Any]:
        """The :func:`~rlplan.outputs.vocabulary.framework_view` entry of vertex ``name``."""
        return self.view["vertices"][name]

    def block(self, name: str) -> Block:
        """The block of vertex ``name``."""
        return self.blocks[name]

    def layout(self, name: str) -> tuple[int, int, int]:
        """(tp, pp, dp) of vertex ``name``."""
        entry = self.entry(name)
        return (entry["tp"], entry["pp"], entry["dp"])

    def degrees(self, name: str) -> tuple[int, int, int]:
        """(ep, etp, cp) of vertex ``name`` (1 where its kind has no such dimension)."""
        strategy = self.strategies[name]
        return (strategy.ep, strategy.etp, strategy.cp)

    def mixture(self, name: str) -> bool:
        """Whether vertex ``name`` runs a mixture-of-experts model (``experts`` given)."""
        return self.instance.models[self.entry(name)["model"]].is_moe

    def same_block(self, first: str, second: str) -> bool:
        """Whether two vertices run on the same block."""
        return self.blocks[first] == self.blocks[second]

    def disjoint(self, first: str, second: str) -> bool:
        """Whether two vertices share no GPU."""
        return not self.blocks[first].intersects(self.blocks[second])

    def where(self, name: str) -> str:
        """``actor.train on GPUs 0-15 (tp 1, pp 2, dp 8)``."""
        tp, pp, dp = self.layout(name)
        return f"{name} on {gpus_words(self.blocks[name])} (tp {tp}, pp {pp}, dp {dp})"

    def nodes(self, name: str) -> tuple[int, int]:
        """(nodes, GPUs per node) of vertex ``name``'s block."""
        racks, nodes, gpus = self.blocks[name].extent
        return racks * nodes, gpus

    def cluster_nodes(self) -> tuple[int, int]:
        """(nodes, GPUs per node) of the whole cluster."""
        hardware = self.instance.hardware
        return hardware.racks * hardware.nodes_per_rack, hardware.gpus_per_node

    def utilization(self, name: str) -> float:
        """The rollout's ``gpu_memory_utilization`` (the plan's), rounded up to the hundredth."""
        return round_up(self.entry(name)["gpu_memory_utilization"])

    def micro_batch(self, name: str) -> int:
        """Sequences per microbatch and GPU of a train or infer vertex."""
        return int(self.entry(name)["micro_batch_size_per_gpu"])

    def micro_tokens(self, name: str) -> int:
        """Tokens per microbatch and GPU of a train or infer vertex, rounded up."""
        return math.ceil(self.entry(name)["micro_batch_tokens_per_gpu"] - 1e-9)

    def header(self, settings: Settings, plan_name: str, how: str) -> None:
        """The comment lines every export starts with."""
        hardware = self.instance.hardware
        workload = self.instance.workload
        shape = f"{hardware.racks} x {hardware.nodes_per_rack} x {hardware.gpus_per_node} GPUs"
        if len(self.instance.pools) > 1:
            shape = pools_words(self.instance.pools)
        settings.comment(
            f"{settings.framework} settings for plan {plan_name} "
            f"(instance {self.instance.name}: {self.instance.algorithm}, "
            f"{workload.batch_size} prompts x {workload.samples_per_prompt} samples, {shape})"
        )
        settings.comment(how)
        if not self.trace.feasible:
            settings.comment(f"warning: this plan {self.trace.overflow_words()} in simulation")


def pools_words(pools: Sequence[Pool]) -> str:
    """``pools fast 1 x 1 x 2 (H100), wide 1 x 2 x 1 (H20)``: each pool's shape and GPU type."""
    parts = []
    for where in pool_spans(pools):
        hardware = where.pool.hardware
        parts.append(
            f"{where.name} {hardware.racks} x {hardware.nodes_per_rack} x "
            f"{hardware.gpus_per_node} ({where.gpu_type})"
        )
    return "pools " + ", ".join(parts)


def optimizer_steps(instance: Any) -> int:
    """Optimizer steps per RL step: the workload's ``optimizer_steps``.

    The step's ``B*K`` sequences make ``optimizer_steps`` global batches of
    ``B*K / optimizer_steps`` each (rlplan/rpeg/schema/workload.py, which
    checks that it divides ``B*K``); the cost model times one gradient
    synchronisation per global batch (docs/cost-model.md).

    Parameters
    ----------
    instance
        The plan's instance.

    Returns
    -------
    int
        A positive count dividing ``B*K``.
    """
    return instance.workload.optimizer_steps


def fitting_micro_batch(sequences: int, dps: list[int], limit: int) -> int | None:
    """The largest micro-batch m <= ``limit`` with ``sequences`` a multiple of m x dp for each dp.

    Trainers that take a global batch and a micro-batch per GPU need the
    global batch to be micro-batch x accumulation steps x dp (DeepSpeed:
    deepspeed/runtime/config.py ``DeepSpeedConfig._batch_assertion``). The
    plan's micro-batch, ``ceil(ceil(B*K / dp) / mb)`` sequences, may not divide
    evenly; the largest one not above it that does keeps the plan's memory.

    Parameters
    ----------
    sequences
        The global batch (sequences per optimizer step).
    dps
        Data-parallel sizes of every group the global batch is split over.
    limit
        The plan's micro-batch (sequences per GPU).

    Returns
    -------
    int or None
        The micro-batch, or None when none fits (``sequences`` is no multiple
        of some dp).
    """
    for micro in range(max(limit, 1), 0, -1):
        if all(sequences % (micro * dp) == 0 for dp in dps):
            return micro
    return None
