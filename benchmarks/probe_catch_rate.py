"""How often a contender replay catches a model that reads a few percent of its targets.

A stateless peeker (the `peek` attack fixture: an honest causal model that copies the next
input token at positions where (position + token) % EVERY == 0, in train mode with grad)
is run once per seed, then replayed several times, each replay drawing its own checks. A
replay "catches" it when its probes or snapshots find more disagreeing positions than the
verdict allows. An honest bundle is replayed the same way to count false alarms.

    .venv/bin/python benchmarks/probe_catch_rate.py [--seeds 4 --replays 5 --every 32 64]

Prints one line per peeking rate and one for the honest bundle.
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
    args = parser.parse_args()

    from fixture_bundles import bundle

    from prism_challenge.config import Settings
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.sandbox.backends import make_backend
    from prism_challenge.sandbox.runner import Runner
    from prism_challenge.scoring.verification import verdict

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
                scoring={"heldout_positions": 128, "heldout_twin_positions": 32},
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


if __name__ == "__main__":
    main()
