"""The plan space slime can express (docs/plan-space.md#framework-plan-spaces)."""

from __future__ import annotations

from rlplan.rpeg.model.frameworks.rules import Framework

FRAMEWORK = Framework(name="slime", display="slime", release="", rules=())
