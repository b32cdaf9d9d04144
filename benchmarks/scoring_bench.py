"""How long scoring, ranking and the weights plan take at production scale.

A 1 B-token run at 32 rows x 1,024 tokens per batch is ~30.5 k batch entries; a busy subnet
has thousands of scored submissions over 256 uids. Prints measured times; asserts nothing.
Run: .venv/bin/python benchmarks/scoring_bench.py
`--smoke` (the suite runs it): 300 batches, 1,000 submissions, one timing each.
"""

from __future__ import annotations

import math
import random
import sys
import time

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.sandbox.record import (
    BatchEntry,
    Budget,
    Consumed,
    EvalResult,
    MeasuredAxes,
    ProbeResult,
    RunRecord,
)
from prism_challenge.scoring import Entry, build_leaderboard, score_record
from prism_challenge.weights import build_plan

VOCAB, TOKENS_PER_BATCH, BYTES_PER_TOKEN = 32_768, 32 * 1024, 4
SMOKE = "--smoke" in sys.argv
BATCHES, SUBMISSIONS = (300, 1_000) if SMOKE else (30_518, 10_000)


def production_record(n_batches: int) -> RunRecord:
    rng = random.Random(0)
    batches = [
        BatchEntry(step=i, offset_row=32 * i, rows=32, tokens=TOKENS_PER_BATCH,
                   bytes=TOKENS_PER_BATCH * BYTES_PER_TOKEN,
                   nats=TOKENS_PER_BATCH * (10.4 - 7 * (1 - math.exp(-i / 3000)) +
                                            0.01 * rng.random()),
                   t=float(i), sample=[3.0 + 0.1 * k for k in range(16)])
        for i in range(n_batches)
    ]
    tokens = n_batches * TOKENS_PER_BATCH
    probe = ProbeResult(ok=True, max_abs_diff=0.0, positions=[1, 100])
    return RunRecord(
        digest="d" * 64, corpus="fineweb-edu", manifest_sha256="m" * 64, vocab_size=VOCAB,
        seq_len=1024, param_cap=150_000_000,
        budget=Budget(rows=32 * n_batches, tokens=tokens, scored_tokens=tokens,
                      bytes=tokens * BYTES_PER_TOKEN),
        consumed=Consumed(rows=32 * n_batches, scored_tokens=tokens,
                          bytes=tokens * BYTES_PER_TOKEN, nats=sum(b.nats for b in batches)),
        batches=batches,
        axes=MeasuredAxes(param_count=150_000_000, layer_count=12, module_census={}),
        eval=EvalResult(val_bpb_trained=0.95, val_bpb_twin=3.7, twin_step0_nats_per_token=10.4,
                        uniform_nats_per_token=math.log(VOCAB), probe_trained=probe,
                        probe_twin=probe),
        exit_reason="ok",
    )


def timed(label: str, fn, repeat: int = 5) -> None:
    best = math.inf
    for _ in range(1 if SMOKE else repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    print(f"{label:<58} {best * 1e3:9.2f} ms (best of {1 if SMOKE else repeat})")


def main() -> None:
    settings = Settings()
    record = production_record(BATCHES)
    result = score_record(record, settings.scoring)
    print(f"production-scale record: {record.summary.count:,} batches, bpb {result.bpb:.4f}")
    timed(f"score_record, {BATCHES:,} batch entries", lambda: score_record(
        record, settings.scoring))
    rng = random.Random(1)
    hotkeys = [f"hk{i}" for i in range(256)]
    entries = [
        Entry(submission_id=i, hotkey=rng.choice(hotkeys), digest=f"{i:064x}",
              accepted_at=float(i), bpb=1.0 + rng.random(), heldout_delta=rng.random(),
              eligible=rng.random() > 0.1, corpus="fineweb-edu", scored_at=float(i))
        for i in range(SUBMISSIONS)
    ]
    timed(f"build_leaderboard, {SUBMISSIONS:,} scored submissions / 256 hotkeys",
          lambda: build_leaderboard(entries, epsilon=0.001, margin=0.005))
    mg = StaticMetagraph.of(hotkeys)
    credit = {h: rng.random() for h in hotkeys}
    split = Settings(weights={"winner_share": 0.8, "research_share": 0.2})
    timed("build_plan, same entries, research credit on 256 hotkeys",
          lambda: build_plan(entries, mg, split, research_credit=credit))


if __name__ == "__main__":
    main()
