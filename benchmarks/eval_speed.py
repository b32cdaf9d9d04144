"""The held-out evaluation's speed: where a task process's time goes, and the eval sandbox
under each setting of `sandbox.eval_gpu_spares` / `sandbox.eval_gpu_warmup`, side by side.

Every held-out task is answered in a fresh process (docs/sandbox.md), and on a GPU each
makes its own CUDA context, whose first kernel launches are slow. Two measurements:

1. Fresh processes (on the CPU where there is no GPU): a process builds the bundle's model
   on the CPU, as the eval process does, then forks task-like children one after another;
   each makes its context, moves the model, runs `warm_kernels` (or not), then a first and a
   second forward of a held-out-shaped batch (32 x seq_len) and picks logits as the harness
   does. Medians over `--forks` children, warm-up off and on: `first forward` minus `second
   forward` is what a fresh context costs on the eval's serial path.
2. Whole evaluations: the bundle is trained once; its final weights are then evaluated
   again (`Runner.evaluate_weights`, one held-out round, the twin too) under each variant
   `SPARES:warm|cold`, printing the eval sandbox's wall time, its own account of it
   (`eval_profile.json`) and the held-out bpb, which must be identical across variants
   (a warm-up that changed a figure stops the script).

    python benchmarks/eval_speed.py --data prism-data/data [--bundle examples/baseline]
        [--seq-len 128] [--steps 40] [--variants "3:cold 3:warm 8:warm"] [--forks 6]
    python benchmarks/eval_speed.py --smoke   # the CPU path at the smallest size

Without a GPU the variants are the same evaluation (one task process prepares ahead, no
warm-up), so it evaluates once and says the GPU figures are unmeasured. Last line:
`eval_speed: <n> evaluation(s) on <device>, held-out figures identical`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_host import PARAM_CAP, _data, _usable_gpus, bench_settings
from harness_overhead import eval_profile

from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.heldout_round import HeldOutRound
from prism_challenge.sandbox.runner import HELDOUT_BATCH, Runner

PHASES = ("context", "model to device", "warm-up", "first forward", "second forward")


def _child_times(model, x, warm: bool, precision: str, vocab: int, kind: str) -> list[float]:
    """In a fresh fork: the seconds of each phase of PHASES, on device `kind`."""
    import torch

    from prism_challenge.sandbox.harness.warm_kernels import warm_kernels

    dtype = getattr(torch, precision) if precision != "fp32" else None
    marks = [time.perf_counter()]
    device = torch.device(kind)
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda _device: None)
    torch.empty(0, device=device)
    marks.append(time.perf_counter())
    model.to(device)
    sync(device)
    marks.append(time.perf_counter())
    if warm:
        warm_kernels(device, dtype, x.shape[1], vocab)
    marks.append(time.perf_counter())
    for _ in range(2):
        with torch.no_grad(), torch.autocast(kind, dtype=dtype, enabled=dtype is not None):
            logits = model(x.to(device))
        rows = torch.arange(x.shape[0], device=device)
        logits[rows, rows % x.shape[1]].float().cpu()
        marks.append(time.perf_counter())
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


def fresh_processes(args) -> None:
    """Run in a process of its own (started by `main`): it never starts CUDA itself, so its
    forks can, as the eval process's do."""
    import torch

    from prism_challenge.sandbox.harness.loading import build_model, load_module
    from prism_challenge.sandbox.harness.seeding import make_deterministic

    make_deterministic(1, 1)
    architecture = load_module(args.bundle / "architecture.py", "architecture")
    model = build_model(architecture, vocab_size=args.vocab, seq_len=args.seq_len,
                        max_params=PARAM_CAP, seed=1).eval()
    x = torch.arange(HELDOUT_BATCH * args.seq_len).reshape(HELDOUT_BATCH, args.seq_len)
    x = x % args.vocab
    for warm in (False, True):
        runs = []
        for _ in range(args.forks):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                code = 0
                try:
                    os.write(w, json.dumps(_child_times(model, x, warm, args.precision,
                                                        args.vocab, args.device)).encode())
                except BaseException as exc:  # noqa: BLE001 - reported by the parent
                    os.write(w, json.dumps(repr(exc)).encode())
                    code = 1
                os._exit(code)
            os.close(w)
            with os.fdopen(r, "rb") as pipe:
                got = json.loads(pipe.read() or b'"no answer"')
            os.waitpid(pid, 0)
            if not isinstance(got, list):
                sys.exit(f"a fresh process failed: {got}")
            runs.append(got)
        medians = [statistics.median(run[i] for run in runs) for i in range(len(PHASES))]
        cost = medians[3] - medians[4]
        print(f"fresh process on {args.device}, warm-up {'on ' if warm else 'off'} (median of "
              f"{len(runs)}): "
              + ", ".join(f"{name} {s * 1e3:.1f} ms"
                          for name, s in zip(PHASES, medians, strict=True))
              + f"; the first forward's extra {cost * 1e3:.1f} ms")


def _variants(text: str) -> list[tuple[int, bool]]:
    out = []
    for item in text.split():
        spares, _, mode = item.partition(":")
        if mode not in ("warm", "cold") or not spares.isdigit() or int(spares) < 1:
            sys.exit(f"eval_speed: bad variant {item!r}; write SPARES:warm or SPARES:cold, "
                     "e.g. 3:warm")
        out.append((int(spares), mode == "warm"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("examples/baseline"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16, help="the bundle's batch size")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder (e.g. prism-data/data); default: synthetic")
    ap.add_argument("--variants", default="3:cold 3:warm 8:warm",
                    help="SPARES:warm|cold, space-separated (GPU only)")
    ap.add_argument("--forks", type=int, default=6, help="fresh processes per warm-up mode")
    ap.add_argument("--smoke", action="store_true", help="8 steps of 16x32")
    ap.add_argument("--fresh-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--vocab", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fresh_child:
        fresh_processes(args)
        return
    if args.smoke:
        args.steps, args.batch, args.seq_len = 8, 16, 32
    variants = _variants(args.variants)
    gpus, why = _usable_gpus()
    budget_rows = args.steps * args.batch
    settings = bench_settings(args, budget_rows)
    work = Path(tempfile.mkdtemp(prefix="prism-eval-speed-"))
    data = _data(args, work, budget_rows)
    backend = make_backend("bubblewrap")
    runner = Runner.from_data(settings, backend, data)
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    record = runner.run(files, hashlib.sha256(b"".join(files.values())).hexdigest(),
                        work / "run")
    if record.exit_reason != "ok":
        sys.exit(f"eval_speed: the training run failed: {record.exit_reason} "
                 f"{record.exit_detail[:500]}")
    precision = record.axes.precision if record.axes else "fp32"
    device = f"{len(gpus)} GPU(s)" if gpus else "this CPU"
    print(f"bundle {args.bundle}, {args.steps} steps of {args.batch}x{args.seq_len} on "
          f"{device}; the run's eval sandbox {record.eval_s:.2f} s")
    if not gpus:
        print(f"eval_speed: {why}; GPU figures (fresh processes, spares, warm-up) unmeasured;"
              " the fresh processes below run on this CPU")
        variants = variants[:1]
    fresh = subprocess.run([sys.executable, __file__, "--fresh-child", "--bundle",
                            str(args.bundle), "--seq-len", str(args.seq_len), "--vocab",
                            str(runner.vocab_size), "--precision", precision, "--forks",
                            str(args.forks), "--device", "cuda" if gpus else "cpu"],
                           capture_output=True, text=True, timeout=600)
    print(fresh.stdout, end="")
    if fresh.returncode != 0:
        sys.exit(f"eval_speed: the fresh processes failed: {fresh.stderr[-1500:]}")
    weights = work / "run" / "eval_inputs" / "final.pt"
    rounds = [HeldOutRound("bench", b"\x01" * 32)]
    figures = set()
    for spares, warm in variants:
        sandbox = settings.sandbox.model_copy(update={"eval_gpu_spares": spares,
                                                      "eval_gpu_warmup": warm})
        on = Runner.from_data(settings.model_copy(update={"sandbox": sandbox}), backend, data)
        folder = work / f"eval-{spares}-{'warm' if warm else 'cold'}"
        start = time.monotonic()
        (result,) = on.evaluate_weights(files, weights, folder, rounds, precision)
        wall = time.monotonic() - start
        if result.exit_reason != "ok":
            sys.exit(f"eval_speed: the evaluation failed: {result.exit_reason} {result.detail}")
        figures.add((result.val_bpb_trained, result.val_bpb_twin))
        label = f"spares {spares}, warm-up {'on ' if warm else 'off'}" if gpus else "cpu"
        print(f"{label}: eval wall {wall:.2f} s, held-out bpb {result.val_bpb_trained:.6f} "
              f"(twin {result.val_bpb_twin:.6f}); {eval_profile(folder)}")
    if len(figures) != 1:
        sys.exit(f"eval_speed: the variants' held-out figures differ: {sorted(figures)}")
    print(f"eval_speed: {len(variants)} evaluation(s) on {device}, held-out figures identical")


if __name__ == "__main__":
    main()
