"""A store populated the way the validator fills it: real rows, real lifecycle transitions,
run records built through the pydantic model, scores through `record_score`."""

from __future__ import annotations

import math

from bittensor.sp_core import Keypair
from verified_kit import mark_verified

from prism_challenge.sandbox.record import (
    BatchEntry,
    Budget,
    Consumed,
    EvalResult,
    MeasuredAxes,
    OptimizerAxis,
    ProbeResult,
    RunRecord,
)
from prism_challenge.scoring import ScoreResult, record_score
from prism_challenge.storage import Store
from prism_challenge.storage.lifecycle import transition
from prism_challenge.storage.tables import RunRecord as RunRow
from prism_challenge.storage.tables import Submission

HOTKEYS = [Keypair.create_from_seed(bytes([i + 40]) * 32).ss58_address for i in range(4)]
EVIL_NAME = "<script>document.title='pwned'</script>"
EVIL_REASON = '<img src=x onerror="alert(1)"> & co'
LN2 = math.log(2)

# Each batch: 100 scored tokens over 400 bytes; batch i pays BPB[i] bits per byte.
BPB = (4.0, 3.0, 2.5, 2.0, 1.5, 1.0)


def make_record(digest: str, *, corpus: str = "demo", bpb=BPB, **changes) -> RunRecord:
    batches = [
        BatchEntry(step=i, offset_row=i, rows=1, tokens=100, bytes=400, nats=b * LN2 * 400,
                   t=0.5 * i)
        for i, b in enumerate(bpb)
    ]
    record = RunRecord(
        digest=digest,
        corpus=corpus,
        manifest_sha256="f" * 64,
        vocab_size=256,
        seq_len=100,
        param_cap=1_000_000,
        budget=Budget(rows=len(bpb), tokens=100 * len(bpb), scored_tokens=100 * len(bpb),
                      bytes=400 * len(bpb)),
        consumed=Consumed(rows=len(bpb), scored_tokens=100 * len(bpb), bytes=400 * len(bpb),
                          nats=sum(b.nats for b in batches)),
        batches=batches,
        axes=MeasuredAxes(
            param_count=123_456, layer_count=4, module_census={"Linear": 8, "Embedding": 1},
            optimizers=[OptimizerAxis(cls="<b>AdamW</b>", hparams={"lr": 0.001, "wd": 0.1})],
            batch_size=16,
        ),
        sample_rows=16,
        eval=EvalResult(val_bpb_trained=1.25, val_bpb_twin=2.25, val_tokens=5000,
                        val_bytes=20000, uniform_nats_per_token=math.log(256),
                        probe_trained=ProbeResult(ok=True, max_abs_diff=0.0, positions=[3]),
                        probe_twin=ProbeResult(ok=False, max_abs_diff=0.25, positions=[3])),
        exit_reason="ok",
        startup_s=1.5,
        train_s=20.0,
        eval_s=3.5,
    )
    steps = changes.pop("batches", None)
    record = record.model_copy(update=changes)
    return record if steps is None else record.with_steps(steps)


def add_submission(store: Store, n: int, hotkey: str, *, name: str | None = None,
                   reviewed: str = "passed", path: tuple[str, ...] = (),
                   reason: str | None = None) -> int:
    """A submission accepted at time n, moved along `path` by the lifecycle; the last move
    carries `reason`."""
    with store.session() as s:
        row = Submission(digest=f"{n:064x}", hotkey=hotkey, status="received", name=name,
                         reviewed=reviewed, accepted_at=1_700_000_000.0 + n,
                         updated_at=1_700_000_000.0 + n, bundle=b"bundle")
        s.add(row)
        s.flush()
        sid = row.id
    for i, status in enumerate(path):
        with store.session() as s:
            last = i == len(path) - 1
            transition(s, sid, status, reason=reason if last else None,
                       now=1_700_000_000.0 + n + i + 1)
    return sid


def add_run(store: Store, sid: int, attempt: int, record: RunRecord | dict, *,
            created_at: float) -> None:
    payload = record.model_dump(mode="json") if isinstance(record, RunRecord) else record
    with store.session() as s:
        s.add(RunRow(submission_id=sid, attempt=attempt, record=payload, created_at=created_at))


def score(store: Store, sid: int, bpb: float, *, corpus: str = "demo", reasons=(),
          heldout: float = 0.75, now: float = 1_700_001_000.0, censored: bool = False) -> None:
    """Record the score and move RUNNING -> SCORED in one transaction, as the worker does
    (`censored`: the run was stopped early, `bpb` is its bound, it is never replayed)."""
    result = ScoreResult(
        bpb=bpb, prequential_bpb=bpb, uniform_bpb=8.0, tail_bpb=bpb, heldout_delta=heldout,
        gap=0.01, heldout_bpb=1.25, heldout_se=0.02, gap_bound=-0.03, penalty=0.0,
        eligible=not reasons, reasons=list(reasons), notes=[],
        unconsumed_tokens=0, exit_reason="ok", censored=censored,
    )
    with store.session() as s:
        record_score(s, sid, result, corpus, now=now)
        if not censored:
            mark_verified(s, sid, at=now)
        transition(s, sid, "scored", expected="running", now=now)


def populate(store: Store) -> dict[str, int]:
    """The scene every HTTP test reads (ids by role):

    - leader: HOTKEYS[0], named EVIL_NAME, unreviewed, bpb 1.5, one run (6 batches)
    - second: HOTKEYS[1], bpb 2.0
    - cheat:  HOTKEYS[2], scored but not eligible (EVIL_REASON)
    - web:    HOTKEYS[3], scored on fineweb-edu (the most recent score)
    - waiting: queued; held: received with a hold reason; failed: failed after 3 attempts
    """
    run = ("queued", "running")
    ids = {
        "leader": add_submission(store, 1, HOTKEYS[0], name=EVIL_NAME, reviewed="unreviewed",
                                 path=run),
        "second": add_submission(store, 2, HOTKEYS[1], name="second-best", path=run),
        "cheat": add_submission(store, 3, HOTKEYS[2], name="cheat", path=run),
        "web": add_submission(store, 4, HOTKEYS[3], name="web-run", path=run),
        "waiting": add_submission(store, 5, HOTKEYS[1], name="waiting", path=("queued",)),
        "held": add_submission(store, 6, HOTKEYS[2], path=("received",),
                               reason="LLM reviewer unreachable; retrying"),
        "failed": add_submission(
            store, 7, HOTKEYS[3], name="crasher",
            path=("queued", "running", "queued", "running", "queued", "running", "failed"),
            reason=EVIL_REASON,
        ),
    }
    add_run(store, ids["leader"], 1, make_record(f"{1:064x}"), created_at=1_700_000_500.0)
    add_run(store, ids["failed"], 3,
            make_record(f"{7:064x}", bpb=(5.0,), exit_reason="crash", exit_detail="boom",
                        eval=None, startup_s=1.0, train_s=2.0, eval_s=0.0),
            created_at=1_700_000_900.0)
    score(store, ids["leader"], 1.5, now=1_700_001_000.0)
    score(store, ids["second"], 2.0, now=1_700_001_001.0)
    score(store, ids["cheat"], 0.1, reasons=[EVIL_REASON], now=1_700_001_002.0)
    score(store, ids["web"], 0.9, corpus="fineweb-edu", now=1_700_001_003.0)
    return ids
