"""Harness overhead: the same miner code, model, data and steps, bare vs in the sandbox.

Bare: `train(ctx)` of the bundle driven by an in-process context that slices rows from the
same token stream and computes the same loss (no socket, no sandbox, no audit snapshots).
Harness: the full path (bubblewrap, feeder over the Unix socket, per-position losses, eval sandbox).
Per-step time is measured on both sides over the same steps, skipping the first few
(warm-up); start-up is reported separately as fixed seconds. Bare and harness runs alternate
`--repeats` times and the median ratio is the figure (single pairs vary by +-3% here).

    python benchmarks/harness_overhead.py [--bundle examples/baseline] [--steps 60] [--repeats 5]
    python benchmarks/harness_overhead.py --smoke [--data DIR]   # 8 steps of 16x32, one pair

Both sides must train the same steps on the same rows (the harness serves the budget in its
stream order; the bare loop reads the same rows in that order), or the script stops.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from prism_challenge.config import Settings
from prism_challenge.data import TokenStream, prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.harness.lm_loss import token_nats
from prism_challenge.sandbox.harness.seeding import make_deterministic
from prism_challenge.sandbox.harness.step_clock import StepClock
from prism_challenge.sandbox.runner import Runner
from prism_challenge.sandbox.stream_order import LaneOrder

WARMUP = 5
# a smoke's held-out evaluation: the smallest the eval sandbox takes (it is not measured)
SMOKE_SCORING = {"heldout_positions": 256, "heldout_cuts_per_row": 4}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BareContext:
    """The ctx contract without the harness: the budget's rows in the feeder's stream order
    (the same rows in the same batches), the same loss, the same autocast and compile the
    bundle asks for, under the sandbox's deterministic flags (set by `_bare`), so both
    sides run the same kernels.

    Neither side waits for the GPU per step (the harness reads each step's losses two steps
    late, harness/offload.py): the device is synchronised only where the measured stretch
    starts (after the warm-up) and where it ends, so both sides time finished work.
    """

    def __init__(self, model, stream, seq_len, budget_rows, sep, order: LaneOrder,
                 device=torch.device("cpu")):
        self.model, self.stream, self.seq_len, self.order = model, stream, seq_len, order
        self.vocab_size = stream.manifest.vocab_size
        self.token_budget, self.budget_rows, self.sep = budget_rows * seq_len, budget_rows, sep
        self.device, self.rank, self.world_size = torch.device(device), 0, 1
        self.times: list[float] = []
        self.clock = StepClock()  # the same segments as the harness's (harness/step_clock.py)

    def time_left(self):
        return 1e9

    def log(self, **_):
        pass

    def batches(self, batch_size, *, autocast_dtype=None, compile=False):
        forward = torch.compile(self.model) if compile else self.model
        clock = self.clock
        clock.restart()
        row = 0
        while row < self.budget_rows:
            if clock.steps or row:
                clock.mark("miner")
            n = min(batch_size, self.budget_rows - row)
            block = self.stream.rows_at(self.seq_len, self.order.rows_at(row, n))
            tokens = int((block[:, 1:] != self.sep).sum())  # counted on the host, as the feeder
            clock.mark("rows")
            block = torch.from_numpy(block.astype(np.int64))
            if self.device.type == "cuda":  # as the harness does
                block = block.pin_memory()
            block = block.to(self.device, non_blocking=True)
            row += n
            x, y = block[:, :-1].clone(), block[:, 1:]
            self.model.train()
            clock.mark("prepare")
            with torch.autocast(device_type=self.device.type, dtype=autocast_dtype,
                                enabled=autocast_dtype is not None):
                logits = forward(x)
            clock.mark("forward")
            nats = token_nats(logits, y, self.sep).sum()
            self._stamp(sync=len(self.times) == WARMUP)
            batch = SimpleNamespace(inputs=x, targets=y.clone(), loss=nats / max(tokens, 1))
            clock.mark("loss")
            yield batch
        self._stamp(sync=True)

    def _stamp(self, sync: bool) -> None:
        if sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.times.append(time.perf_counter())


def host_profile(run_dir: Path | dict, who: str = "harness") -> str:
    """The harness's own account of its host time per step (harness/step_clock.py), read from
    the run's scratch folder, or a bare loop's (`StepClock.summary()`)."""
    if isinstance(run_dir, dict):
        got = run_dir
    else:
        try:
            got = json.loads((run_dir / "scratch" / "step_profile_rank0.json").read_text())
        except (OSError, ValueError):
            return f"{who} host time per step: not written"
    ms = got["ms_per_step"]
    parts = ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
    return (f"{who} host time per step (ms, {got['steps']} steps): {parts}; "
            f"sum {sum(ms.values()):.3f}")


def per_step(times: list[float]) -> float:
    t = times[WARMUP:]
    return (t[-1] - t[0]) / (len(t) - 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("examples/baseline"))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=16, help="the bundle's batch size")
    ap.add_argument("--seq-len", type=int, default=Settings().challenge.seq_len,
                    help="default: the challenge's configured (demo) seq_len")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder; default: a synthetic corpus built here")
    ap.add_argument("--smoke", action="store_true",
                    help=f"{WARMUP + 3} steps of 16x32, one pair: the same path, tiny")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.batch, args.seq_len, args.repeats = WARMUP + 3, 16, 32, 1
    work = Path(tempfile.mkdtemp(prefix="prism-overhead-"))
    data = args.data or work / "data"
    if args.data is None:
        source = write_jsonl(work / "docs.jsonl", english_like_documents(1500, seed=1))
        prepare_data(small_spec([source]), data)
    train_stream = TokenStream.open(data, "train")
    budget_rows = args.steps * args.batch
    settings = Settings(
        challenge={"seq_len": args.seq_len, "token_budget": budget_rows * args.seq_len,
                   "deadline_s": 600.0},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0},
        scoring=SMOKE_SCORING if args.smoke else {},
    )
    torch.set_num_threads(1)
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    runner = Runner.from_data(settings, make_backend("bubblewrap"), data)
    ratios, bares, harnesses = [], [], []
    for i in range(args.repeats):
        bare_step, bare_steps, bare_profile = _bare(args, settings, train_stream, budget_rows)
        record = runner.run(files, hashlib.sha256(files["training.py"]).hexdigest(),
                            work / f"run{i}")
        if record.exit_reason != "ok" or record.summary.count < WARMUP + 2:
            sys.exit(f"harness run failed: {record.exit_reason} {record.exit_detail}")
        if record.summary.count != bare_steps or record.consumed.rows != budget_rows:
            sys.exit(f"the sides differ: harness {record.summary.count} steps of "
                     f"{record.consumed.rows} rows, bare {bare_steps} steps of {budget_rows}")
        harness_step = per_step(record.columns.t.tolist())
        bares.append(bare_step)
        harnesses.append(harness_step)
        ratios.append(harness_step / bare_step)
        print(f"repeat {i}: bare {bare_step * 1e3:7.2f} ms/step  harness "
              f"{harness_step * 1e3:7.2f} ms/step  ratio {ratios[-1]:.3f}  "
              f"start-up {record.startup_s:.2f} s  eval {record.eval_s:.2f} s")
        print(f"  {host_profile(work / f'run{i}')}")
        print(f"  {host_profile(bare_profile, 'bare loop')}")
    print(f"bundle {args.bundle}  steps {record.summary.count}  batch {args.batch}x{args.seq_len}"
          f"  kept chance per position {record.keep_rate:.3g}")
    print(f"bare loop     : {statistics.median(bares) * 1e3:8.2f} ms/step (median)")
    print(f"harness       : {statistics.median(harnesses) * 1e3:8.2f} ms/step (median)")
    print(f"fixed start-up: {record.startup_s:.2f} s to the first batch; eval sandbox "
          f"{record.eval_s:.2f} s")
    print(f"per-step ratio harness/bare = {statistics.median(ratios):.3f} median of "
          f"{len(ratios)} (min {min(ratios):.3f}, max {max(ratios):.3f}; target <= 1.05); "
          f"both sides {record.summary.count} steps")


def _bare(args, settings, train_stream, budget_rows, device="cpu") -> tuple[float, int, dict]:
    """(seconds per step after the warm-up, steps, host time per segment) of `train(ctx)`
    without the harness."""
    # the sandbox's deterministic flags and seeds, as the harness sets them before the
    # miner's code (torch's thread count is the benchmark's own, set in main)
    make_deterministic(settings.challenge.seed, torch.get_num_threads())
    arch = _load(args.bundle / "architecture.py", "bench_architecture")
    ctx_build = SimpleNamespace(vocab_size=train_stream.manifest.vocab_size,
                                seq_len=args.seq_len, max_params=settings.challenge.param_cap)
    model = arch.build_model(ctx_build).to(device)
    bare = BareContext(model, train_stream, args.seq_len, budget_rows,
                       train_stream.manifest.separator_id,
                       LaneOrder(budget_rows, settings.challenge.stream_lanes), device)
    _load(args.bundle / "training.py", "bench_training").train(bare)
    return per_step(bare.times), len(bare.times) - 1, bare.clock.summary()


if __name__ == "__main__":
    main()
