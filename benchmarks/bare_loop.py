"""The bare loop: a bundle's `train(ctx)` without the harness, for the overhead benchmarks.

`BareContext` gives `train(ctx)` the budget's rows in the feeder's stream order (the same
rows in the same batches), the same loss, the autocast and compile the bundle asks for, under
the sandbox's deterministic flags (`run` sets them), so both sides run the same kernels. It
marks the harness's own step segments (`rows`, `prepare`, `forward`, `loss`, `miner`).

It runs in the benchmark's own process, or, as this file's program, inside a sandbox built
exactly like a training sandbox (`python -m bare_loop`, started as the harness is): the
three figures split what the harness costs from what the sandbox's environment costs. That
program imports only
torch, numpy and the harness's own modules, which every sandbox has; its rows come from
`/submission/rows.npy`, its settings from `/submission/bare.json`, and it writes
`/scratch/bare_result.json`.

Neither side waits for the GPU per step (the harness reads each step's losses two steps
late): the device is synchronised only where the measured stretch starts (after the warm-up)
and where it ends, so both sides time finished work.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from prism_challenge.sandbox.harness.lm_loss import token_nats
from prism_challenge.sandbox.harness.seeding import make_deterministic
from prism_challenge.sandbox.harness.step_clock import StepClock

WARMUP = 5


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BareContext:
    """The ctx contract without the harness; `rows_at(first, n)` gives int32[n, T + 1]."""

    def __init__(self, model, rows_at: Callable[[int, int], np.ndarray], *, vocab_size: int,
                 seq_len: int, budget_rows: int, sep: int, device="cpu"):
        self.model, self.rows_at, self.seq_len = model, rows_at, seq_len
        self.vocab_size = vocab_size
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
            block = self.rows_at(row, n)
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


def per_step(times: list[float]) -> float:
    t = times[WARMUP:]
    return (t[-1] - t[0]) / (len(t) - 1)


def run(bundle: Path, rows_at, *, seed: int, threads: int, vocab_size: int, seq_len: int,
        budget_rows: int, sep: int, param_cap: int, device) -> tuple[float, int, dict]:
    """(seconds per step after the warm-up, steps, host time per segment) of the bundle's
    `train(ctx)`, under the sandbox's seeds and deterministic flags."""
    make_deterministic(seed, threads)
    arch = load(bundle / "architecture.py", "bench_architecture")
    built = SimpleNamespace(vocab_size=vocab_size, seq_len=seq_len, max_params=param_cap)
    model = arch.build_model(built).to(device)
    bare = BareContext(model, rows_at, vocab_size=vocab_size, seq_len=seq_len,
                       budget_rows=budget_rows, sep=sep, device=device)
    load(bundle / "training.py", "bench_training").train(bare)
    return per_step(bare.times), len(bare.times) - 1, bare.clock.summary()


def in_sandbox(runner, bundle: Path, work: Path) -> tuple[float, int, dict]:
    """`run` as the program of a sandbox that `runner` would build for a training run (the
    same backend, environment, limits, GPUs and cores), on the same rows in the same order."""
    import shutil

    from prism_challenge.isolation.bubblewrap import HARNESS_ROOT
    from prism_challenge.isolation.spec import Mount, SandboxSpec

    c = runner.settings.challenge
    submission, scratch = work / "bare-submission", work / "bare-scratch"
    submission.mkdir(parents=True)
    scratch.mkdir()
    for name in ("architecture.py", "training.py"):
        shutil.copy(bundle / name, submission / name)
    shutil.copy(__file__, submission / "bare_loop.py")
    np.save(submission / "rows.npy",
            runner.train.rows_at(c.seq_len, runner.order.rows_at(0, runner.budget_rows)))
    (submission / "bare.json").write_text(json.dumps({
        "seed": c.seed, "threads": runner.settings.sandbox.cpu_threads,
        "vocab_size": runner.vocab_size, "seq_len": c.seq_len,
        "budget_rows": runner.budget_rows, "sep": runner.separator_id,
        "param_cap": c.param_cap}))
    # `python -m`, as the train harness starts: a fork of the prewarmed interpreter when the
    # backend prewarms, so both sides start alike
    spec = SandboxSpec(
        argv=(sys.executable, "-m", "bare_loop"),
        mounts=(Mount(submission, "/submission"), Mount(scratch, "/scratch", writable=True)),
        env=runner._env({"PYTHONPATH": f"/submission:{HARNESS_ROOT}"}),
        limits=runner._limits(1800.0), scratch=scratch,
        gpus=runner.devices(), cpus=() if runner.slot is None else runner.slot.cpus,
        name="bare-loop")
    result = runner.backend.run(spec)
    try:
        got = json.loads((scratch / "bare_result.json").read_text())
    except (OSError, ValueError):
        sys.exit(f"the bare loop in the sandbox failed ({result.cause}): {result.output[-1500:]}")
    return got["per_step"], got["steps"], got["profile"]


def main() -> None:
    """The program inside a sandbox: /submission holds the bundle, rows.npy and bare.json."""
    here = Path("/submission")
    conf = json.loads((here / "bare.json").read_text())
    rows = np.load(here / "rows.npy")
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    step, steps, profile = run(here, lambda first, n: rows[first:first + n], device=device,
                               **conf)
    Path("/scratch/bare_result.json").write_text(json.dumps(
        {"per_step": step, "steps": steps, "profile": profile, "device": device}))


if __name__ == "__main__":
    main()
