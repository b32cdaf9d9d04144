"""What the held-out evaluation costs: a short run of a bundle at the default held-out plan,
repeated, with the eval sandbox's own account of its time (step_clock.WorkClock).

    python benchmarks/eval_cost.py [--bundle examples/baseline] [--repeats 3]

Each line: the run's `eval_s`, the held-out bpb of the trained model and the twin (the same
in every repeat, or the evaluation is not a measurement), the seconds by kind of work and
the number of forwards. Training is kept short (20 steps of 16 rows): only the evaluation
is measured.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from pathlib import Path

from prism_challenge.config import Settings
from prism_challenge.data import prepare_data
from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
from prism_challenge.isolation import make_backend
from prism_challenge.sandbox.runner import Runner


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("examples/baseline"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="sandbox.cpu_threads")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="prism-eval-cost-"))
    source = write_jsonl(work / "docs.jsonl", english_like_documents(1500, seed=1))
    prepare_data(small_spec([source]), work / "data")
    seq = Settings().challenge.seq_len
    settings = Settings(challenge={"token_budget": 16 * 20 * seq, "deadline_s": 600.0},
                        sandbox={"cpu_threads": args.threads, "save_grace_s": 30.0})
    files = {n: (args.bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
    runner = Runner.from_data(settings, make_backend("bubblewrap"), work / "data")
    for i in range(args.repeats):
        r = runner.run(files, hashlib.sha256(files["training.py"]).hexdigest(), work / f"run{i}")
        if r.exit_reason != "ok" or r.eval is None:
            raise SystemExit(f"run {i} failed: {r.exit_reason} {r.exit_detail}")
        got = json.loads((work / f"run{i}" / "eval_scratch" / "eval_profile.json").read_text())
        parts = ", ".join(f"{k} {v:.2f}" for k, v in got["seconds"].items())
        print(f"run {i}: eval_s {r.eval_s:.2f}  held-out bpb {r.eval.val_bpb_trained:.6f}  "
              f"twin {r.eval.val_bpb_twin:.6f}  forwards {got['counts'].get('forward', 0)}  "
              f"({parts})")


if __name__ == "__main__":
    main()
