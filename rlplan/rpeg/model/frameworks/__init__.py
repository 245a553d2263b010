"""Framework plan spaces: the rules of verl, NeMo RL, OpenRLHF and slime.

One module per framework, each with ``FRAMEWORK``, a
:class:`~rlplan.rpeg.model.frameworks.rules.Framework` whose rules cite the
release they are read from (docs/plan-space.md#framework-plan-spaces).
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks import nemo_rl, openrlhf, slime, verl
from rlplan.rpeg.model.frameworks.rules import Framework, plan_problems

#: ``engine.framework`` / ``--framework`` name -> its plan space.
FRAMEWORKS: dict[str, Framework] = {
    module.FRAMEWORK.name: module.FRAMEWORK for module in (verl, nemo_rl, openrlhf, slime)
}

__all__ = ["FRAMEWORKS", "Framework", "plan_problems"]
