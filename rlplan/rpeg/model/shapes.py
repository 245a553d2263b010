"""Block shapes tagged with their GPU pool: the key of the candidate directory.

Time and memory depend on a block's extent and on the pool it lies in (its
GPU type and node shape), never on its position. A block of the first pool
(pool 0, the only pool of a one-type cluster) has its extent as a plain
``(racks, nodes, gpus)`` tuple, as it always had; a block of pool ``p > 0``
has a :class:`PoolShape`, the same triple tagged with ``p``, which equals
no other pool's. Code that reads an extent's numbers reads either alike,
and the directory, the local-search moves and the baselines, which key
candidates by extent, keep every pool apart with no change
(docs/plan-space.md#pools).
"""

from __future__ import annotations

from typing import Any


class PoolShape(tuple):
    """An extent ``(racks, nodes, gpus)`` of a block in pool ``pool`` (``pool >= 1``).

    It is the triple for indexing and arithmetic, and equal only to the same
    triple of the same pool (a plain tuple is pool 0's).
    """

    pool: int

    def __new__(cls, extent: Any, pool: int = 1) -> PoolShape:
        made = super().__new__(cls, extent)
        made.pool = pool
        return made

    def __getnewargs__(self) -> tuple[Any, ...]:
        return (tuple(self), self.pool)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple):
            return NotImplemented
        return tuple.__eq__(self, other) and pool_of(other) == self.pool

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((tuple(self), self.pool))

    def __repr__(self) -> str:
        return f"{tuple(self)!r}@pool{self.pool}"


def pool_of(shape: Any) -> int:
    """The pool of a block extent: its tag, or 0 for a plain triple."""
    return getattr(shape, "pool", 0)


def tagged(extent: Any, pool: int) -> tuple[int, int, int]:
    """``extent`` as the key of a block of pool ``pool`` (a plain tuple for pool 0)."""
    plain = tuple(extent)
    return plain if pool == 0 else PoolShape(plain, pool)  # type: ignore[return-value]
