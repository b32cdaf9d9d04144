"""Where a sandboxed run's start-up goes, and what the harness's own launcher saves.

Two parts, each alternating its variants `--repeats` times (medians printed side by side;
the host's load is printed too, since every figure here is wall time on a shared host):

1. Pieces, each in its own real bubblewrap sandbox (same mounts and environment as a run):
   the sandbox alone (`/bin/true`), the interpreter (`python -c pass`), `import torch`, the
   train harness's imports after torch, and a trivial worker started by torchrun
   (`--standalone --nproc_per_node=1`, what every run paid before) against the same worker
   started by `launch --single` (what a one-rank run does now); then two ranks under
   torchrun (two fresh interpreters, each importing torch) against `launch --ranks 2` (one
   import, two forks: what a several-rank run does now). torchrun here is
   `python -m torch.distributed.run`, which also pays its interpreter's teardown.
2. Whole runs of the same bundle through the real runner (feeder, train sandbox, eval
   sandbox): as before (training under torchrun, the eval sandbox started once training
   ended), the direct start alone, and now (the direct start, the eval sandbox started with
   training: `sandbox/early_eval.py`). `startup` is the record's `startup_s` (train sandbox
   start to the harness's `ready`: interpreter, torch, launcher, model build), `eval` the
   record's `eval_s` (from the eval sandbox's start, or from the hand-over of its work when
   it started early, to its end), `whole run` the wall time of `Runner.run`. Under each
   "now" run, the harness's own phases: the interpreter's start, torch's import, the
   harness's imports, the hello, the miner's architecture imported and built, the model on
   its device (CUDA's context made there), and the feeder's `ready`.

    .venv/bin/python benchmarks/startup.py [--repeats 3] [--bundle tests/fixtures/sandbox/tiny]
    .venv/bin/python benchmarks/startup.py --smoke     # once; no cold torch import anywhere
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from prism_challenge.config import Settings
from prism_challenge.data import prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env
from prism_challenge.sandbox.runner import WORKER, Runner, launch_argv

PY = sys.executable
TORCHRUN = (PY, "-m", "torch.distributed.run", "--standalone")
NOOP = "prism_challenge.sandbox.harness.quick_exit"  # a module that does nothing when run
HARNESS = ("from prism_challenge.sandbox.harness import axes, context, loading, seeding, "
           "state_contract")
PIECES = {
    "sandbox alone (/bin/true)": ("/bin/true",),
    "interpreter (python -c pass)": (PY, "-c", "pass"),
    "interpreter + import torch": (PY, "-c", "import torch"),
    "+ the train harness's imports": (PY, "-c", f"import torch\n{HARNESS}"),
    "trivial worker under torchrun": (*TORCHRUN, "--nproc_per_node=1", "--no-python", PY,
                                      "-c", "import torch"),
    "trivial worker, launch --single": launch_argv(1, (PY, "-c", "import torch")),
    # two ranks: torchrun execs two fresh interpreters that import torch; the launcher
    # imports it once and forks both ranks (a rank that only has torch loaded does nothing)
    "2 trivial workers under torchrun": (*TORCHRUN, "--nproc_per_node=2", "--no-python", PY,
                                         "-c", "import torch"),
    "2 trivial workers, launch --ranks": launch_argv(2, (PY, "-m", NOOP)),
}


# the pieces a smoke runs: none imports torch in a cold interpreter
SMOKE_PIECES = ("sandbox alone (/bin/true)", "interpreter (python -c pass)",
                "2 trivial workers, launch --ranks")


class TorchrunStart(Runner):
    """The runner as before: one rank started under torchrun, the eval sandbox after."""

    early_eval = False

    def _train_spec(self, paths, name, deadline_s, prewarm=True):
        argv = (*TORCHRUN, "--nproc_per_node=1", "--no-python", PY, "-m", WORKER)
        return replace(super()._train_spec(paths, name, deadline_s, prewarm), argv=argv)


def _piece(argv: tuple[str, ...], scratch: Path) -> float:
    scratch.mkdir(parents=True, exist_ok=True)
    spec = SandboxSpec(argv=argv, mounts=(Mount(scratch, "/scratch", writable=True),),
                       env=minimal_env({"OMP_NUM_THREADS": "1"}), scratch=scratch,
                       limits=Limits(wall_s=300, memory_bytes=2**32, pids_max=64,
                                     disk_bytes=2**26, output_bytes=65536))
    t0 = time.monotonic()
    result = BubblewrapBackend().run(spec)
    if result.cause != "ok":
        sys.exit(f"{argv}: {result.cause} {result.output[-800:]}")
    return time.monotonic() - t0


def pieces(work: Path, repeats: int, smoke: bool = False) -> None:
    """Each piece in its own sandbox; the smoke keeps only those that import no torch
    cold (seconds each on a loaded host: what they measure is not what a smoke checks)."""
    chosen = {k: v for k, v in PIECES.items() if not smoke or k in SMOKE_PIECES}
    got: dict[str, list[float]] = {k: [] for k in chosen}
    for i in range(repeats):
        for n, (label, argv) in enumerate(chosen.items()):
            got[label].append(_piece(argv, work / f"piece{i}-{n}"))
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"pieces, median of {repeats} (wall s, each in its own bubblewrap sandbox):")
    for label, s in med.items():
        print(f"  {label:36s} {s:6.2f} s")
    if smoke:
        return
    torch_s = med["interpreter + import torch"] - med["interpreter (python -c pass)"]
    print(f"  -> import torch {torch_s:.2f} s; torchrun adds "
          f"{med['trivial worker under torchrun'] - med['interpreter + import torch']:+.2f} s "
          f"to one worker, launch --single "
          f"{med['trivial worker, launch --single'] - med['interpreter + import torch']:+.2f} s")
    print(f"  -> two ranks: torchrun {med['2 trivial workers under torchrun']:.2f} s, "
          f"launch --ranks {med['2 trivial workers, launch --ranks']:.2f} s")


class LateEval(Runner):
    """The direct start, with the eval sandbox started once training ended."""

    early_eval = False


def phases(run_dir: Path) -> str:
    """The train harness's own account of its start-up (harness/step_clock.py StartClock)."""
    try:
        got = json.loads((run_dir / "scratch" / "startup_rank0.json").read_text())
    except (OSError, ValueError):
        return "harness start-up phases: not written"
    return ("harness start-up phases (s): "
            + ", ".join(f"{k} {v:.2f}" for k, v in got.items())
            + f"; sum {sum(got.values()):.2f}")


def runs(work: Path, bundle: Path, repeats: int, smoke: bool = False
         ) -> dict[str, dict[str, float]]:
    """Whole runs of `bundle` through each runner; the smoke runs `now` only (the others
    start cold: torch imported in the sandbox, seconds on a loaded host)."""
    source = write_jsonl(work / "docs.jsonl", english_like_documents(400, seed=1))
    prepare_data(small_spec([source]), work / "data")
    settings = Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * 4, "deadline_s": 120.0},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0},
    )
    files = {n: (bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    digest = hashlib.sha256(b"".join(files.values())).hexdigest()
    runners = {
        "before": TorchrunStart.from_data(settings, make_backend("bubblewrap"), work / "data"),
        "single, eval after": LateEval.from_data(settings, make_backend("bubblewrap"),
                                                 work / "data"),
        "now": Runner.from_data(settings, make_backend("bubblewrap"), work / "data"),
    }
    if smoke:
        runners = {"now": runners["now"]}
    cols = ("startup", "train", "eval", "total")
    got: dict[str, dict[str, list[float]]] = {k: {c: [] for c in cols} for k in runners}
    for i in range(repeats):
        for label, runner in runners.items():
            t0 = time.monotonic()
            record = runner.run(files, digest, work / f"{label}{i}")
            total = time.monotonic() - t0
            if record.exit_reason != "ok":
                sys.exit(f"{label} run failed: {record.exit_reason} {record.exit_detail}")
            for c, v in zip(cols, (record.startup_s, record.train_s, record.eval_s, total),
                            strict=True):
                got[label][c].append(v)
            print(f"  repeat {i} {label:18s}: startup {record.startup_s:.2f} s, train "
                  f"{record.train_s:.2f} s, eval {record.eval_s:.2f} s, whole run {total:.2f} s")
            if label == "now":
                print(f"    {phases(work / f'{label}{i}')}")
    med = {k: {c: statistics.median(v) for c, v in d.items()} for k, d in got.items()}
    print(f"whole runs, median of {repeats}:      " + "  ".join(f"{c:>8s}" for c in cols))
    for label, m in med.items():
        print(f"  {label:31s}" + "  ".join(f"{m[c]:7.2f}s" for c in cols))
    return med


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("tests/fixtures/sandbox/tiny"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="one repeat; only the pieces and the run that import no torch cold")
    args = ap.parse_args()
    repeats = 1 if args.smoke else args.repeats
    work = Path(tempfile.mkdtemp(prefix="prism-startup-"))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pieces(work, repeats, args.smoke)
    med = runs(work, args.bundle, repeats, args.smoke)
    now = med["now"]
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.smoke:
        print(f"smoke: start-up now {now['startup']:.2f} s; whole run now {now['total']:.2f} s")
        return
    before = med["before"]
    print(f"median of {repeats}: start-up before {before['startup']:.2f} s, now "
          f"{now['startup']:.2f} s; whole run before {before['total']:.2f} s, now "
          f"{now['total']:.2f} s ({now['total'] - before['total']:+.2f} s)")


if __name__ == "__main__":
    main()
