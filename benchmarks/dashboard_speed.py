#!/usr/bin/env python3
"""Dashboard and /metrics latency over real HTTP on a production-sized store.

    .venv/bin/python benchmarks/dashboard_speed.py [--submissions 2000] [--batches 30000]

The store: `--submissions` submissions from 400 hotkeys (three quarters scored, the rest
queued), and one run record of `--batches` batches (1 B tokens at 32 rows x 1024 per step
is ~30,000 batches). Each page is fetched 10 times from a uvicorn server on 127.0.0.1;
the first fetch and the median of the next ten are reported with their ratio to the
target (below 1.0 meets it). Timings include the client, on the same machine.
`--smoke` (the suite runs it): 20 submissions, 200 batches, two fetches a page; any page
that does not answer 200 stops it.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from bittensor.sp_core import Keypair

from prism_challenge.api import ApiDeps, ApiServer
from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config.settings import Settings
from prism_challenge.sandbox.record import BatchEntry, Budget, Consumed, EvalResult, RunRecord
from prism_challenge.scoring import ScoreResult, record_score
from prism_challenge.storage import Store
from prism_challenge.storage.lifecycle import transition
from prism_challenge.storage.tables import RunRecord as RunRow
from prism_challenge.storage.tables import Submission
from prism_challenge.validator.app import create_app

TARGET_MS = {"overview": 250.0, "submission": 250.0, "metrics": 100.0}


def build_store(store: Store, submissions: int, batches: int) -> int:
    hotkeys = [Keypair.create_from_seed(i.to_bytes(32, "big")).ss58_address for i in range(400)]
    with store.session() as s:
        for i in range(submissions):
            s.add(Submission(digest=f"{i:064x}", hotkey=hotkeys[i % 400], status="received",
                             name=f"bundle-{i}", accepted_at=1e9 + i, updated_at=1e9 + i,
                             bundle=b"x" * 2048))
    scored = submissions * 3 // 4
    with store.session() as s:
        for sid in range(1, submissions + 1):
            transition(s, sid, "queued")
            if sid <= scored:
                transition(s, sid, "running")
                result = ScoreResult(
                    bpb=1.0 + (sid * 7919 % 1000) / 1000, prequential_bpb=1.0, uniform_bpb=8.0,
                    tail_bpb=1.0, heldout_delta=1.0, gap=0.0, penalty=0.0, eligible=True,
                    reasons=[], notes=[], unconsumed_tokens=0, exit_reason="ok")
                record_score(s, sid, result, "fineweb-edu", now=2e9 + sid)
                transition(s, sid, "scored")
    entries = [
        BatchEntry(step=i, offset_row=32 * i, rows=32, tokens=32 * 1024, bytes=140_000,
                   nats=32 * 1024 * (2.0 + 8.0 * math.exp(-i / 3000)), t=0.08 * i)
        for i in range(batches)
    ]
    record = RunRecord(
        digest=f"{1:064x}", corpus="fineweb-edu", manifest_sha256="f" * 64, vocab_size=32768,
        seq_len=1024, param_cap=150_000_000,
        budget=Budget(rows=32 * batches, tokens=32768 * batches, scored_tokens=32768 * batches,
                      bytes=140_000 * batches),
        consumed=Consumed(rows=32 * batches, scored_tokens=32768 * batches,
                          bytes=140_000 * batches, nats=sum(b.nats for b in entries)),
        batches=entries, exit_reason="ok",
        eval=EvalResult(val_bpb_trained=0.9, val_bpb_twin=3.5,
                        uniform_nats_per_token=math.log(32768)),
    )
    with store.session() as s:
        s.add(RunRow(submission_id=1, attempt=1, record=record.model_dump(mode="json"),
                     steps=record.steps_blob(), created_at=3e9))
    return 1


def timed_ms(url: str, repeats: int = 10) -> tuple[float, float, int]:
    """(first fetch, median of the next `repeats`, body size); the first one parses the
    run record (the dashboard caches its digest) and fills the metrics' run tally."""
    times, size = [], 0
    with httpx.Client(timeout=60) as client:
        start = time.perf_counter()
        client.get(url).raise_for_status()
        cold = (time.perf_counter() - start) * 1000
        for _ in range(repeats):
            start = time.perf_counter()
            r = client.get(url)
            times.append((time.perf_counter() - start) * 1000)
            r.raise_for_status()
            size = len(r.content)
    return cold, statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--submissions", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=30_000)
    ap.add_argument("--smoke", action="store_true", help="a tiny store, two fetches a page")
    args = ap.parse_args()
    repeats = 1 if args.smoke else 10
    if args.smoke:
        args.submissions, args.batches = 20, 200
    print(f"load average before: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        start = time.perf_counter()
        sid = build_store(store, args.submissions, args.batches)
        print(f"store built in {time.perf_counter() - start:.1f} s: {args.submissions} "
              f"submissions, one run record of {args.batches} batches")
        settings = Settings(dashboard={"refresh_s": 0})
        metagraph = StaticMetagraph.of([], allow_any=True)
        app = create_app(ApiDeps(settings=settings, store=store, metagraph=metagraph))
        with ApiServer(app) as server:
            pages = {
                "overview": f"{server.url}/",
                "submission": f"{server.url}/dashboard/submissions/{sid}",
                "metrics": f"{server.url}/metrics",
            }
            for name, url in pages.items():
                cold, ms, size = timed_ms(url, repeats)
                print(f"{name:<11} first {cold:7.1f} ms  median {ms:7.1f} ms  "
                      f"({size / 1024:6.1f} KiB)  target {TARGET_MS[name]:.0f} ms  "
                      f"ratio {ms / TARGET_MS[name]:.2f} (first {cold / TARGET_MS[name]:.2f})")
        store.close()


if __name__ == "__main__":
    main()
