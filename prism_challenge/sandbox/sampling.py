"""Which positions of a scored batch the record keeps, decided by a per-run secret.

The harness streams the loss of every position it scored; the feeder keeps the losses of
a few positions per batch (one position in each of up to `per_batch` rows). Which ones is
a keyed function of a secret drawn for the run that never enters the sandbox, so while
the run goes on the model cannot know which of its predictions will be checked later.
After the run the secret may be stored with the record: the values are fixed by then.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np


def kept_positions(secret: bytes, step: int, rank: int, rows: int, seq_len: int,
                   per_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, positions) kept for the batch of `rows` rows served at (step, rank).

    Rows are distinct and sorted; a position p means the prediction of target p (the token
    after input p), so p is in [0, seq_len).
    """
    key = hmac.new(secret, f"{step}:{rank}".encode(), hashlib.sha256).digest()
    rng = np.random.default_rng(int.from_bytes(key[:16], "big"))
    n = min(per_batch, rows)
    chosen = np.sort(rng.choice(rows, size=n, replace=False))
    return chosen.astype(np.int64), rng.integers(0, seq_len, size=n).astype(np.int64)


def cut_rows(rows: np.ndarray, row_idx: np.ndarray, positions: np.ndarray,
             filler: int) -> np.ndarray:
    """Copies of `rows` ([n, T+1] inputs+targets or [n, T] inputs) where each chosen row has
    every token after its position replaced by `filler`: the inputs then hold the context of
    that position and not the target it predicts (nor anything after it)."""
    out = np.array(rows, copy=True)
    T = out.shape[1]
    after = np.arange(T)[None, :] > positions[:, None]
    block = out[row_idx]
    block[after] = filler
    out[row_idx] = block
    return out
