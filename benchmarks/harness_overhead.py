"""Harness overhead: the same miner code, model, data and steps, bare vs in the sandbox.

Bare: `train(ctx)` of the bundle driven by an in-process context that slices rows from the
same token stream and computes the same loss (no socket, no sandbox, no audit snapshots;
benchmarks/bare_loop.py). Bare in the sandbox: the same loop as the program of a sandbox
built like a training sandbox (what the sandbox's environment costs, without the harness).
Harness: the full path (bubblewrap, feeder over the Unix socket, per-position losses, eval
sandbox). Per-step time is measured on every side over the same steps, skipping the first
few (warm-up); start-up is reported separately as fixed seconds. The runs alternate
`--repeats` times and the median ratio is the figure (single pairs vary by +-3% here).

    python benchmarks/harness_overhead.py [--bundle examples/baseline] [--steps 60] [--repeats 5]
    python benchmarks/harness_overhead.py --smoke [--data DIR]   # 8 steps of 16x32, one pair

Both sides must train the same steps on the same rows (the harness serves the budget in its
stream order; the bare loop reads the same rows in that order), or the script stops.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from bare_loop import WARMUP, in_sandbox, per_step, run

from prism_challenge.config import Settings
from prism_challenge.data import TokenStream, prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner
from prism_challenge.sandbox.stream_order import LaneOrder

# a smoke's held-out evaluation: the smallest the eval sandbox takes (it is not measured)
SMOKE_SCORING = {"heldout_positions": 256, "heldout_cuts_per_row": 4}


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


def eval_profile(run_dir: Path) -> str:
    """The eval sandbox's own account of its time by kind of work (step_clock.WorkClock),
    read from the run's eval scratch folder: seconds, and how many times each was done."""
    try:
        got = json.loads((run_dir / "eval_scratch" / "eval_profile.json").read_text())
    except (OSError, ValueError):
        return "eval sandbox time: not written"
    parts = ", ".join(f"{k} {v:.3f}" + (f" x{got['counts'][k]}" if got["counts"][k] > 1 else "")
                      for k, v in got["seconds"].items())
    return f"eval sandbox time (s): {parts}; sum {sum(got['seconds'].values()):.3f}"


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
    ratios, bares, harnesses, boxed = [], [], [], []
    for i in range(args.repeats):
        bare_step, bare_steps, bare_profile = _bare(args, settings, train_stream, budget_rows)
        boxed_step, boxed_steps, _ = in_sandbox(runner, args.bundle, work / f"bare{i}")
        record = runner.run(files, hashlib.sha256(files["training.py"]).hexdigest(),
                            work / f"run{i}")
        if record.exit_reason != "ok" or record.summary.count < WARMUP + 2:
            sys.exit(f"harness run failed: {record.exit_reason} {record.exit_detail}")
        if not record.summary.count == bare_steps == boxed_steps or \
                record.consumed.rows != budget_rows:
            sys.exit(f"the sides differ: harness {record.summary.count} steps of "
                     f"{record.consumed.rows} rows, bare {bare_steps} steps of {budget_rows}")
        harness_step = per_step(record.columns.t.tolist())
        bares.append(bare_step)
        harnesses.append(harness_step)
        boxed.append(boxed_step)
        ratios.append(harness_step / bare_step)
        print(f"repeat {i}: bare {bare_step * 1e3:7.2f} ms/step  bare in the sandbox "
              f"{boxed_step * 1e3:7.2f}  harness {harness_step * 1e3:7.2f} ms/step  ratio "
              f"{ratios[-1]:.3f}  start-up {record.startup_s:.2f} s  eval {record.eval_s:.2f} s")
        print(f"  {host_profile(work / f'run{i}')}")
        print(f"  {eval_profile(work / f'run{i}')}")
        print(f"  {host_profile(bare_profile, 'bare loop')}")
    print(f"bundle {args.bundle}  steps {record.summary.count}  batch {args.batch}x{args.seq_len}"
          f"  kept chance per position {record.keep_rate:.3g}")
    print(f"bare loop     : {statistics.median(bares) * 1e3:8.2f} ms/step (median)")
    in_box = statistics.median(harnesses) / statistics.median(boxed)
    print(f"bare, sandbox : {statistics.median(boxed) * 1e3:8.2f} ms/step (median): "
          f"harness/bare-in-sandbox = {in_box:.3f}")
    print(f"harness       : {statistics.median(harnesses) * 1e3:8.2f} ms/step (median)")
    print(f"fixed start-up: {record.startup_s:.2f} s to the first batch; eval sandbox "
          f"{record.eval_s:.2f} s")
    print(f"per-step ratio harness/bare = {statistics.median(ratios):.3f} median of "
          f"{len(ratios)} (min {min(ratios):.3f}, max {max(ratios):.3f}; target <= 1.05); "
          f"both sides {record.summary.count} steps")


def _bare(args, settings, train_stream, budget_rows, device="cpu") -> tuple[float, int, dict]:
    """(seconds per step after the warm-up, steps, host time per segment) of `train(ctx)`
    without the harness, in this process (torch's thread count is the benchmark's own)."""
    order = LaneOrder(budget_rows, settings.challenge.stream_lanes)
    return run(args.bundle, lambda first, n: train_stream.rows_at(args.seq_len,
                                                                  order.rows_at(first, n)),
               seed=settings.challenge.seed, threads=torch.get_num_threads(),
               vocab_size=train_stream.manifest.vocab_size, seq_len=args.seq_len,
               budget_rows=budget_rows, sep=train_stream.manifest.separator_id,
               param_cap=settings.challenge.param_cap, device=device)


if __name__ == "__main__":
    main()
