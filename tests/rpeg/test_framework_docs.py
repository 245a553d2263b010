"""docs/frameworks.md lists every rule of every framework, with its source, as the code has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplan.rpeg.model.frameworks import FRAMEWORKS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "frameworks.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_every_rule_is_documented_with_its_source(name):
    framework = FRAMEWORKS[name]
    section = DOC.split(f"### {framework.display} ({framework.release})")[1].split("\n### ")[0]
    for rule in framework.rules:
        assert f"| `{rule.name}` |" in section, rule.name
        assert rule.source in section, rule.name


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_every_rule_cites_a_release_and_says_what_lifting_it_needs(name):
    framework = FRAMEWORKS[name]
    assert framework.release
    names = [rule.name for rule in framework.rules]
    assert len(names) == len(set(names))
    for rule in framework.rules:
        assert rule.words and rule.need and rule.source, rule.name
