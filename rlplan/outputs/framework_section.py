"""The "Framework settings" section of the reports, built once for report.md and report.html.

:func:`framework_section` turns a :func:`~rlplan.outputs.vocabulary.framework_view`
document into text and tables with no markup of either format;
:func:`section_markdown` writes them as report.md's section
(:func:`rlplan.outputs.vocabulary.framework_markdown`) and
:mod:`rlplan.outputs.report_html` as report.html's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlplan.outputs.vocabulary import (
    FRAMEWORK_KEYS,
    PIN_MARK,
    _dimension_cell,
    _gpus_label,
    _mark,
    reward_rule_words,
)
from rlplan.rpeg.strategy import DIMENSIONS, Dimension

#: The frameworks of the "Where to set it" table, in its column order.
WHERE_FRAMEWORKS = ("verl", "NeMo RL", "OpenRLHF")


@dataclass(frozen=True)
class FrameworkSection:
    """The section's content. Table cells and texts may quote settings in backticks.

    Attributes
    ----------
    fused
        The fused actor-critic template in words (None for separate models).
    intro
        Sequences, tokens and what the micro-batch and concurrency columns mean.
    columns, rows
        The settings table: one row per vertex (pinned cells end with
        :data:`~rlplan.outputs.vocabulary.PIN_MARK`).
    pin_note
        What the pin mark means (None when nothing is pinned).
    reward
        The rule reward's CPU stage in words (None for a reward model).
    lists
        Titled lists: colocated groups, concurrent pairs, staleness.
    where_columns, where_rows
        The "Where to set it" table: each setting's key in each framework.
    """

    fused: str | None
    intro: str
    columns: tuple[str, ...]
    rows: list[list[str]]
    pin_note: str | None
    reward: str | None
    lists: list[tuple[str, list[str]]]
    where_columns: tuple[str, ...]
    where_rows: list[list[str]]


def framework_section(view: dict[str, Any]) -> FrameworkSection:
    """The section of ``view`` (a :func:`~rlplan.outputs.vocabulary.framework_view` document)."""
    packing = "sequence packing" if view["sequence_packing"] else "padded to S+T"
    intro = (
        f"{view['sequences_per_step']} sequences per step, "
        f"{view['tokens_per_sequence']:.1f} tokens per sequence on average ({packing}). "
        "Micro-batch sizes are per GPU (per data-parallel replica); "
        "a rollout engine takes gpu_memory_utilization of each GPU for its weights, "
        "workspace and KV pool, and its effective concurrency is the sequences a replica "
        "keeps in flight: min(max_num_seqs, sequences per replica, what the KV pool holds)."
    )
    # Dimensions plan files write only where used (expert and context
    # parallelism) have a column when some vertex uses them.
    shown = tuple(
        declared
        for declared in DIMENSIONS
        if declared.written_at_default
        or any(declared.label in entry for entry in view["vertices"].values())
    )
    columns = (
        "vertex",
        "GPUs",
        "tp",
        "pp",
        "dp",
        "micro-batch per GPU (sequences / tokens)",
        *(declared.label for declared in shown),
        "effective concurrency",
    )
    pinned = any(entry.get("pinned") for entry in view["vertices"].values())
    where_rows = [
        [setting, *(keys[name] or "—" for name in WHERE_FRAMEWORKS)]
        for setting, keys in FRAMEWORK_KEYS.items()
    ]
    return FrameworkSection(
        fused=view.get("fused_actor_critic") or None,
        intro=intro,
        columns=columns,
        rows=[_settings_row(name, entry, shown) for name, entry in view["vertices"].items()],
        pin_note=f"{PIN_MARK.strip()} pinned in the instance (placement.pin)." if pinned else None,
        reward=reward_rule_words(view["reward_rule"]) if view.get("reward_rule") else None,
        lists=_lists(view),
        where_columns=("setting", *WHERE_FRAMEWORKS),
        where_rows=where_rows,
    )


def _settings_row(name: str, entry: dict[str, Any], shown: tuple[Dimension, ...]) -> list[str]:
    """One vertex's cells of the settings table."""
    if "micro_batch_size_per_gpu" in entry:
        count = entry["microbatches"]
        micro = (
            f"{entry['micro_batch_size_per_gpu']} / "
            f"{entry['micro_batch_tokens_per_gpu']:,.0f} "
            f"({count} microbatch{'es' if count > 1 else ''})"
        )
    else:
        micro = "—"
    concurrency = entry.get("effective_concurrency")
    return [
        name,
        f"{_gpus_label(entry['gpus'])}{_mark(entry, 'gpus')}",
        f"{entry['tp']}{_mark(entry, 'tp')}",
        f"{entry['pp']}{_mark(entry, 'pp')}",
        f"{entry['dp']}{_mark(entry, 'dp')}",
        f"{micro}{_mark(entry, 'micro')}",
        *(_dimension_cell(entry, declared) for declared in shown),
        "—" if concurrency is None else str(concurrency),
    ]


def _sharing_words(group: dict[str, Any]) -> str:
    """How a colocated group's vertices share their GPUs: one block, nested or partly shared."""
    if group["same_block"]:
        return "one block"
    return "nested blocks" if group["nested"] else "blocks overlapping in part"


def _lists(view: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The colocated groups, the concurrent pairs and the staleness, each a titled list."""
    colocated = [
        f"{_gpus_label(group['gpus'])}: {', '.join(group['vertices'])} ({_sharing_words(group)})"
        for group in view["colocated"]
    ] or ["none: every vertex has GPUs of its own"]
    concurrent = [
        f"{pair['vertices'][0]} and {pair['vertices'][1]} "
        f"(overlap {pair['overlap_s']:.4g} s in total)"
        for pair in view["concurrent"]
    ] or ["none"]
    staleness = [
        f"{model}: {described['words']} (staleness {described['steps']}"
        f"{', pinned' if described.get('pinned') else ''}): {described['detail']}"
        for model, described in view["staleness"].items()
    ]
    return [
        ("Colocated (sharing GPUs, run one after the other):", colocated),
        ("Concurrent (disjoint GPUs, overlapping in time):", concurrent),
        ("Staleness:", staleness),
    ]


def _markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def section_markdown(section: FrameworkSection) -> list[str]:
    """The section as report.md writes it, heading included, one line per element."""
    lines = ["## Framework settings", ""]
    if section.fused:
        lines += [f"Template: fused actor-critic (AC-share): {section.fused}.", ""]
    lines += [section.intro, "", *_markdown_table(section.columns, section.rows)]
    if section.pin_note:
        lines += ["", section.pin_note]
    if section.reward:
        lines += ["", f"Reward: {section.reward}."]
    for title, items in section.lists:
        lines += ["", title, "", *(f"- {item}" for item in items)]
    lines += ["", "Where to set it:", ""]
    return lines + _markdown_table(section.where_columns, section.where_rows)
