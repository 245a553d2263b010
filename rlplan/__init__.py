"""rlplan: placement and parallelism planning for RL-for-LLM training steps.

The Python API (the README's "Python API" section runs it)::

    import rlplan

    result = rlplan.solve("instances/tiny_ppo_2gpu.yaml", time_limit=30)
    result.status, result.step_time       # e.g. Status.OPTIMAL, seconds per step
    result.placements["actor.generate"]   # {"block": ..., "dp": ..., "tp": ...}
    trace = rlplan.simulate("instances/tiny_ppo_2gpu.yaml", result.plan_document)

* :func:`solve` finds a plan (any backend of ``python main.py solve``);
* :func:`simulate` evaluates a plan with the exact simulator;
* :func:`load` builds the problem once so that both can reuse it.

Instances are YAML paths, mappings of the same schema, parsed
:class:`~rlplan.rpeg.schema.instance.Instance` objects or
:class:`~rlplan.rpeg.evaluation.problem.Problem` objects; bad input raises
:class:`InputError` (subclasses
:class:`InstanceError` and :class:`PlanError`) with a one-line message
naming the field. The ``rlplan`` console script runs the command line
(:mod:`rlplan.cli`).
"""

from __future__ import annotations

from rlplan.api import InstanceLike, PlanLike, Result, load, simulate, solve
from rlplan.rpeg.errors import InputError, InstanceError, PlanError
from rlplan.solvers.result import Status
from rlplan.version import __version__

__all__ = [
    "InputError",
    "InstanceError",
    "InstanceLike",
    "PlanError",
    "PlanLike",
    "Result",
    "Status",
    "__version__",
    "load",
    "simulate",
    "solve",
]
