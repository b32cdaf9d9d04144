"""Which of two submissions came first: the same answer on every validator.

Precedence is the block of the commitment that named the bundle, then the committing
hotkey's uid (two commitments can share a block). Both come from the chain, so validators
that received the same uploads in a different order still agree. What a validator saw
locally (its acceptance time, its row id) only breaks ties the chain cannot, and a value
the chain did not give (a row from before commitments) sorts after every known one.
"""

from __future__ import annotations

UNKNOWN = 2**62


def precedence(block: int | None, uid: int | None, *local: float) -> tuple[float, ...]:
    """Smaller is earlier: (block, uid, *local tie-breaks)."""
    return (UNKNOWN if block is None else block, UNKNOWN if uid is None else uid, *local)
