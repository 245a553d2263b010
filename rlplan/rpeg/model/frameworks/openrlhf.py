"""The plan space OpenRLHF can express (docs/plan-space.md#framework-plan-spaces)."""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import Framework

FRAMEWORK = Framework(name="openrlhf", display="OpenRLHF", release="", rules=())
