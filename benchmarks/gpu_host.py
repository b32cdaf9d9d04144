"""A GPU validator host, measured: k concurrent evaluations of a bundle on k slots.

Plans the host's slots as the validator does (groups of `--nproc` GPUs, disjoint CPU cores),
probes each slot's health, then runs the bundle through the real runner (bubblewrap, feeder,
torchrun, eval sandbox) on one slot (k = 1) and on every slot at once (k = all), printing
each run's wall time and training tokens/s. Last, the harness/bare per-step ratio on GPU 0:
the same `train(ctx)` driven in-process (no sandbox, no socket) vs the harness run's own
per-step times. On a machine without GPUs it says so and exits 0.

    python benchmarks/gpu_host.py [--bundle examples/baseline] [--steps 200] [--batch 16]
                                  [--seq-len 256] [--nproc 1]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from harness_overhead import WARMUP, _bare, per_step

from prism_challenge.config import Settings
from prism_challenge.data import TokenStream, prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.hardware.devices import discover_gpus, host_cpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot, plan_slots
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Runner

TOKENS_PER_DOC = 150  # a low estimate for the synthetic corpus, so the budget always fits


def _gpus_or_exit():
    try:
        gpus = discover_gpus([])
    except Exception as exc:  # noqa: BLE001 - a broken driver is "no GPU" for this benchmark
        print(f"gpu_host: cannot list GPUs ({exc}); nothing to measure")
        sys.exit(0)
    if not gpus:
        print("gpu_host: no GPU on this machine (nvidia-smi and torch.cuda see none); "
              "nothing to measure")
        sys.exit(0)
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        print(f"gpu_host: {len(gpus)} GPU(s) listed but this torch ({torch.__version__}) cannot "
              "use them; install the CUDA build to measure")
        sys.exit(0)
    return gpus


def _runs(runner: Runner, slots: list[Slot], files, work: Path, label: str) -> list[RunRecord]:
    records: dict[int, RunRecord] = {}
    digest = hashlib.sha256(b"".join(files.values())).hexdigest()

    def one(slot: Slot) -> None:
        with slot.lease():
            records[slot.index] = runner.on_slot(slot).run(
                files, digest, work / f"{label}-slot{slot.index}")

    threads = [threading.Thread(target=one, args=(s,)) for s in slots]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    out = [records[s.index] for s in slots]
    for r in out:
        if r.exit_reason != "ok":
            sys.exit(f"{label}: slot {r.placement.slot} failed: {r.exit_reason} {r.exit_detail}")
        wall = r.startup_s + r.train_s + r.eval_s
        print(f"{label}  slot {r.placement.slot} GPUs {','.join(r.placement.gpus)}: wall "
              f"{wall:7.1f} s (start-up {r.startup_s:.1f}, train {r.train_s:.1f}, eval "
              f"{r.eval_s:.1f})  {r.consumed.scored_tokens / r.train_s:10.0f} tokens/s")
    total = sum(r.consumed.scored_tokens for r in out)
    print(f"{label}  {len(out)} run(s) in {elapsed:.1f} s: mean "
          f"{statistics.mean(r.consumed.scored_tokens / r.train_s for r in out):.0f} tokens/s "
          f"per run, {total / elapsed:.0f} tokens/s for the host")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("examples/baseline"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16, help="the bundle's batch size")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--nproc", type=int, default=1, help="GPUs per slot (nproc_per_node)")
    args = ap.parse_args()
    gpus = _gpus_or_exit()
    budget_rows = args.steps * args.batch
    settings = Settings(
        challenge={"seq_len": args.seq_len, "token_budget": budget_rows * args.seq_len,
                   "deadline_s": 1800.0},
        sandbox={"nproc_per_node": args.nproc, "cpu_threads": 2, "memory_bytes": 32 * 2**30,
                 "disk_bytes": 8 * 2**30, "save_grace_s": 60.0},
    )
    slots = plan_slots(settings, gpus, host_cpus())
    work = Path(tempfile.mkdtemp(prefix="prism-gpu-host-"))
    docs = int(budget_rows * (args.seq_len + 1) / 0.8 / TOKENS_PER_DOC) + 200
    source = write_jsonl(work / "docs.jsonl", english_like_documents(docs, seed=1))
    prepare_data(small_spec([source]), work / "data")
    backend = make_backend("bubblewrap")
    health = HealthCheck(settings, backend, work / "health")
    for slot in slots:
        h = health.check(slot)
        print(f"probe {slot.describe()}: {'ok' if h.ok else 'FAILED ' + h.reason} "
              f"in {h.seconds:.1f} s")
        if not h.ok:
            sys.exit(1)
    runner = Runner.from_data(settings, backend, work / "data")
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    print(f"{len(gpus)} GPU(s), {len(slots)} slot(s) of {args.nproc}; bundle {args.bundle}, "
          f"{args.steps} steps of {args.batch}x{args.seq_len}")
    (one,) = _runs(runner, slots[:1], files, work, "k=1  ")
    _runs(runner, slots, files, work, f"k={len(slots)}  ")
    if len(one.batches) < WARMUP + 2:
        sys.exit("too few steps for a per-step figure; raise --steps")
    harness_step = per_step([b.t for b in one.batches if b.rank == 0])
    stream = TokenStream.open(work / "data", "train")
    bare_args = SimpleNamespace(bundle=args.bundle, seq_len=args.seq_len)
    bare_step = _bare(bare_args, settings, stream, budget_rows, device="cuda:0")
    print(f"per-step on GPU 0: bare {bare_step * 1e3:.2f} ms, harness {harness_step * 1e3:.2f} "
          f"ms; ratio harness/bare = {harness_step / bare_step:.3f}")


if __name__ == "__main__":
    main()
