"""Size of a run record as its schedule's step count grows (one-row steps, production-like
figures per step, one kept loss a step), in the record format before version 3 (a
`batches` list of per-step objects in the JSON) and today's (a bounded JSON summary plus
the packed per-step columns in a blob beside it).

    .venv/bin/python benchmarks/record_size.py --steps 10000 100000 1000000
    .venv/bin/python benchmarks/record_size.py --smoke   # 2,000 and 20,000 steps

Per step count and format: the bytes of the record's JSON (what the store's `record`
column, pages, start-up and peers read), the bytes of the per-step blob (read only by
scoring, a replay and early stop), and the peak RSS of a fresh process that loads the JSON,
and then of one that loads the JSON with its columns. The old format is built only up to
`--old-max` steps (its 1M-step record takes gigabytes to build).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from prism_challenge.sandbox.record import Budget, Consumed, RunRecord
from prism_challenge.sandbox.steps import StepColumns


def build(steps: int) -> RunRecord:
    i = np.arange(steps)
    cols = StepColumns(step=i, rank=np.zeros(steps), offset_row=i, rows=np.ones(steps),
                       tokens=np.full(steps, 1023), bytes=np.full(steps, 4100),
                       nats=2345.678901234 + i, t=12.345678 + i / 7,
                       sample_start=np.arange(steps + 1), sample=np.full(steps, 3.14159265))
    tokens = 1023 * steps
    return RunRecord(
        digest="d" * 64, corpus="fineweb-edu", manifest_sha256="m" * 64, vocab_size=50257,
        seq_len=1024, param_cap=150_000_000,
        budget=Budget(rows=steps, tokens=tokens, scored_tokens=tokens, bytes=4100 * steps),
        consumed=Consumed(rows=steps, scored_tokens=tokens, bytes=4100 * steps,
                          nats=math.fsum(cols.nats.tolist())),
        steps=cols, exit_reason="ok",
    )


def old_json(record: RunRecord) -> str:
    """The record as version 2 wrote it: one JSON object per step."""
    raw = json.loads(record.model_dump_json())
    del raw["summary"]
    raw["version"] = 2
    raw["batches"] = [json.loads(e.model_dump_json()) for e in record.columns.entries()]
    return json.dumps(raw, separators=(",", ":"))


def check_round_trip(record: RunRecord, text: str, blob: bytes) -> None:
    """The stored JSON and blob read back into the same per-step columns and summary."""
    raw = json.loads(text)
    raw["steps"] = blob
    back = RunRecord.model_validate(raw)
    if back.summary != record.summary or not all(
            np.array_equal(getattr(back.columns, f), getattr(record.columns, f))
            for f in ("step", "offset_row", "tokens", "bytes", "nats", "t")):
        sys.exit("record_size: the record did not read back as it was written")


def _load(path: str, blob: str | None) -> None:
    with open(path) as fh:
        raw = json.load(fh)
    if blob:
        with open(blob, "rb") as fh:
            raw["steps"] = fh.read()
    RunRecord.model_validate(raw)
    # VmHWM belongs to this process's own address space (ru_maxrss would carry over the
    # parent's peak through fork and exec)
    with open("/proc/self/status") as fh:
        hwm = next(line for line in fh if line.startswith("VmHWM:"))
    print(int(hwm.split()[1]) // 1024)


def peak_rss(path: str, blob: str | None = None) -> str:
    cmd = [sys.executable, __file__, "--load", path] + (["--blob", blob] if blob else [])
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--old-max", type=int, default=100_000)
    ap.add_argument("--smoke", action="store_true",
                    help="2,000 and 20,000 steps (the old format at 2,000); checks each "
                         "record reads back and that the JSON stays bounded")
    ap.add_argument("--load", help=argparse.SUPPRESS)
    ap.add_argument("--blob", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load:
        return _load(args.load, args.blob)
    if args.smoke:
        args.steps, args.old_max = [2_000, 20_000], 2_000
    sizes: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="prism-record-") as tmp:
        for steps in args.steps:
            record = build(steps)
            new_path, blob_path = os.path.join(tmp, "new.json"), os.path.join(tmp, "steps.npz")
            text, blob = record.model_dump_json(), record.steps_blob()
            check_round_trip(record, text, blob)
            sizes[steps] = len(text)
            with open(new_path, "w") as fh:
                fh.write(text)
            with open(blob_path, "wb") as fh:
                fh.write(blob)
            line = (f"steps {steps:>9,}: new JSON {len(text) / 1e3:7.1f} kB (load peak RSS "
                    f"{peak_rss(new_path)} MB) + blob {len(blob) / 1e6:6.1f} MB "
                    f"({len(blob) / steps:.1f} B/step; JSON + blob load peak RSS "
                    f"{peak_rss(new_path, blob_path)} MB)")
            if steps <= args.old_max:
                old_path = os.path.join(tmp, "old.json")
                old = old_json(record)
                with open(old_path, "w") as fh:
                    fh.write(old)
                line += (f" | old JSON {len(old) / 1e6:6.1f} MB ({len(old) / steps:.0f} B/step,"
                         f" load peak RSS {peak_rss(old_path)} MB)")
            else:
                line += " | old format not built (--old-max)"
            print(line, flush=True)
    if args.smoke:
        small, large = (sizes[n] for n in args.steps)
        growth = large / small
        if not 0 < growth < 1.5:  # ten times the steps: the JSON must not follow them
            sys.exit(f"record_size: the JSON grew {growth:.2f}x for 10x the steps")
        print(f"record_size smoke: JSON {small / 1e3:.1f} kB at {args.steps[0]:,} steps, "
              f"{large / 1e3:.1f} kB at {args.steps[1]:,} (x{growth:.2f}); records read back")


if __name__ == "__main__":
    main()
