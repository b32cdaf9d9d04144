"""How often a contender replay catches a model that reads a few percent of its targets.

A stateless peeker (the `peek` attack fixture: an honest causal model that copies the next
input token at positions where (position + token) % EVERY == 0, in train mode with grad)
is run once per seed, then replayed several times, each replay drawing its own checks. A
replay "catches" it when its probes or snapshots find more disagreeing positions than the
verdict allows. An honest bundle is replayed the same way to count false alarms.

    .venv/bin/python benchmarks/probe_catch_rate.py [--seeds 4 --replays 5 --every 32 64]

Prints one line per peeking rate and one for the honest bundle.

With `--schedule S` (uniform, bigstep, mixed; repeatable) it simulates production scale
instead (1B tokens at seq_len 1024, the project's own keep draw, chooser and verdict; see
`catch_sim.py`) and prints per schedule `peek 1.0% of tokens: replay passes X%` and the
honest false alarms. `--smoke` makes that small and quick (a check that it runs):

    .venv/bin/python benchmarks/probe_catch_rate.py --schedule uniform bigstep mixed
    .venv/bin/python benchmarks/probe_catch_rate.py --schedule mixed --smoke
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument("--every", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--schedule", nargs="+", choices=("uniform", "bigstep", "mixed"))
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=10**9)
    parser.add_argument("--peek", type=float, default=0.01)
    parser.add_argument("--honest-mismatch", type=float, default=0.0)
    parser.add_argument("--smoke", action="store_true", help="a small, quick simulation")
    args = parser.parse_args()
    if args.schedule:
        simulate(args)
        return

    from fixture_bundles import bundle

    from prism_challenge.config import Settings
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.runner import Runner
    from prism_challenge.verification.verdict import verdict

    work = Path(tempfile.mkdtemp(prefix="prism-catch-"))
    source = write_jsonl(work / "docs.jsonl", english_like_documents(2000, seed=5))
    prepare_data(small_spec([source]), work / "data")
    rows = args.steps * args.batch

    def caught_by_checks(replay, settings) -> bool:
        reasons = verdict(replay, settings.verification).reasons
        return any(r.startswith(("probe:", "snapshot:")) for r in reasons)

    cases = [(f"peek 1/{k} of positions", {"EVERY": str(k), "GUARD": "0"}) for k in args.every]
    cases.append(("honest (no peeking)", {"EVERY": "0"}))
    for label, subs in cases:
        caught = total = peeked = positions = 0
        for seed in range(args.seeds):
            settings = Settings(
                challenge={"seq_len": args.seq_len, "token_budget": rows * args.seq_len,
                           "deadline_s": 600.0, "seed": 1000 + seed},
                sandbox={"cpu_threads": 1, "save_grace_s": 10.0},
                scoring={"heldout_positions": 128},
            )
            runner = Runner.from_data(settings, make_backend("bubblewrap"), work / "data")
            files = bundle("peek", **subs)
            files["training.py"] = files["training.py"].replace(
                b"ctx.batches(8)", f"ctx.batches({args.batch})".encode())
            digest = hashlib.sha256(b"".join(files.values()) + bytes([seed])).hexdigest()
            record = runner.run(files, digest, work / "run")
            for r in range(args.replays):
                replay = runner.replay(files, record, work / f"replay{r}")
                total += 1
                caught += caught_by_checks(replay, settings)
                positions += replay.probes.compared + replay.snapshots.compared
                peeked += replay.probes.mismatched + replay.snapshots.mismatched
        print(f"{label:26s}: caught in {caught}/{total} replays ({caught / total:.1%}); "
              f"{positions / total:.0f} positions checked per replay, {peeked / total:.1f} "
              f"of them disagreeing")


def simulate(args) -> None:
    import numpy as np
    from catch_sim import schedule, trial

    from prism_challenge.config import Settings

    settings = Settings().verification
    tokens, trials, seq_len = args.tokens, args.trials, 1024
    one_rows, big_peeks = 200_000, 40
    if args.smoke:
        tokens, trials, one_rows, big_peeks = 2 * 10**7, 20, 4_000, 1
    total_rows = tokens // seq_len
    for name in args.schedule:
        rng = np.random.default_rng(7)
        sched = schedule(name, total_rows, args.peek, rng, one_rows, big_peeks)
        share = float(sched.rows[sched.peeked].sum()) / total_rows
        passes = false_alarms = checked = 0
        for _ in range(trials):
            peeker, honest, kept = trial(sched, seq_len, settings, rng, args.honest_mismatch,
                                         peek_nats=4.5)
            passes += peeker
            false_alarms += not honest
            checked += kept
        print(f"{name:8s} ({len(sched.rows)} steps, {total_rows * seq_len / 1e9:.2f}B tokens, "
              f"{trials} trials, ~{checked / trials:.0f} positions checked): peek "
              f"{share:.1%} of tokens: replay passes {passes / trials:.1%}; honest false "
              f"alarms {false_alarms}/{trials}")


if __name__ == "__main__":
    main()
