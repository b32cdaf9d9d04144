#!/usr/bin/env python3
"""Data-plane throughput: challenge tokenizer MB/s and reader tokens/s.

    .venv/bin/python benchmarks/data_throughput.py [--distributions numpy scipy matplotlib]

1. Text: the demo builder's docstrings of a few installed distributions (real English
   prose, ~8 MB by default), not counted in any figure.
2. The whole pipeline (`prepare_data`, local jsonl source, the demo spec's tokenizer and
   shard settings) prepares a data root from it in a temporary folder: reported as MB/s of
   text end to end.
3. Tokenizer: the pipeline's batch encoder (`encode_batch_fast` in ~4 MB batches) over the
   same text with the trained vocab-4096 tokenizer; best of 3 passes, MB/s of UTF-8 text.
4. Reader: `TokenStream.open` (verifies every shard's sha256), then `rows(seq_len, start,
   count)` over the whole train split in batches, sequentially and at random starts; best
   of 3, tokens/s counting every token returned (count x (seq_len + 1)).

`--smoke` (the suite runs it): the docstrings of rich, typer and pydantic, one batch size;
it fails on an error of the pipeline or the reader, never on speed (the last line still
says whether the targets were met).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from prism_challenge.data import DemoSource, TokenStream, load_spec, load_tokenizer, prepare_data
from prism_challenge.data.demo_corpus import iter_demo
from prism_challenge.data.spec import LocalSource
from prism_challenge.data.tokenizer import iter_encoded

TOKENIZER_TARGET_MBS = 5.0
READER_TARGET_TPS = 50e6


def _best(fn, repeats: int = 3, clock=time.perf_counter) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = clock()
        fn()
        best = min(best, clock() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distributions", nargs="+", default=["numpy", "scipy", "matplotlib"])
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch-rows", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--smoke", action="store_true", help="small text, one batch size")
    args = ap.parse_args()
    if args.smoke:
        args.distributions, args.batch_rows = ["rich", "typer", "pydantic"], [64]

    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    demo = load_spec("data_manifests/demo.json")
    docs = list(iter_demo(DemoSource(distributions=args.distributions, min_text_bytes=1)))
    texts = [d.data.decode() for d in docs]
    nbytes = sum(len(d.data) for d in docs)
    print(f"text: {len(docs):,} docstring documents, {nbytes / 1e6:.1f} MB ({args.distributions})")

    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        src = Path(tmp) / "docs.jsonl"
        with open(src, "w", encoding="utf-8") as fh:
            for d, t in zip(docs, texts, strict=True):
                fh.write(json.dumps({"id": d.id, "text": t}) + "\n")
        root = Path(tmp) / "data"
        spec = demo.with_source(LocalSource(inputs=[str(src)]))
        report = prepare_data(spec, root)
        pipeline_mbs = nbytes / 1e6 / report.seconds
        print(
            f"pipeline: {report.seconds:.1f} s = {pipeline_mbs:.1f} MB/s end to end "
            f"(stage {report.timings['stage']:.1f} s, tokenizer training "
            f"{report.timings['tokenizer']:.1f} s, encode+shards {report.timings['shards']:.1f} s)"
        )

        tok = load_tokenizer(root)
        batches, batch, size = [], [], 0
        for t in texts:
            batch.append(t)
            size += len(t)
            if size >= 4 << 20:
                batches.append(batch)
                batch, size = [], 0
        if batch:
            batches.append(batch)

        def encode_all() -> None:
            for b in batches:
                for _ in iter_encoded(tok, b):
                    pass

        tok_mbs = nbytes / 1e6 / _best(encode_all)
        # CPU seconds of all threads: what the encoder costs, whatever else the machine runs.
        tok_cpu_mbs = nbytes / 1e6 / _best(encode_all, clock=time.process_time)
        print(
            f"tokenizer: {tok_mbs:.1f} MB/s wall on {os.cpu_count()} cores "
            f"(target >= {TOKENIZER_TARGET_MBS:g}); {tok_cpu_mbs:.1f} MB per CPU-second; "
            f"load average now {os.getloadavg()[0]:.2f}"
        )

        t = time.perf_counter()
        stream = TokenStream.open(root, "train")
        opened = time.perf_counter() - t
        shard_mb = stream.n_tokens * 2 / 1e6
        print(
            f"open(train): {opened * 1e3:.0f} ms for {stream.n_tokens:,} tokens "
            f"({shard_mb / opened:.0f} MB/s of shards hashed)"
        )
        L = args.seq_len
        n = stream.n_rows(L)
        rng = np.random.default_rng(0)
        figures = {}
        for rows_per_call in args.batch_rows:
            calls = n // rows_per_call
            starts = np.arange(calls) * rows_per_call
            shuffled = rng.permutation(starts)
            for label, order in (("sequential", starts), ("random", shuffled)):

                def read(order=order, rows_per_call=rows_per_call) -> None:
                    for s in order:
                        stream.rows(L, int(s), rows_per_call)

                tps = calls * rows_per_call * (L + 1) / _best(read)
                figures[f"reader_{label}_{rows_per_call}"] = tps
                print(
                    f"reader rows({L}, start, {rows_per_call}) {label}: {tps / 1e6:.0f} M tokens/s "
                    f"(target >= {READER_TARGET_TPS / 1e6:g} M)"
                )

    reader = min(figures.values())
    ok = tok_mbs >= TOKENIZER_TARGET_MBS and reader >= READER_TARGET_TPS
    print(
        f"{'PASS' if ok else 'BELOW TARGET'}: tokenizer {tok_mbs:.1f} MB/s, reader (slowest) "
        f"{reader / 1e6:.0f} M tokens/s"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "tokenizer_mb_s": tok_mbs,
                    "tokenizer_mb_per_cpu_s": tok_cpu_mbs,
                    "pipeline_mb_s": pipeline_mbs,
                    **figures,
                },
                indent=2,
            )
        )
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    raise SystemExit(main())
