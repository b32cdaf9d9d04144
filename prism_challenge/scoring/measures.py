"""The numbers a score is made of, each a pure function of the run record (docs/scoring.md).

Everything here is computed from what the challenge counted (the feeder's tokens and bytes,
the harness's nats, the eval sandbox's val bpb); nothing the miner reports is read. The
per-step figures are vectorised over the record's packed columns (`sandbox/steps.py`); the
totals and the first step come from its fixed-size summary.
"""

from __future__ import annotations

import math

import numpy as np

from prism_challenge.sandbox.early_stop import LeaderCurve
from prism_challenge.sandbox.record import RunRecord

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


def tail_bpb(record: RunRecord, fraction: float) -> float | None:
    """Prequential bpb of the last `fraction` of the consumed stream (the shortest suffix
    of whole batches, in stream order, holding >= `fraction` of its tokens); None without
    bytes."""
    cols = record.columns
    order = cols.stream_order()
    tokens = cols.tokens[order][::-1]
    if not len(tokens):
        return None
    want = fraction * int(tokens.sum())
    reached = np.flatnonzero(np.cumsum(tokens) >= want)
    size = max(1, int(reached[0]) + 1) if len(reached) else len(tokens)
    tail = order[len(order) - size:]
    nbytes = int(cols.bytes[tail].sum())
    if nbytes == 0:
        return None
    return float(cols.nats[tail].sum()) / LN2 / nbytes


def stream_windows(record: RunRecord, windows: int, min_tokens: int = 1) -> list[np.ndarray]:
    """Consecutive stretches of the consumed stream, as indices into the record's columns
    (batches in stream order), equal in tokens as far as whole batches allow: `windows` of
    them, fewer when a window would hold fewer than `min_tokens` tokens (a small window's
    bpb is mostly the noise of its text).

    A window closes at the first batch (in stream order) whose running token count reaches
    its edge, `edge * total / windows`; a window without bytes is left out."""
    cols = record.columns
    order = cols.stream_order()
    tokens = cols.tokens[order]
    total = int(tokens.sum())
    if total == 0:
        return []
    windows = max(1, min(windows, total // max(1, min_tokens)))
    edges = np.arange(1, windows + 1, dtype=np.int64) * total / windows - 1e-9
    running = np.cumsum(tokens).astype(np.float64)
    crossed = np.searchsorted(edges, running, side="right")  # edges reached so far
    closes = np.flatnonzero(np.diff(crossed, prepend=0) > 0)
    starts = np.concatenate(([0], closes + 1))
    starts = starts[starts < len(order)]
    return [g for g in np.split(order, starts[1:]) if int(cols.bytes[g].sum())]


def _bpb(record: RunRecord, group: np.ndarray) -> float:
    cols = record.columns
    return float(cols.nats[group].sum()) / LN2 / int(cols.bytes[group].sum())


def window_bpbs(record: RunRecord, windows: int, min_tokens: int = 1) -> list[float]:
    """Prequential bpb of each of `stream_windows`."""
    return [_bpb(record, g) for g in stream_windows(record, windows, min_tokens)]


def best_window(record: RunRecord, windows: int, min_tokens: int = 1
                ) -> tuple[float, float | None] | None:
    """(bpb, SE) of the stream's best window; None without windows or with a non-finite one.

    The SE treats the window's batches as the units (delta method for bits / bytes): what
    the window's bpb would move by on other text of the same size. None with fewer than
    three batches."""
    found = stream_windows(record, windows, min_tokens)
    bpbs = [_bpb(record, g) for g in found]
    if not bpbs or not all(math.isfinite(b) for b in bpbs):
        return None
    best = min(range(len(bpbs)), key=bpbs.__getitem__)
    cols, group = record.columns, found[best]
    se = trend_free_ratio_se(cols.nats[group] / LN2, cols.bytes[group].astype(np.float64))
    return bpbs[best], se


def trend_free_ratio_se(bits: np.ndarray, nbytes: np.ndarray) -> float | None:
    """SE of sum(bits) / sum(bytes) over consecutive batches of a learning run.

    The residuals r_i = bits_i - ratio * bytes_i follow the learning curve (early batches
    worse), which is the run, not noise; their variance is taken from successive
    differences (sum (r_{i+1} - r_i)^2 / (2 (n - 1)), von Neumann), which a smooth trend
    does not inflate. None with fewer than three batches."""
    n = len(bits)
    total = float(nbytes.sum())
    if n < 3 or total <= 0:
        return None
    resid = bits - float(bits.sum()) / total * nbytes
    var = float(np.sum(np.diff(resid) ** 2)) / (2 * (n - 1))
    return math.sqrt(n * var) / total


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
    found = gap_and_se(record, windows, min_tokens)
    return None if found is None else found[0]


def gap_and_se(record: RunRecord, windows: int, min_tokens: int = 1
               ) -> tuple[float, float | None] | None:
    """(gap, SE of the gap). The held-out sample and the best window are different text, so
    their variances add: SE = sqrt(SE_held^2 + SE_window^2); None when neither is known."""
    ev = record.eval
    best = best_window(record, windows, min_tokens)
    if best is None or ev is None or ev.val_bpb_trained is None:
        return None
    parts = [x for x in (ev.val_bpb_trained_se, best[1]) if x is not None and math.isfinite(x)]
    se = math.sqrt(sum(x * x for x in parts)) if parts else None
    return ev.val_bpb_trained - best[0], se


def stream_parts(record: RunRecord, windows: int) -> list[float] | None:
    """The prequential bpb split over `windows` equal stretches of the budget's rows (bits on
    each stretch / budget bytes; they sum to the prequential bpb). Every run of a data version
    streams the same rows in the same order, so two runs' parts are paired, stretch by
    stretch (`leaderboard.paired_se`). None unless the batches tile the whole budget."""
    cols = record.columns
    curve = LeaderCurve.from_batches(zip(cols.offset_row.tolist(), cols.rows.tolist(),
                                         cols.nats.tolist(), strict=True), record.budget.rows)
    if curve is None or windows < 1 or record.budget.bytes <= 0:
        return None
    edges = np.linspace(0, record.budget.rows, windows + 1)
    cumulative = np.interp(edges, curve.edges, curve.bits)
    return [float(x) for x in np.diff(cumulative) / record.budget.bytes]


def step0_nats_per_token(record: RunRecord) -> float | None:
    """Recorded nats/token of the first step (all ranks): the forced-seed init's loss."""
    summary = record.summary
    if not summary.count or summary.first_step_tokens == 0:
        return None
    return summary.first_step_nats / summary.first_step_tokens


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
    tokens, nbytes = record.summary.tokens, record.summary.bytes
    if tokens != consumed.scored_tokens or nbytes != consumed.bytes:
        raise ScoringError(
            f"batch entries sum to {tokens} tokens / {nbytes} bytes but consumed says "
            f"{consumed.scored_tokens} / {consumed.bytes}"
        )
    nats = record.summary.nats
    if math.isfinite(nats) and math.isfinite(consumed.nats):
        if not math.isclose(nats, consumed.nats, rel_tol=1e-9, abs_tol=1e-6):
            raise ScoringError(
                f"batch entries sum to {nats} nats but consumed says {consumed.nats}"
            )
