"""A run's learning curve: bpb per batch over the tokens consumed (docs/scoring.md).

Pure over a `RunRecord`'s fixed-size summary: its curve buckets hold the batches in stream
order (`offset_row`, then rank), consecutive ones merged (one batch per bucket up to
`steps.CURVE_BUCKETS` batches); they are merged again into at most `max_points` points whose
bpb is their summed nats over their summed bytes, so a long run draws the curve a short one
would rather than a decimated sample, and the per-step columns are never read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prism_challenge.sandbox.record import RunRecord

LN2 = math.log(2.0)


@dataclass(frozen=True)
class CurvePoint:
    tokens: int  # scored tokens consumed up to the end of this bucket
    bpb: float  # the bucket's own bpb (what the model paid on those batches)
    # Prequential bpb of the stream so far (what the score is built from); None once a
    # non-finite loss has been summed in.
    running_bpb: float | None


@dataclass(frozen=True)
class Curve:
    points: list[CurvePoint]
    batches: int  # batches in the record
    skipped: int  # buckets left out: no bytes, or a non-finite loss
    uniform_bpb: float | None  # what a know-nothing model pays (log2 V per token)
    val_bpb_trained: float | None
    val_bpb_twin: float | None


def learning_curve(record: RunRecord, max_points: int = 400) -> Curve:
    """The record's curve with at most `max_points` points."""
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, not {max_points}")
    buckets = record.summary.curve
    size = max(1, math.ceil(len(buckets) / max_points))
    points: list[CurvePoint] = []
    skipped = 0
    tokens = nbytes = 0
    nats = 0.0
    for start in range(0, len(buckets), size):
        bucket = buckets[start : start + size]
        b_nats = sum(b.nats for b in bucket)
        b_bytes = sum(b.bytes for b in bucket)
        tokens += sum(b.tokens for b in bucket)
        nbytes += b_bytes
        nats += b_nats
        if b_bytes == 0 or not math.isfinite(b_nats):
            skipped += 1
            continue
        running = nats / LN2 / nbytes
        points.append(
            CurvePoint(
                tokens=tokens,
                bpb=b_nats / LN2 / b_bytes,
                running_bpb=running if math.isfinite(running) else None,
            )
        )
    uniform = math.log2(record.vocab_size) * tokens / nbytes if nbytes else None
    ev = record.eval
    return Curve(
        points=points,
        batches=record.summary.count,
        skipped=skipped,
        uniform_bpb=uniform,
        val_bpb_trained=None if ev is None else ev.val_bpb_trained,
        val_bpb_twin=None if ev is None else ev.val_bpb_twin,
    )
