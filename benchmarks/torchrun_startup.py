"""What starting every run under torchrun costs on a CPU host, next to a direct start.

Runs the same tiny bundle through the real runner (bubblewrap, feeder, eval sandbox) with
training started as `python -m torch.distributed.run --standalone --nproc_per_node=1 ...`
(what the validator does) and as `python -m ...train_main` (the old single-process start),
alternating `--repeats` times, and prints the median start-up (sandbox start to the
harness's `ready`) of each and their difference.

    python benchmarks/torchrun_startup.py [--repeats 5] [--bundle tests/fixtures/sandbox/tiny]
    python benchmarks/torchrun_startup.py --smoke [--data DIR]   # one pair, 3 steps each

Last line: `start-up median of N: torchrun X s, direct Y s, torchrun adds +Z s per run`.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from prism_challenge.config import Settings
from prism_challenge.data import prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner, train_argv

DIRECT = (sys.executable, "-m", "prism_challenge.sandbox.harness.train_main")


class DirectStart(Runner):
    """The runner, with training started without torchrun."""

    def _train_spec(self, paths, name, deadline_s):
        return replace(super()._train_spec(paths, name, deadline_s), argv=DIRECT)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("tests/fixtures/sandbox/tiny"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder; default: a small synthetic corpus built here")
    ap.add_argument("--smoke", action="store_true",
                    help="one pair of runs of 3 steps; fails unless both start and train")
    args = ap.parse_args()
    steps = 3 if args.smoke else 4  # 3 steps of 8: 24 rows let a step take 11
    if args.smoke:
        args.repeats = 1
    work = Path(tempfile.mkdtemp(prefix="prism-torchrun-"))
    data = args.data or work / "data"
    if args.data is None:
        source = write_jsonl(work / "docs.jsonl", english_like_documents(400, seed=1))
        prepare_data(small_spec([source]), data)
    settings = Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * steps, "deadline_s": 120.0},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0},
    )
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    digest = hashlib.sha256(b"".join(files.values())).hexdigest()
    runners = {
        "torchrun": Runner.from_data(settings, make_backend("bubblewrap"), data),
        "direct": DirectStart.from_data(settings, make_backend("bubblewrap"), data),
    }
    startup: dict[str, list[float]] = {k: [] for k in runners}
    for i in range(args.repeats):
        for label, runner in runners.items():
            record = runner.run(files, digest, work / f"{label}{i}")
            if record.exit_reason != "ok" or record.summary.count != steps:
                sys.exit(f"{label} run failed: {record.exit_reason} after "
                         f"{record.summary.count} of {steps} steps {record.exit_detail}")
            if not 0 < record.startup_s < settings.challenge.deadline_s:
                sys.exit(f"{label} run: start-up {record.startup_s} s is not a duration")
            startup[label].append(record.startup_s)
            print(f"repeat {i} {label:8s}: start-up {record.startup_s:.2f} s  train "
                  f"{record.train_s:.2f} s")
    torchrun, direct = (statistics.median(startup[k]) for k in ("torchrun", "direct"))
    print(f"torchrun argv: python {' '.join(train_argv(1)[1:])}")
    print(f"start-up median of {args.repeats}: torchrun {torchrun:.2f} s, direct {direct:.2f} s, "
          f"torchrun adds {torchrun - direct:+.2f} s per run")


if __name__ == "__main__":
    main()
