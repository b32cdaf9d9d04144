"""Size of a run record as its schedule's step count grows (one-row steps, production-like
figures per step): JSON bytes, and the peak RSS of validating it back, per step count.

    .venv/bin/python benchmarks/record_size.py --steps 10000 100000

Prints one line per step count; the figures grow linearly with the steps: today a record's
per-step detail (`RunRecord.batches`) is unbounded, which this script measures.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

from prism_challenge.sandbox.record import BatchEntry, Budget, Consumed, RunRecord


def build(steps: int) -> str:
    batches = [BatchEntry(step=i, offset_row=i, rows=1, tokens=1023, bytes=4100,
                          nats=2345.678901234 + i, t=12.345678 + i / 7, sample=[3.14159265])
               for i in range(steps)]
    tokens = 1023 * steps
    return RunRecord(
        digest="d" * 64, corpus="fineweb-edu", manifest_sha256="m" * 64, vocab_size=50257,
        seq_len=1024, param_cap=150_000_000,
        budget=Budget(rows=steps, tokens=tokens, scored_tokens=tokens, bytes=4100 * steps),
        consumed=Consumed(rows=steps, scored_tokens=tokens, bytes=4100 * steps,
                          nats=sum(b.nats for b in batches)),
        batches=batches, exit_reason="ok",
    ).model_dump_json()


def _load(path: str) -> None:
    with open(path) as fh:
        RunRecord.model_validate(json.load(fh))
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--load", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load:
        return _load(args.load)
    for steps in args.steps:
        path = f"/tmp/prism-record-{steps}.json"
        text = build(steps)
        with open(path, "w") as fh:
            fh.write(text)
        rss = subprocess.run([sys.executable, __file__, "--load", path], check=True,
                             capture_output=True, text=True).stdout.strip()
        print(f"steps {steps:>9,}: record {len(text) / 1e6:8.1f} MB JSON, "
              f"{len(text) / steps:.0f} B/step, load peak RSS {rss} MB")


if __name__ == "__main__":
    main()
