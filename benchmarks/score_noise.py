"""How much the ranked bpb moves with the held-out draw, and whether honest runs are penalised.

1. Every honest bundle (examples/* and tests/fixtures/honest/*) is trained once through the
   real runner (bubblewrap, feeder, one rank) on one prepared synthetic stream, under the
   local round (`LOCAL_ROUND`, what `prism eval` uses).
2. The baseline's final weights are then evaluated again under `--rounds` other rounds (the
   plans different rounds would draw: `round_of(master, k)`), with no retraining; each other
   bundle under `--draws` rounds. Each evaluation is scored with `score_record` on the run's
   own stream, so only the held-out plan changes.
3. Ranked bpb range = max - min of the baseline's ranked bpb over its rounds; the margin is
   `dethrone_margin` x the baseline's ranked bpb; an honest bundle is penalised when any of its
   draws has a gap penalty > 0 or a gap gate reason.

    .venv/bin/python benchmarks/score_noise.py            # demo-sized budget, 20 rounds
    .venv/bin/python benchmarks/score_noise.py --smoke    # one tiny budget, seconds per run

Last line: `score noise: ranked bpb range X over N draws, margin M, honest penalised K of H`.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLES = sorted(p for d in ("examples", "tests/fixtures/honest")
                 for p in (ROOT / d).iterdir() if (p / "training.py").exists())


def _files(path: Path) -> dict[str, bytes]:
    return {n: (path / n).read_bytes() for n in ("architecture.py", "training.py")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="baseline only, tiny budget, 3 rounds")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=144, help="budget steps of 16 rows")
    ap.add_argument("--only", nargs="*", default=None,
                    help="bundle names to run (default: every honest bundle)")
    args = ap.parse_args()
    if args.smoke:
        args.rounds, args.draws, args.seq_len, args.steps = 3, 2, 32, 12

    from prism_challenge.config import Settings
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.heldout_round import round_of
    from prism_challenge.sandbox.runner import Runner
    from prism_challenge.scoring import score_record

    work = Path(tempfile.mkdtemp(prefix="prism-score-noise-"))
    budget = args.seq_len * 16 * args.steps
    docs = max(850, math.ceil(850 * 1.6 * budget / 150_000))  # 850 docs: ~150k train tokens
    source = write_jsonl(work / "docs.jsonl", english_like_documents(docs, seed=0))
    prepare_data(small_spec([source]), work / "data")
    settings = Settings(
        challenge={"seq_len": args.seq_len, "token_budget": budget,
                   "deadline_s": 3600.0},
        sandbox={"cpu_threads": 1, "startup_grace_s": 120.0, "eval_time_s": 900.0},
        scoring={"heldout_positions": 384, "heldout_twin_positions": 96,
                 "heldout_cuts_per_row": 4} if args.smoke else {})
    runner = Runner.from_data(settings, make_backend("bubblewrap"), work / "data")
    master = hashlib.sha256(b"score_noise benchmark master").digest()
    bundles = [ROOT / "examples" / "baseline"] if args.smoke else BUNDLES
    if args.only:
        bundles = [b for b in bundles if b.name in args.only]
    baseline_bpbs: list[float] = []
    penalised: list[str] = []
    for path in bundles:
        files = _files(path)
        digest = hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
        t0 = time.monotonic()
        record = runner.run(files, digest, work / f"run-{path.name}")
        weights = work / f"run-{path.name}" / "eval_inputs" / "final.pt"
        precision = record.axes.precision if record.axes else "fp32"
        base = path.name == "baseline"
        rounds = args.rounds if base else args.draws
        scores = [score_record(record, settings.scoring)]
        for k in range(rounds):
            ev = runner.evaluate_weights(files, weights, work / f"eval-{path.name}-{k}",
                                         round_of(master, k), precision)
            scores.append(score_record(record.model_copy(update={"eval": ev}),
                                       settings.scoring))
        if base:
            baseline_bpbs = [s.bpb for s in scores]
        bad = [s for s in scores if s.penalty > 0 or any(r.startswith("gap") for r in s.reasons)]
        if bad:
            penalised.append(path.name)
        helds = [s.heldout_bpb for s in scores if s.heldout_bpb is not None]
        ses = [s.heldout_se for s in scores if s.heldout_se is not None]
        bounds = [s.gap_bound for s in scores if s.gap_bound is not None]
        print(f"{path.parent.name}/{path.name}: exit {record.exit_reason}, prequential "
              f"{scores[0].prequential_bpb:.4f}, held-out {min(helds):.4f}..{max(helds):.4f} "
              f"(SE {min(ses):.4f}..{max(ses):.4f}), gap {min(s.gap for s in scores):.4f}.."
              f"{max(s.gap for s in scores):.4f} (bound max {max(bounds):.4f}), penalised "
              f"{len(bad)} of {len(scores)} draws, {time.monotonic() - t0:.0f} s", flush=True)
    spread = max(baseline_bpbs) - min(baseline_bpbs)
    margin = settings.scoring.dethrone_margin * min(baseline_bpbs)
    print(f"score noise: ranked bpb range {spread:.6f} over {len(baseline_bpbs)} draws, margin "
          f"{margin:.4f}, honest penalised {len(penalised)} of {len(bundles)}"
          + (f" ({', '.join(penalised)})" if penalised else ""))


if __name__ == "__main__":
    sys.exit(main())
