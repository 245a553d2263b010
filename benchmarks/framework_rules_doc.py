"""Print the rule tables of docs/frameworks.md from the frameworks' declarations.

``python -m benchmarks.framework_rules_doc`` writes, per framework, one
Markdown table of its rules (name, kind, what it allows, source), the part of
docs/frameworks.md below its introduction; tests/rpeg/test_framework_docs.py
checks the page still lists every rule with its source.
"""

from __future__ import annotations

from rlplan.rpeg.model.frameworks import FRAMEWORKS


def rule_tables() -> str:
    """The Markdown tables, one section per framework."""
    lines: list[str] = []
    for framework in FRAMEWORKS.values():
        lines += [f"### {framework.display} ({framework.release})", ""]
        lines += ["| rule | kind | what it allows | source |", "|---|---|---|---|"]
        for rule in framework.rules:
            kind = type(rule).__name__ + (" (fixed)" if getattr(rule, "fixed", False) else "")
            lines.append(f"| `{rule.name}` | {kind} | {rule.words} | {rule.source} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(rule_tables())
