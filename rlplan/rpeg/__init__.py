"""The domain: what an RL step is, how it may run, and what a plan of it costs.

Base modules: :mod:`~rlplan.rpeg.templates` (the step's execution graph),
:mod:`~rlplan.rpeg.errors` and :mod:`~rlplan.rpeg.interrupts`. Above them, in import order:
:mod:`~rlplan.rpeg.schema` (instances), :mod:`~rlplan.rpeg.model` (blocks, strategies, cost,
candidates, plans), :mod:`~rlplan.rpeg.evaluation` (the simulator, bounds, the problem) and
:mod:`~rlplan.rpeg.search` (baselines and the local search). Nothing here imports a solver
library.
"""
