"""Which scored positions the record keeps, decided per position by a per-run secret.

The harness streams the loss of every position it scored; the feeder keeps the losses of
the positions the secret draws. Every position of the stream has the same chance
`keep_rate` of being drawn, independently, whatever batch or step it is served in: the
miner's schedule (one-row steps, huge steps, a mix) cannot thin the checks, because a
draw is a keyed function of the position's place in the stream and nothing else. The key
never enters the sandbox, so while the run goes on the model cannot know which of its
predictions will be checked. After the run the secret may be stored with the record: the
values are fixed by then.

The draw is a keyed counter-mode generator (Philox, keyed by an HMAC of the secret) at
counter = stream position of the row: one uniform per row gives how many of its positions
are kept (binomial), a second keyed stream where they are. Vectorised over rows, so a
whole production run (a million rows) is drawn in milliseconds.
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np


def keep_rate(target_positions: int, budget_tokens: int, max_rate: float) -> float:
    """The per-position keep chance of a run: about `target_positions` kept over the
    budget, at most `max_rate` (small runs would otherwise keep everything)."""
    if budget_tokens <= 0:
        return max_rate
    return min(max_rate, target_positions / budget_tokens)


def _key(secret: bytes, tag: bytes) -> int:
    return int.from_bytes(hmac.new(secret, tag, hashlib.sha256).digest()[:16], "little")


def _row_uniforms(secret: bytes, tag: bytes, start: int, n: int) -> np.ndarray:
    """One uniform in [0, 1) per stream position start..start+n-1 (counter mode)."""
    if n <= 0:
        return np.zeros(0)
    raw = np.random.Philox(key=_key(secret, tag), counter=start).random_raw(4 * n)[::4]
    return (raw >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _binomial_cdf(seq_len: int, rate: float) -> np.ndarray:
    """P(K <= k) for K ~ Binomial(seq_len, rate), up to where the tail is below 2^-60."""
    if rate >= 1.0:
        return np.array([0.0] * seq_len + [1.0])
    cdf, pmf, total = [], (1.0 - rate) ** seq_len, 0.0
    for k in range(seq_len + 1):
        total += pmf
        cdf.append(min(total, 1.0))
        if 1.0 - total < 2.0 ** -60:
            break
        pmf *= (seq_len - k) / (k + 1) * rate / (1.0 - rate)
    cdf[-1] = 1.0
    return np.array(cdf)


def kept_counts(secret: bytes, start: int, n: int, seq_len: int, rate: float) -> np.ndarray:
    """How many positions are kept in each row at stream positions start..start+n-1."""
    if rate <= 0 or n <= 0:
        return np.zeros(max(n, 0), dtype=np.int64)
    u = _row_uniforms(secret, b"kept-count", start, n)
    return np.searchsorted(_binomial_cdf(seq_len, rate), u, side="right").astype(np.int64)


def kept_positions(secret: bytes, start: int, n: int, seq_len: int,
                   rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(row indices within the batch, positions) kept for the `n` rows served from stream
    position `start`, sorted by row then position. A position p means the prediction of
    target p (the token after input p), so p is in [0, seq_len). A row may hold several."""
    counts = kept_counts(secret, start, n, seq_len, rate)
    rows, positions = [], []
    key = _key(secret, b"kept-where")
    for i in np.flatnonzero(counts).tolist():
        rng = np.random.Generator(np.random.Philox(key=key, counter=start + i))
        chosen = np.sort(rng.choice(seq_len, size=int(counts[i]), replace=False))
        rows += [i] * len(chosen)
        positions += chosen.tolist()
    return np.array(rows, dtype=np.int64), np.array(positions, dtype=np.int64)


def rounds(row_idx, positions) -> list[list[int]]:
    """Indices into the kept lists grouped so that no group holds one row twice: each
    group can be cut and predicted in one forward (a row cut after one position only)."""
    groups: list[list[int]] = []
    seen: dict[int, int] = {}
    for i, r in enumerate(list(row_idx)):
        k = seen.get(int(r), 0)
        seen[int(r)] = k + 1
        if k == len(groups):
            groups.append([])
        groups[k].append(i)
    return groups



def cut_rows(rows: np.ndarray, row_idx: np.ndarray, positions: np.ndarray,
             filler: int) -> np.ndarray:
    """Copies of `rows` ([n, T+1] inputs+targets or [n, T] inputs) where each chosen row has
    every token after its position replaced by `filler`, and every row not chosen is filler
    throughout: the inputs then hold the context of each chosen position and not the target
    it predicts (nor anything after it), and nothing of the rows beside it, so a model that
    reads another row of its batch answers differently than it did when scored. Each row
    appears at most once in `row_idx` (see `rounds`)."""
    out = np.full_like(np.asarray(rows), filler)
    T = out.shape[1]
    before = np.arange(T)[None, :] <= positions[:, None]
    block = np.asarray(rows)[row_idx]
    out[row_idx] = np.where(before, block, filler)
    return out
