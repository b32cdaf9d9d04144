"""The numbers a score is made of, each a pure function of the run record (DESIGN §7).

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


def tail_batches(batches: list[BatchEntry], fraction: float) -> list[BatchEntry]:
    """The shortest suffix of the stream (by offset_row) holding >= `fraction` of its tokens."""
    ordered = sorted(batches, key=lambda b: (b.offset_row, b.rank, b.step))
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


def heldout_delta(record: RunRecord) -> float | None:
    """Twin val bpb - trained val bpb: how much training helped on text never streamed."""
    ev = record.eval
    if ev is None or ev.val_bpb_twin is None or ev.val_bpb_trained is None:
        return None
    return ev.val_bpb_twin - ev.val_bpb_trained


def memorisation_gap(record: RunRecord, fraction: float) -> float | None:
    """Trained val bpb - tail prequential bpb.

    An honest learner does about as well on held-out text as on the last stretch of the
    stream it predicted before training on it; a record much better than the val split
    means the stream was memorised (looked ahead) or the recorded losses were tampered with.
    """
    tail = tail_bpb(record, fraction)
    ev = record.eval
    if tail is None or ev is None or ev.val_bpb_trained is None:
        return None
    return ev.val_bpb_trained - tail


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
