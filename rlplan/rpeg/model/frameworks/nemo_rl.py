"""The plan space NeMo RL can express (docs/plan-space.md#framework-plan-spaces)."""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import Framework

FRAMEWORK = Framework(name="nemo-rl", display="NeMo RL", release="", rules=())
