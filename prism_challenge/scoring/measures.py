"""The numbers a score is made of, each a pure function of the run record (docs/scoring.md).

Everything here is computed from what the challenge counted (the feeder's tokens and bytes,
the harness's nats, the eval sandbox's val bpb); nothing the miner reports is read.
"""

from __future__ import annotations

import math

from prism_challenge.sandbox.record import BatchEntry, RunRecord

LN2 = math.log(2.0)


class ScoringError(ValueError):
    """A run record that cannot be scored at all (a validator-side defect, not a miner's)."""


def unconsumed_tokens(record: RunRecord) -> int:
    """Scored tokens of the budget the run never consumed (charged at log2 V bits each)."""
    return record.budget.scored_tokens - record.consumed.scored_tokens


def prequential_bpb(record: RunRecord) -> float:
    """Code length of the whole budget in bits per byte of the budget.

    (consumed nats / ln 2 + unconsumed scored tokens * log2 V) / budget bytes. The budget's
    bytes are always the denominator, so stopping early can only cost, never help.
    """
    check_consistent(record)
    bits = record.consumed.nats / LN2 + unconsumed_tokens(record) * math.log2(record.vocab_size)
    return bits / record.budget.bytes


def uniform_bpb(record: RunRecord) -> float:
    """What a model that learnt nothing pays on the budget: the score a zeroed run gets."""
    check_consistent(record)
    return record.budget.scored_tokens * math.log2(record.vocab_size) / record.budget.bytes


def stream_order(batches: list[BatchEntry]) -> list[BatchEntry]:
    """Batches in the order the stream served them (step, then rank)."""
    return sorted(batches, key=lambda b: (b.step, b.rank, b.offset_row))


def tail_batches(batches: list[BatchEntry], fraction: float) -> list[BatchEntry]:
    """The shortest suffix of the stream holding >= `fraction` of its tokens."""
    ordered = stream_order(batches)
    total = sum(b.tokens for b in ordered)
    want = fraction * total
    tail: list[BatchEntry] = []
    got = 0
    for batch in reversed(ordered):
        if tail and got >= want:
            break
        tail.append(batch)
        got += batch.tokens
    tail.reverse()
    return tail


def tail_bpb(record: RunRecord, fraction: float) -> float | None:
    """Prequential bpb of the last `fraction` of the consumed stream; None without bytes."""
    tail = tail_batches(record.batches, fraction)
    nbytes = sum(b.bytes for b in tail)
    if nbytes == 0:
        return None
    return sum(b.nats for b in tail) / LN2 / nbytes


def window_bpbs(record: RunRecord, windows: int, min_tokens: int = 1) -> list[float]:
    """Prequential bpb of consecutive stretches of the consumed stream, equal in tokens as
    far as whole batches allow: `windows` of them, fewer when a window would hold fewer
    than `min_tokens` tokens (a small window's bpb is mostly the noise of its text)."""
    ordered = stream_order(record.batches)
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


def heldout_delta(record: RunRecord) -> float | None:
    """Twin val bpb - trained val bpb: how much training helped on text never streamed."""
    ev = record.eval
    if ev is None or ev.val_bpb_twin is None or ev.val_bpb_trained is None:
        return None
    return ev.val_bpb_twin - ev.val_bpb_trained


def memorisation_gap(record: RunRecord, windows: int, min_tokens: int = 1) -> float | None:
    """Trained held-out bpb - the best window of the stream.

    The held-out bpb is target-absent: no model can look ahead there. An honest learner is
    never much better on any stretch of the stream, predicted before it trained on it, than
    its final weights are on held-out text; a stream much better than held-out means the
    model read its targets while it was scored, or the recorded losses were tampered with.
    """
    ev = record.eval
    bpbs = window_bpbs(record, windows, min_tokens)
    if not bpbs or not all(math.isfinite(b) for b in bpbs):
        return None
    best = min(bpbs)
    if ev is None or ev.val_bpb_trained is None:
        return None
    return ev.val_bpb_trained - best


def step0_nats_per_token(record: RunRecord) -> float | None:
    """Recorded nats/token of the first step (all ranks): the forced-seed init's loss."""
    if not record.batches:
        return None
    first = min(b.step for b in record.batches)
    batches = [b for b in record.batches if b.step == first]
    tokens = sum(b.tokens for b in batches)
    if tokens == 0:
        return None
    return sum(b.nats for b in batches) / tokens


def check_consistent(record: RunRecord) -> None:
    """Refuse a record whose own counts disagree (the feeder's totals vs its batch entries).

    Such a record is a validator bug; scoring it would give a number nobody can defend.
    """
    budget, consumed = record.budget, record.consumed
    if budget.bytes <= 0 or budget.scored_tokens <= 0:
        raise ScoringError("the budget has no scored tokens or bytes; nothing can be scored")
    if consumed.scored_tokens > budget.scored_tokens or consumed.bytes > budget.bytes:
        raise ScoringError(
            f"consumed ({consumed.scored_tokens} tokens, {consumed.bytes} bytes) exceeds the "
            f"budget ({budget.scored_tokens} tokens, {budget.bytes} bytes)"
        )
    tokens = sum(b.tokens for b in record.batches)
    nbytes = sum(b.bytes for b in record.batches)
    if tokens != consumed.scored_tokens or nbytes != consumed.bytes:
        raise ScoringError(
            f"batch entries sum to {tokens} tokens / {nbytes} bytes but consumed says "
            f"{consumed.scored_tokens} / {consumed.bytes}"
        )
    nats = math.fsum(b.nats for b in record.batches)
    if math.isfinite(nats) and math.isfinite(consumed.nats):
        if not math.isclose(nats, consumed.nats, rel_tol=1e-9, abs_tol=1e-6):
            raise ScoringError(
                f"batch entries sum to {nats} nats but consumed says {consumed.nats}"
            )
