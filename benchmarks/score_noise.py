"""How much the ranked bpb moves with the held-out draw, and whether honest runs are penalised.

1. Every honest bundle (examples/*, tests/fixtures/honest/* and the honest sandbox fixtures
   tiny, bigram, slow_learner, constant) is trained once through the real runner
   (bubblewrap, feeder, one rank) on one prepared synthetic stream (or `--data-root`), under
   the local round (`LOCAL_ROUND`, what `prism eval` uses); its final weights are kept.
2. The same final weights are evaluated under other rounds (the plans different rounds
   would draw: `round_of(master, k)`): `--rounds` of them for the baseline (the ranked-bpb
   range), `--other-rounds` for every other bundle (its gaps), answered in the run's own
   eval sandbox (one start-up per bundle), with no retraining (held-out evaluation is
   forward-only; the twin answers only the run's own round, the gap does not use it). Each
   evaluation is scored with `score_record` on the run's own stream, so only the held-out
   plan changes.
3. Per bundle: the gap's mean, its mean SE, its largest value and largest bound over the
   draws, and how many draws were penalised (penalty > 0 or a `gap:` reason). Ranked bpb
   range = the largest max - min of one bundle's ranked bpb over its draws; the margin is
   `dethrone_margin` x the smallest ranked bpb.

    .venv/bin/python benchmarks/score_noise.py                 # test budget; 20 / 3 rounds
    .venv/bin/python benchmarks/score_noise.py --demo          # the demo config's shape
    .venv/bin/python benchmarks/score_noise.py --config F --data-root D   # F's shape (GPU)
    .venv/bin/python benchmarks/score_noise.py --smoke         # baseline only, 3 rounds
    .venv/bin/python benchmarks/score_noise.py --rescore F ... # score saved draws again

`--demo` takes the shape (seq_len, token_budget, held-out positions and cuts) from
`Settings()`'s defaults, `--config F` takes F's whole settings (its sandbox section too: a
production file runs on its GPUs with its backend), scored under F's scoring section.

`--save F` keeps every record and evaluation (JSON) so thresholds can be re-derived without
re-running (`--rescore F ...` scores them, several files together, under the current
settings; `--only` picks bundles, in the order given). Last line:
`score noise: ranked bpb range X over N draws, margin M, honest penalised K of H`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
HONEST_FIXTURES = ("tiny", "bigram", "slow_learner", "constant")
BASELINE = "examples/baseline"


def honest_bundles() -> dict[str, dict[str, bytes]]:
    """name -> files of every honest bundle (attack fixtures are left out)."""
    from fixture_bundles import bundle

    out = {}
    for d in ("examples", "tests/fixtures/honest"):
        for p in sorted((ROOT / d).iterdir()):
            if (p / "training.py").exists():
                out[f"{p.parent.name}/{p.name}"] = {
                    n: (p / n).read_bytes() for n in ("architecture.py", "training.py")}
    for name in HONEST_FIXTURES:
        out[f"sandbox/{name}"] = bundle(name)
    return out


def runner_class():
    """A `Runner` whose run's own eval sandbox also answers the plans of `others` rounds
    (the trained model only: the gap needs no twin), so the final weights are measured
    under every round with no second eval sandbox to start; `other_evals` holds them."""
    from prism_challenge.sandbox.runner import Runner

    class AllRounds(Runner):
        others: list = []
        other_evals: list = []

        def _evaluate(self, paths, name, axes, secret, rounds, cancel, twin=True,
                      twin_rounds=None, early=None):
            own = len(rounds)
            evs, wall = super()._evaluate(paths, name, axes, secret, [*rounds, *self.others],
                                          cancel, twin, twin_rounds=own, early=early)
            self.other_evals = evs[own:]
            return evs[:own], wall

    return AllRounds


def bench_settings(args):
    """The settings every run of this benchmark uses: `--config`'s file as it is, or the
    script's shape (test budget, or `--demo`: `Settings()`'s) with a roomy deadline."""
    from prism_challenge.config import Settings, load_settings

    if args.config is not None:
        return load_settings(args.config)
    if args.demo:
        d = Settings()
        seq_len, budget = d.challenge.seq_len, d.challenge.token_budget
        positions, cuts = d.scoring.heldout_positions, d.scoring.heldout_cuts_per_row
    else:
        seq_len, budget = args.seq_len, args.seq_len * args.rows * args.steps
        positions, cuts = args.positions, args.cuts
    return Settings(
        challenge={"seq_len": seq_len, "token_budget": budget, "deadline_s": 3600.0},
        sandbox={"cpu_threads": 1, "startup_grace_s": 120.0, "eval_time_s": 3600.0,
                 "memory_bytes": 3 * 2**30},
        scoring={"heldout_positions": positions, "heldout_cuts_per_row": cuts})


def measure(args) -> list[dict]:
    """Train each bundle once, evaluate its final weights under every round; JSON-able."""
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.heldout_round import round_of

    work = Path(tempfile.mkdtemp(prefix="prism-score-noise-"))
    settings = bench_settings(args)
    budget = settings.challenge.token_budget
    data = args.data_root
    if data is None:
        docs = max(850, math.ceil(850 * 1.6 * budget / 150_000))  # 850 docs: ~150k tokens
        source = write_jsonl(work / "docs.jsonl", english_like_documents(docs, seed=0))
        prepare_data(small_spec([source]), work / "data")
        data = work / "data"
    master = hashlib.sha256(b"score_noise benchmark master").digest()
    bundles = honest_bundles()
    bundles = {BASELINE: bundles.pop(BASELINE), **bundles}  # the longest (most rounds) first
    if args.smoke:
        bundles = {BASELINE: bundles[BASELINE]}
    if args.only:
        bundles = {k: v for name in args.only for k, v in bundles.items()
                   if k.split("/")[-1] == name}  # in the order given

    done: list[dict] = []
    lock = threading.Lock()

    def one(name: str, files: dict[str, bytes]) -> dict:
        backend = make_backend(settings.sandbox.backend,
                               docker_image=settings.sandbox.docker_image)
        runner = runner_class().from_data(settings, backend, data)
        n = args.rounds if name == BASELINE else args.other_rounds
        runner.others = [round_of(master, k) for k in range(n)]
        t0 = time.monotonic()
        digest = hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
        record = runner.run(files, digest, work / f"run-{name.replace('/', '-')}")
        evals = runner.other_evals
        print(f"{name}: trained, then evaluated under 1 + {len(evals)} rounds in "
              f"{time.monotonic() - t0:.0f} s (train start-up {record.startup_s:.0f} s, train "
              f"{record.train_s:.0f} s, eval {record.eval_s:.0f} s)", flush=True)
        out = {"name": name, "record": record.to_wire(),
               "evals": [e.model_dump(mode="json") for e in evals]}
        with lock:  # saved as each bundle ends: a cut-short run keeps what it measured
            done.append(out)
            if args.save:
                args.save.write_text(json.dumps(done))
        return out

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            return list(pool.map(one, bundles, bundles.values()))
    finally:  # run folders hold every bundle's weights and data: hundreds of MB on --demo
        shutil.rmtree(work, ignore_errors=True)


def report(results: list[dict], settings) -> None:
    """The table of gaps per bundle and the last line, scored under `settings`."""
    from prism_challenge.sandbox.record import EvalResult, RunRecord
    from prism_challenge.scoring import score_record

    sc = settings.scoring
    print(f"thresholds: gap_penalty_start {sc.gap_penalty_start:g}, gap_zero {sc.gap_zero:g}, "
          f"gap_z {sc.gap_z:g}")
    print("| bundle | exit | prequential | held-out (SE) | gap mean | gap SE | gap max | "
          "bound max | penalised |")
    print("|---|---|---|---|---|---|---|---|---|")
    spread, low, penalised, draws, total = 0.0, math.inf, [], 0, 0
    upper = (-math.inf, "")  # the largest gap + gap_z * SE of any honest draw
    for r in results:
        record = RunRecord.model_validate(r["record"])
        scores = [score_record(record, sc)] + [
            score_record(record.model_copy(update={"eval": EvalResult.model_validate(e)}), sc)
            for e in r["evals"]]
        draws, total = max(draws, len(scores)), total + len(scores)
        gaps = [s.gap for s in scores if s.gap is not None]
        ses = [s.gap_se or 0.0 for s in scores if s.gap is not None]
        bounds = [s.gap_bound for s in scores if s.gap_bound is not None]
        helds = [s.heldout_bpb for s in scores if s.heldout_bpb is not None]
        for s in scores:
            if s.gap is not None:
                upper = max(upper, (s.gap + sc.gap_z * (s.gap_se or 0.0), r["name"]))
        bad = [s for s in scores if s.penalty > 0 or any(x.startswith("gap") for x in s.reasons)]
        if bad or not gaps:
            penalised.append(r["name"])
        bpbs = [s.bpb for s in scores]
        spread = max(spread, max(bpbs) - min(bpbs))
        low = min(low, min(bpbs))
        held_se = statistics.fmean(s.heldout_se or 0.0 for s in scores)
        held = f"{statistics.fmean(helds):.4f} ({held_se:.4f})" if helds else "-"
        gap_cols = (f"{statistics.fmean(gaps):.4f} | {statistics.fmean(ses):.4f} | "
                    f"{max(gaps):.4f} | {max(bounds):.4f}" if gaps else "- | - | - | -")
        print(f"| {r['name']} | {record.exit_reason} | {scores[0].prequential_bpb:.4f} | "
              f"{held} | {gap_cols} | {len(bad)} of {len(scores)} |", flush=True)
    margin = sc.dethrone_margin * low
    print(f"largest honest gap + {sc.gap_z:g} SE: {upper[0]:.4f} ({upper[1]}); "
          f"{total} draws in all")
    print(f"score noise: ranked bpb range {spread:.6f} over {draws} draws, margin "
          f"{margin:.4f}, honest penalised {len(penalised)} of {len(results)}"
          + (f" ({', '.join(penalised)})" if penalised else ""))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; `--smoke` sets 3 baseline rounds; negative round counts are refused."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="baseline only, 3 rounds")
    shape = ap.add_mutually_exclusive_group()
    shape.add_argument("--demo", action="store_true",
                       help="the demo config's shape: Settings() defaults (seq_len 128, "
                            "294,912 tokens, 1536 held-out positions, 8 cuts)")
    shape.add_argument("--config", type=Path, default=None,
                       help="a config YAML: its settings as they are (production: on a GPU "
                            "host, with --data-root)")
    ap.add_argument("--data-root", type=Path, default=None,
                    help="prepared data (default: a synthetic stream sized for the budget)")
    ap.add_argument("--rounds", type=int, default=20, help="other rounds for the baseline")
    ap.add_argument("--other-rounds", type=int, default=3,
                    help="other rounds for every other bundle")
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--rows", type=int, default=8, help="rows per budget step")
    ap.add_argument("--steps", type=int, default=12, help="budget steps")
    ap.add_argument("--positions", type=int, default=384, help="held-out positions")
    ap.add_argument("--cuts", type=int, default=4, help="held-out cuts per row")
    ap.add_argument("--jobs", type=int, default=2, help="bundles run side by side")
    ap.add_argument("--only", nargs="*", default=None,
                    help="bundle names, run in this order (default: all)")
    ap.add_argument("--save", type=Path, default=None, help="keep the draws in this JSON")
    ap.add_argument("--rescore", type=Path, nargs="+", default=None,
                    help="score saved JSONs again (their bundles together)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds = 3
    if min(args.rounds, args.other_rounds) < 0:
        ap.error("--rounds and --other-rounds count rounds: 0 or more")
    return args


def main() -> None:
    from prism_challenge.config import ConfigError

    args = parse()
    try:
        settings = bench_settings(args)
    except ConfigError as exc:
        sys.exit(f"score_noise: {exc} (pass a config YAML such as config.example.yaml)")
    c, sc = settings.challenge, settings.scoring
    print(f"shape: seq_len {c.seq_len}, token_budget {c.token_budget:,}, held-out "
          f"{sc.heldout_positions} positions, {sc.heldout_cuts_per_row} cuts a row"
          + ("" if args.rescore else f"; rounds: baseline {args.rounds}, others "
             f"{args.other_rounds}"), flush=True)

    from prism_challenge.config import Settings

    t0 = time.monotonic()
    if args.rescore:
        results = [r for f in args.rescore for r in json.loads(f.read_text())]
    else:
        results = measure(args)
        print(f"measured {len(results)} bundles in {time.monotonic() - t0:.0f} s")
    report(results, settings if args.config is not None else Settings())


if __name__ == "__main__":
    sys.exit(main())
