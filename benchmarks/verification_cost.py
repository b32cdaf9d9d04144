"""What verification costs, measured side by side in one run (CPU, bubblewrap).

For the baseline example: the original run's training and evaluation (target-absent
held-out + twin + causality screen), then a contender replay (training again with probes,
plus the snapshots' re-prediction in the eval sandbox). Verification cost as a multiple of
training: a non-contender pays (train + eval) / train, a contender also pays the replay.
Then the validator's peak resident memory while a run floods `ctx.log`, against a plain run.

    .venv/bin/python benchmarks/verification_cost.py [--steps 144 --batch 16 --seq-len 128]
        [--deadline-s 1200]
    .venv/bin/python benchmarks/verification_cost.py --smoke [--data DIR]  # 8 steps of 16x32

The replay of the honest run must pass and the flood must keep a bounded telemetry (the
script stops otherwise).

Start-up and evaluation are fixed costs, so the multiples fall as training grows: a real run
trains for many minutes, so `--steps 1200` is nearer what a validator pays than the default.

Last line: `verification cost: contender X.XXx, non-contender Y.YYx, peak memory Z.ZZx`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """Samples this process's resident memory every 20 ms while it is in use."""

    def __enter__(self) -> PeakRss:
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=144)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--bundle", type=Path, default=ROOT / "examples" / "baseline")
    parser.add_argument("--deadline-s", type=float, default=1200.0,
                        help="the run's deadline; raise it on a loaded machine")
    parser.add_argument("--data", type=Path, default=None,
                        help="a prepared data folder; default: a synthetic corpus built here")
    parser.add_argument("--smoke", action="store_true", help="8 steps of 16x32: same path")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batch, args.seq_len = 8, 16, 32

    from fixture_bundles import bundle

    from prism_challenge.config import Settings
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.runner import Runner
    from prism_challenge.scoring import score_record
    from prism_challenge.verification.verdict import verdict

    work = Path(tempfile.mkdtemp(prefix="prism-verify-cost-"))
    data = args.data or work / "data"
    if args.data is None:
        # ~27k tokens per 100 documents, 80% of them in the train split: room for the budget
        documents = max(4000, args.steps * args.batch * args.seq_len // 150)
        source = write_jsonl(work / "docs.jsonl", english_like_documents(documents, seed=3))
        prepare_data(small_spec([source]), data)
    rows = args.steps * args.batch
    settings = Settings(
        challenge={"seq_len": args.seq_len, "token_budget": rows * args.seq_len,
                   "deadline_s": args.deadline_s},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0},
        # a smoke's held-out evaluation: the smallest the eval sandbox takes
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4} if args.smoke else {},
    )
    runner = Runner.from_data(settings, make_backend("bubblewrap"), data)
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    digest = hashlib.sha256(b"".join(files.values())).hexdigest()

    with PeakRss() as plain_mem:
        t0 = time.monotonic()
        record = runner.run(files, digest, work / "run")
        run_wall = time.monotonic() - t0
    if record.exit_reason != "ok":
        sys.exit(f"the run failed: {record.exit_reason} {record.exit_detail}")
    score = score_record(record, settings.scoring)
    t0 = time.monotonic()
    replay = runner.replay(files, record, work / "replay")
    replay_wall = time.monotonic() - t0
    check = verdict(replay, settings.verification)

    flood = bundle("telemetry_flood")
    flood["training.py"] = flood["training.py"].replace(b"ctx.batches(8)",
                                                        f"ctx.batches({args.batch})".encode())
    flood["architecture.py"] = files["architecture.py"]
    with PeakRss() as flood_mem:
        flooded = runner.run(flood, "f" * 64, work / "flood")

    train = record.startup_s + record.train_s
    evaluate = record.eval_s
    non_contender = (train + evaluate) / train
    contender = (train + evaluate + replay.train_s + replay.eval_s) / train
    print(f"bundle {args.bundle.name}: {record.summary.count} steps of {args.batch}x"
          f"{args.seq_len}, bpb {score.bpb:.4f} (eligible {score.eligible}), replay "
          f"{'passed' if check.passed else 'FAILED: ' + '; '.join(check.reasons)}")
    print(f"training (start-up + steps): {train:8.2f} s")
    print(f"evaluation (held-out {record.eval.val_tokens} positions + twin + screen): "
          f"{evaluate:8.2f} s")
    print(f"replay training ({len(replay.probe_steps)} probed steps, last checked step "
          f"{replay.last_step}): {replay.train_s:8.2f} s")
    print(f"  of which probes (estimated): {replay.probe_s:8.2f} s "
          f"({replay.probes.compared} positions)")
    print(f"replay evaluation ({len(replay.snapshot_steps)} snapshots, "
          f"{replay.snapshots.compared} positions): {replay.eval_s:8.2f} s")
    print(f"wall: run {run_wall:.1f} s, replay {replay_wall:.1f} s")
    print(f"validator peak RSS: plain run {plain_mem.peak / 2**20:.0f} MB, telemetry flood "
          f"{flood_mem.peak / 2**20:.0f} MB ({len(flooded.telemetry)} points kept)")
    if not check.passed:
        sys.exit("verification_cost: the replay of the honest run failed")
    if flooded.exit_reason != "ok" or not flooded.telemetry:
        sys.exit(f"verification_cost: the flood run did not log: {flooded.exit_reason} "
                 f"{flooded.exit_detail[-300:]}")
    print(f"verification cost: contender {contender:.2f}x, non-contender {non_contender:.2f}x,"
          f" peak memory {flood_mem.peak / plain_mem.peak:.2f}x; replay passed")


if __name__ == "__main__":
    main()
