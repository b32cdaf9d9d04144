"""A hand-checkable run record: V = 256 (log2 V = 8 bits), 1000 budget tokens, 2000 bytes.

Four batches of 200 tokens / 400 bytes were consumed (800 tokens, 1600 bytes) with
1120, 1000, 900 and 800 nats; 200 tokens were never consumed (e.g. the deadline hit).
The first batch's 5.6 nats/token equals the twin's loss and sits just above ln 256.
"""

from __future__ import annotations

import math

from prism_challenge.sandbox.record import (
    BatchEntry,
    Budget,
    Consumed,
    EvalResult,
    MeasuredAxes,
    ProbeResult,
    RunRecord,
)

NATS = (1120.0, 1000.0, 900.0, 800.0)


def make_record(**changes) -> RunRecord:
    batches = [
        BatchEntry(step=i, offset_row=2 * i, rows=2, tokens=200, bytes=400, nats=n, t=float(i))
        for i, n in enumerate(NATS)
    ]
    base = RunRecord(
        digest="d" * 64,
        corpus="demo",
        manifest_sha256="m" * 64,
        vocab_size=256,
        seq_len=100,
        param_cap=1_000_000,
        budget=Budget(rows=10, tokens=1000, scored_tokens=1000, bytes=2000),
        consumed=Consumed(rows=8, scored_tokens=800, bytes=1600, nats=sum(NATS)),
        batches=batches,
        axes=MeasuredAxes(param_count=50_000, layer_count=2, module_census={"Linear": 4}),
        eval=EvalResult(
            val_bpb_trained=3.0,
            val_bpb_twin=8.1,
            val_tokens=500,
            val_bytes=1000,
            twin_step0_nats_per_token=5.6,
            uniform_nats_per_token=math.log(256),
            probe_trained=ProbeResult(ok=True, max_abs_diff=0.0, positions=[3, 50]),
            probe_twin=ProbeResult(ok=True, max_abs_diff=1e-7, positions=[3, 50]),
        ),
        exit_reason="deadline",
    )
    steps = changes.pop("batches", None)
    base = base.model_copy(update=changes)
    return base if steps is None else base.with_steps(steps)


def entries(record: RunRecord) -> list[BatchEntry]:
    """The record's batches as entries (small hand-made records only)."""
    return list(record.columns.entries())


def with_eval(record: RunRecord, **changes) -> RunRecord:
    return record.model_copy(update={"eval": record.eval.model_copy(update=changes)})
