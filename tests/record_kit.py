"""The per-step scoring figures as they were computed over a list of batch entries (before
records held packed columns), and synthetic records of any step count built column-wise.

Tests compare the vectorised readers of `scoring/measures.py` against these loops.
"""

from __future__ import annotations

import math

import numpy as np

from prism_challenge.sandbox.record import BatchEntry, Budget, Consumed, RunRecord
from prism_challenge.sandbox.steps import StepColumns

LN2 = math.log(2.0)


def _ordered(batches: list[BatchEntry]) -> list[BatchEntry]:
    return sorted(batches, key=lambda b: (b.step, b.rank, b.offset_row))


def old_tail_bpb(batches: list[BatchEntry], fraction: float) -> float | None:
    ordered = _ordered(batches)
    want = fraction * sum(b.tokens for b in ordered)
    tail: list[BatchEntry] = []
    got = 0
    for batch in reversed(ordered):
        if tail and got >= want:
            break
        tail.append(batch)
        got += batch.tokens
    nbytes = sum(b.bytes for b in tail)
    return None if nbytes == 0 else sum(b.nats for b in tail) / LN2 / nbytes


def old_window_bpbs(batches: list[BatchEntry], windows: int, min_tokens: int = 1) -> list[float]:
    ordered = _ordered(batches)
    total = sum(b.tokens for b in ordered)
    if total == 0:
        return []
    windows = max(1, min(windows, total // max(1, min_tokens)))
    out: list[float] = []
    nats = nbytes = tokens = 0.0
    edge = 1
    for batch in ordered:
        nats += batch.nats
        nbytes += batch.bytes
        tokens += batch.tokens
        if tokens >= edge * total / windows - 1e-9:
            if nbytes:
                out.append(nats / LN2 / nbytes)
            nats = nbytes = 0.0
            while tokens >= edge * total / windows - 1e-9:
                edge += 1
    if nbytes:
        out.append(nats / LN2 / nbytes)
    return out


def old_step0(batches: list[BatchEntry]) -> float | None:
    if not batches:
        return None
    first = min(b.step for b in batches)
    at = [b for b in batches if b.step == first]
    tokens = sum(b.tokens for b in at)
    return None if tokens == 0 else sum(b.nats for b in at) / tokens


def synthetic_record(steps: int, *, ranks: int = 1, seed: int = 0, rows: int = 1,
                     keep_rate: float = 0.02, seq_len: int = 1024) -> RunRecord:
    """A finished run of `steps` steps of `rows` rows per rank, built column-wise (no
    per-step objects): falling noisy losses, ~keep_rate * tokens kept losses."""
    rng = np.random.default_rng(seed)
    n = steps * ranks
    step = np.repeat(np.arange(steps), ranks)
    rank = np.tile(np.arange(ranks), steps)
    offset = (step * ranks + rank) * rows
    tokens = rng.integers(rows * (seq_len - 40), rows * seq_len, n)
    nbytes = tokens * 4 + rng.integers(0, 200, n)
    nats = tokens * (2.0 + 3.0 / (1.0 + step / 50.0)) * rng.uniform(0.9, 1.1, n)
    kept = rng.binomial(tokens, keep_rate)
    cols = StepColumns(step=step, rank=rank, offset_row=offset, rows=np.full(n, rows),
                       tokens=tokens, bytes=nbytes, nats=nats, t=step * 0.01,
                       sample_start=np.concatenate(([0], np.cumsum(kept))),
                       sample=rng.uniform(0.5, 8.0, int(kept.sum())))
    total_tokens, total_bytes = int(tokens.sum()), int(nbytes.sum())
    return RunRecord(
        digest="d" * 64, corpus="fineweb-edu", manifest_sha256="m" * 64, vocab_size=50257,
        seq_len=seq_len, param_cap=150_000_000,
        budget=Budget(rows=n * rows, tokens=n * rows * seq_len, scored_tokens=total_tokens,
                      bytes=total_bytes),
        consumed=Consumed(rows=n * rows, scored_tokens=total_tokens, bytes=total_bytes,
                          nats=math.fsum(nats.tolist())),
        steps=cols, exit_reason="ok", lanes=256, keep_rate=keep_rate, sample_secret="ab" * 32)
