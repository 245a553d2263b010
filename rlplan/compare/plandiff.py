"""What changed between two plans, in words: moved vertices, strategy fields, staleness."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlplan.rpeg.strategy import all_plan_fields


def block_words(block: dict[str, list[int]], shape: Sequence[int]) -> str:
    """A plan-file block as flat GPU indices, e.g. ``GPUs 0-7``, ``GPU 3`` or ``GPUs 0-1,8-9``.

    Parameters
    ----------
    block
        ``{"origin": [rack, node, gpu], "extent": [racks, nodes, gpus]}``.
    shape
        The cluster's ``(racks, nodes_per_rack, gpus_per_node)``.
    """
    (rack, node, gpu), (racks, nodes, gpus) = block["origin"], block["extent"]
    _, per_rack, per_node = shape
    start = (rack * per_rack + node) * per_node + gpu
    size = racks * nodes * gpus
    if size == 1:
        return f"GPU {start}"
    if racks == 1 and nodes > 1 and gpus < per_node:  # sliced: one range on each node
        firsts = range(start, start + nodes * per_node, per_node)
        return "GPUs " + ",".join(
            str(low) if gpus == 1 else f"{low}-{low + gpus - 1}" for low in firsts
        )
    return f"GPUs {start}-{start + size - 1}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def plan_changes(
    old: dict | None,
    new: dict | None,
    old_shape: Sequence[int] | None = None,
    new_shape: Sequence[int] | None = None,
) -> list[str]:
    """The differences from plan ``old`` to plan ``new`` (plan-file documents), as phrases.

    Parameters
    ----------
    old, new
        Plans as :func:`rlplan.rpeg.model.plan.plan_to_json` writes them, or None (no plan).
    old_shape, new_shape
        Cluster shapes ``(racks, nodes_per_rack, gpus_per_node)`` the blocks
        refer to (default: a single node of as many GPUs as needed, i.e. the
        block's own GPU index inside its node).

    Returns
    -------
    list[str]
        E.g. ``["actor.train moved from GPUs 0-7 to GPUs 0-3",
        "actor.train strategy: tp 2 -> 1, microbatches 4 -> 8",
        "staleness of actor 0 -> 1"]``; empty when nothing changed.
    """
    if new is None:
        return [] if old is None else ["no plan"]
    if old is None:
        return ["a plan exists (none at the previous value)"]
    old_shape = old_shape or (1, 1, 1 << 30)
    new_shape = new_shape or old_shape
    phrases: list[str] = []
    before, after = old.get("vertices", {}), new.get("vertices", {})
    for name, placement in after.items():
        previous = before.get(name)
        if previous is None:
            phrases.append(f"{name} added on {block_words(placement['block'], new_shape)}")
            continue
        was = block_words(previous["block"], old_shape)
        now = block_words(placement["block"], new_shape)
        if was != now:
            phrases.append(f"{name} moved from {was} to {now}")
        changed = [
            f"{field} {_value(previous.get(field))} -> {_value(placement.get(field))}"
            # Every strategy field, in plan-file order (a vertex has the fields
            # of its kind only, so a rollout's fields never share a phrase with the others).
            for field in all_plan_fields()
            if previous.get(field) != placement.get(field)
        ]
        if changed:
            phrases.append(f"{name} strategy: {', '.join(changed)}")
    phrases += [f"{name} removed" for name in before if name not in after]
    stale_before, stale_after = old.get("staleness", {}), new.get("staleness", {})
    for model in sorted(set(stale_before) | set(stale_after)):
        if stale_before.get(model) != stale_after.get(model):
            phrases.append(
                f"staleness of {model} {stale_before.get(model)} -> {stale_after.get(model)}"
            )
    return phrases


def describe_changes(phrases: list[str]) -> str:
    """The phrases as one line (``no change`` when there are none)."""
    return "; ".join(phrases) if phrases else "no change"
