"""A GPU validator host, measured: k concurrent evaluations of a bundle on k slots.

Plans the host's slots as the validator does (groups of `--nproc` GPUs, disjoint CPU cores),
probes each slot's health, then runs the bundle through the real runner (bubblewrap, feeder,
rank launcher, eval sandbox) on one slot (k = 1) and on every slot at once (k = all), printing
each run's wall time, start-up and training tokens/s; replays the k = 1 run on the same
stack and prints the verdict. Last, the harness/bare per-step ratio on GPU 0: the same
`train(ctx)` driven in-process (no sandbox, no socket; the same autocast and compile, the
same deterministic flags, the same rows; benchmarks/bare_loop.py) vs the harness run's own
per-step times, with the same bare loop run inside a sandbox built like the training
sandbox between them, which splits the ratio into what the sandbox's environment costs and
what the harness costs.

Without a GPU it runs the bundle once on the CPU and prints the start-up figures (sandbox
to first batch, eval sandbox), saying the GPU figures are unmeasured.

    python benchmarks/gpu_host.py [--bundle examples/baseline] [--steps 200] [--batch 16]
                                  [--seq-len 256] [--nproc 1] [--data prism-data/data]
    python benchmarks/gpu_host.py --bundle benchmarks/bundles/gpt100m --seq-len 1024 \
                                  --steps 100 --data prism-data/data   # ~92M params, bf16
    python benchmarks/gpu_host.py --deterministic both   # torch's global deterministic mode
        # on and off side by side: per-step ratios, each mode's same-stack replay, and how
        # far the two modes' batch losses are apart
    python benchmarks/gpu_host.py --smoke [--data DIR]   # 8 steps of 16x32, same path

The replay must pass (it stops the script otherwise). Last line:
`gpu_host: N run(s) ok on <GPUs or this CPU>, start-up X s, replay passed`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from bare_loop import WARMUP, in_sandbox, per_step
from harness_overhead import SMOKE_SCORING, _bare, eval_profile, host_profile

from prism_challenge.config import Settings
from prism_challenge.data import TokenStream, prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.hardware.devices import discover_gpus, host_cpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot, plan_slots
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Runner
from prism_challenge.verification.verdict import verdict

TOKENS_PER_DOC = 150  # a low estimate for the synthetic corpus, so the budget always fits
PARAM_CAP = 150_000_000  # room for the ~92M-parameter GPT in benchmarks/bundles/gpt100m


def _usable_gpus() -> tuple[list, str]:
    """The host's GPUs, or none with the reason (the benchmark then measures the CPU)."""
    try:
        gpus = discover_gpus([])
    except Exception as exc:  # noqa: BLE001 - a broken driver is "no GPU" for this benchmark
        return [], f"cannot list GPUs ({exc})"
    if not gpus:
        return [], "no GPU on this machine (nvidia-smi and torch.cuda see none)"
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return [], (f"{len(gpus)} GPU(s) listed but this torch ({torch.__version__}) cannot "
                    "use them; install the CUDA build to measure")
    return gpus, ""


def bench_settings(args, budget_rows: int, **sandbox) -> Settings:
    """The settings a benchmark run of `args.steps` x `args.seq_len` uses: room for the
    ~92M-parameter GPT and its snapshots, no deadline in the way."""
    return Settings(
        challenge={"seq_len": args.seq_len, "token_budget": budget_rows * args.seq_len,
                   "deadline_s": 1800.0, "param_cap": PARAM_CAP},
        sandbox={"cpu_threads": 2, "memory_bytes": 32 * 2**30, "disk_bytes": 8 * 2**30,
                 "save_grace_s": 60.0, **sandbox},
        scoring=SMOKE_SCORING if args.smoke else {},
    )


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
        print(f"{label}  slot {r.placement.slot}: "
              f"{eval_profile(work / f'{label}-slot{r.placement.slot}')}")
    total = sum(r.consumed.scored_tokens for r in out)
    print(f"{label}  {len(out)} run(s) in {elapsed:.1f} s: mean "
          f"{statistics.mean(r.consumed.scored_tokens / r.train_s for r in out):.0f} tokens/s "
          f"per run, {total / elapsed:.0f} tokens/s for the host")
    return out


def _data(args, work: Path, budget_rows: int) -> Path:
    if args.data is not None:
        return args.data
    docs = int(budget_rows * (args.seq_len + 1) / 0.8 / TOKENS_PER_DOC) + 200
    source = write_jsonl(work / "docs.jsonl", english_like_documents(docs, seed=1))
    prepare_data(small_spec([source]), work / "data")
    return work / "data"


def _replay(runner: Runner, slot: Slot | None, files, record: RunRecord, work: Path,
            must_pass: bool = True) -> None:
    """Replay `record` on the same stack and print the verdict; unless `must_pass` is False
    (a measurement of a mode, not a check), the script stops if it did not pass."""
    on = runner.on_slot(slot) if slot is not None else runner
    replay = on.replay(files, record, work / "replay")
    result = verdict(replay, runner.settings.verification)
    print(f"replay on the same stack: {'passed' if result.passed else 'FAILED'} (batches "
          f"{replay.batches_compared}, max rel diff {replay.batch_max_rel_diff:.2e}; probes "
          f"{replay.probes.compared}, snapshots {replay.snapshots.compared}) "
          f"{'; '.join(result.reasons)[:300]}")
    if must_pass and not result.passed:
        sys.exit("gpu_host: the replay of an honest run on the same stack failed")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("examples/baseline"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16, help="the bundle's batch size")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--nproc", type=int, default=1, help="GPUs per slot (nproc_per_node)")
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder (e.g. the demo corpus at prism-data/data); "
                         "default: a synthetic corpus built here")
    ap.add_argument("--deterministic", choices=("on", "off", "both"), default="on",
                    help="torch's global deterministic mode in the sandbox "
                         "(sandbox.deterministic_algorithms); both: each mode side by side")
    ap.add_argument("--smoke", action="store_true",
                    help=f"{WARMUP + 3} steps of 16x32: the same path at the smallest size")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.batch, args.seq_len = WARMUP + 3, 16, 32
    gpus, why = _usable_gpus()
    budget_rows = args.steps * args.batch
    settings = bench_settings(args, budget_rows, nproc_per_node=args.nproc,
                              deterministic_algorithms=args.deterministic != "off")
    work = Path(tempfile.mkdtemp(prefix="prism-gpu-host-"))
    data = _data(args, work, budget_rows)
    backend = make_backend("bubblewrap")
    runner = Runner.from_data(settings, backend, data)
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    if not gpus:
        print(f"gpu_host: {why}; GPU figures unmeasured. On this CPU, bundle {args.bundle}, "
              f"{args.steps} steps of {args.batch}x{args.seq_len}:")
        record = runner.run(files, hashlib.sha256(b"".join(files.values())).hexdigest(),
                            work / "cpu")
        if record.exit_reason != "ok":
            sys.exit(f"cpu run failed: {record.exit_reason} {record.exit_detail[:500]}")
        print(f"start-up {record.startup_s:.2f} s to the first batch, train "
              f"{record.train_s:.2f} s, eval sandbox {record.eval_s:.2f} s; stack "
              f"{record.stack.model_dump(exclude_none=True) if record.stack else None}")
        print(eval_profile(work / "cpu"))
        _replay(runner, None, files, record, work)
        print(f"gpu_host: 1 run(s) ok on this CPU, start-up {record.startup_s:.2f} s, "
              "replay passed")
        return
    slots = plan_slots(settings, gpus, host_cpus())
    health = HealthCheck(settings, backend, work / "health")
    for slot in slots:
        h = health.check(slot)
        print(f"probe {slot.describe()}: {'ok' if h.ok else 'FAILED ' + h.reason} "
              f"in {h.seconds:.1f} s")
        if not h.ok:
            sys.exit(1)
    print(f"{len(gpus)} GPU(s), {len(slots)} slot(s) of {args.nproc}; bundle {args.bundle}, "
          f"{args.steps} steps of {args.batch}x{args.seq_len}")
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.deterministic]
    firsts: dict[bool, RunRecord] = {}
    every: list[RunRecord] = []
    for strict in modes:
        mode = "deterministic on" if strict else "deterministic off"
        on = Runner.from_data(settings.model_copy(update={"sandbox": settings.sandbox.model_copy(
            update={"deterministic_algorithms": strict})}), backend, data)
        (one,) = _runs(on, slots[:1], files, work, f"{mode} k=1  ")
        (work / mode.replace(" ", "-")).mkdir(exist_ok=True)
        _replay(on, slots[0], files, one, work / mode.replace(" ", "-"), must_pass=strict)
        firsts[strict] = one
        if strict == modes[0] and len(slots) > 1:  # one slot: the k = 1 run was it
            every = _runs(on, slots, files, work, f"{mode} k={len(slots)}  ")
        if one.summary.count < WARMUP + 2:
            sys.exit("too few steps for a per-step figure; raise --steps")
        harness_step = per_step(one.columns.t[one.columns.rank == 0].tolist())
        os.environ["PRISM_DETERMINISTIC"] = "1" if strict else "0"  # the bare loop's flags
        stream = TokenStream.open(data, "train")
        bare_args = SimpleNamespace(bundle=args.bundle, seq_len=args.seq_len)
        bare_step, _, bare_profile = _bare(bare_args, settings, stream, budget_rows,
                                           device="cuda:0")
        boxed_step, _, boxed_profile = in_sandbox(on.on_slot(slots[0]), args.bundle,
                                                  work / f"{mode.replace(' ', '-')}-bare")
        print(f"{mode}: per-step on GPU 0: bare {bare_step * 1e3:.2f} ms, bare in the sandbox "
              f"{boxed_step * 1e3:.2f} ms, harness {harness_step * 1e3:.2f} ms; ratio "
              f"harness/bare = {harness_step / bare_step:.3f} (the sandbox's environment "
              f"{boxed_step / bare_step:.3f}, the harness {harness_step / boxed_step:.3f})")
        print(f"{mode}: {host_profile(work / f'{mode} k=1  -slot{slots[0].index}')}")
        print(f"{mode}: {host_profile(bare_profile, 'bare loop')}")
        print(f"{mode}: {host_profile(boxed_profile, 'bare loop in the sandbox')}")
    if len(firsts) == 2:  # the same training under each mode: how far apart its losses are
        a, b = firsts[True].columns.nats, firsts[False].columns.nats
        if len(a) == len(b):
            rel = abs(a - b) / abs(a).clip(min=1e-12)
            print(f"modes compared: {int((a == b).sum())} of {len(a)} batch losses identical, "
                  f"max rel diff {float(rel.max()):.2e}")
    print(f"gpu_host: {len(modes) + len(every)} run(s) ok on {len(gpus)} GPU(s), start-up "
          f"{firsts[modes[0]].startup_s:.2f} s, replay passed")


if __name__ == "__main__":
    main()
