"""Pins applied to the plan space: which blocks and strategies a pinned vertex may take.

:mod:`rlplan.rpeg.schema.pins` parses ``placement.pin`` and checks it against
the instance; here a vertex's pin filters blocks (the candidate directory's
allowed blocks, plan files) and strategies
(:func:`rlplan.rpeg.model.candidates.strategy_problem`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rlplan.rpeg.model.blocks import Block
from rlplan.rpeg.model.cost import Strategy
from rlplan.rpeg.schema.pins import Pins, VertexPin, pin_words
from rlplan.rpeg.strategy import DIMENSIONS, value_word

#: Strategy fields a pin compares one to one, in the order they are checked.
_COMPARED = ("dp", "pp", "tp", "microbatches")


def pin_allows_block(pin: VertexPin, block: Block, pools: Sequence[str | None] = (None,)) -> bool:
    """Whether ``block`` matches the pinned origin, extent and pool of ``pin``.

    ``pools`` names the cluster's pools (:attr:`PooledCluster.names
    <rlplan.rpeg.model.pools.PooledCluster.names>`); extents compare as
    triples, whatever their pool.
    """
    return (
        (pin.origin is None or block.origin == pin.origin)
        and (pin.extent is None or tuple(block.extent) == pin.extent)
        and (pin.pool is None or pools[block.pool] == pin.pool)
    )


def block_pin_problem(
    pins: Pins, name: str, block: Block, pools: Sequence[str | None] = (None,)
) -> str | None:
    """Why ``block`` breaks the block pin of vertex ``name`` (None if it does not)."""
    pin = pins.vertex(name)
    if pin is None or pin_allows_block(pin, block, pools):
        return None
    where = "" if pools[block.pool] is None else f"pool {pools[block.pool]!r} "
    return (
        f"block {where}origin {list(block.origin)} extent {list(block.extent)} is outside "
        f"placement.pin.{name} {pin_words(pin)}"
    )


def pin_strategy_problem(
    pin: VertexPin, shape: tuple[int, int, int], strategy: Strategy, sequences: int
) -> str | None:
    """Which pinned field ``strategy`` on a block of ``shape`` breaks (None: none).

    Parameters
    ----------
    pin
        The vertex's pin.
    shape
        The block's extent.
    strategy
        The strategy.
    sequences
        Sequences of one step, ``B*K`` (for ``micro_batch_size``).

    Returns
    -------
    str or None
        ``"extent [1, 1, 2] pinned, got [1, 1, 1]"`` style text naming the
        first field that differs.
    """
    if pin.extent is not None and tuple(shape) != pin.extent:
        return f"extent {list(pin.extent)} pinned, got {list(shape)}"
    for name in (*_COMPARED, *(declared.name for declared in DIMENSIONS)):
        wanted = getattr(pin, name)
        if wanted is not None and getattr(strategy, name) != wanted:
            got = getattr(strategy, name)
            return f"{name} {value_word(wanted)} pinned, got {value_word(got)}"
    if pin.micro_batch_size is not None:
        held = math.ceil(math.ceil(sequences / strategy.dp) / strategy.microbatches)
        if held != pin.micro_batch_size:
            return f"micro_batch_size {pin.micro_batch_size} pinned, got {held}"
    return None
