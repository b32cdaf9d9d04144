"""How much budget early stop saves, and whether it ever stops a future leader.

1. Records real per-batch loss curves: every bundle of examples/ and tests/fixtures/honest
   is run once through the real runner (bubblewrap, feeder, one rank) on the same prepared
   stream, with a short budget (`--steps` steps of 16 rows of `--seq-len` tokens). Curves are
   cached in `--curves` (JSON); `--record` re-records them.
2. The best recorded run is the leader. The challengers are the other recorded runs and
   perturbed copies of the curves (each per-batch loss rescaled, on the same text):
   near-ties (the leader with 1% noise), slower learners (time-stretched curves), know-nothing
   and collapsed models, runs that diverge (at 10% or 40%) or stall after 5% (the common
   failures of a learning rate too high or too low), and late droppers (flat for the first
   5-40% of the budget - a long warm-up - then dropping, some by just enough to take the
   lead; losses that start worse and end better, as schedule-free or curriculum training do;
   a model that grows mid-run).
3. Each challenger is replayed through the same checks the feeder runs
   (`early_stop.replay_curve`) under the configured checkpoints and `max_gain`, and is
   labelled a future leader when its full prequential bpb beats the leader by the dethrone
   margin.

Budget saved = rows never trained of all challengers / all challengers' budget rows.

    .venv/bin/python benchmarks/early_stop.py [--record] [--steps 120] [--seq-len 64]
    .venv/bin/python benchmarks/early_stop.py --smoke [--data DIR]  # baseline, 12 steps x32

The smoke records one curve (examples/baseline) afresh into a temporary file, and stops
with an error when early stop stops a future leader.

Last line: `early stop: budget saved XX.X%, future leaders stopped N`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LN2 = math.log(2.0)
BUNDLES = sorted(p for d in ("examples", "tests/fixtures/honest")
                 for p in (ROOT / d).iterdir() if (p / "training.py").exists())
BATCH_ROWS = 16


def record_curves(path: Path, steps: int, seq_len: int, bundles: list[Path] = BUNDLES,
                  data: Path | None = None) -> dict:
    """Run every bundle once in the sandbox; keep each batch's position, tokens, bytes and
    nats (what the feeder counted)."""
    from prism_challenge.config import Settings
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.runner import Runner

    work = Path(tempfile.mkdtemp(prefix="prism-early-stop-"))
    if data is None:
        source = write_jsonl(work / "docs.jsonl", english_like_documents(850, seed=0))
        data = work / "data"
        prepare_data(small_spec([source]), data)
    settings = Settings(
        challenge={"seq_len": seq_len, "token_budget": seq_len * BATCH_ROWS * steps,
                   "deadline_s": 600.0},
        sandbox={"cpu_threads": 1, "save_grace_s": 30.0, "eval_time_s": 300.0},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
    )
    runner = Runner.from_data(settings, make_backend("bubblewrap"), data)
    curves = {}
    for bundle in bundles:
        files = {n: (bundle / n).read_bytes() for n in ("architecture.py", "training.py")}
        t0 = time.monotonic()
        rec = runner.run(files, hashlib.sha256(b"".join(files.values())).hexdigest(),
                         work / bundle.name)
        name = f"{bundle.parent.name}/{bundle.name}"
        print(f"recorded {name:28s} {rec.exit_reason:5s} {rec.summary.count:4d} batches "
              f"{time.monotonic() - t0:6.1f} s", flush=True)
        if rec.exit_reason != "ok" or rec.consumed.rows != rec.budget.rows:
            print(f"  skipped: {rec.exit_detail[:200]}")
            continue
        c = rec.columns
        order = np.argsort(c.offset_row, kind="stable")
        curves[name] = np.stack([c.offset_row[order], c.rows[order], c.tokens[order],
                                 c.bytes[order], c.nats[order]], axis=1).tolist()
    data = {"vocab_size": runner.vocab_size, "budget_rows": runner.budget_rows,
            "budget_bytes": runner.budget.bytes, "seq_len": seq_len, "curves": curves}
    path.write_text(json.dumps(data))
    return data


class Curve:
    """Per-batch losses on the shared stream: arrays over batches in stream order."""

    def __init__(self, rows: list[list[float]]) -> None:
        a = np.asarray(rows, dtype=np.float64)
        self.offset, self.rows, self.tokens, self.bytes, self.nats = a.T
        self.mid = (self.offset + self.rows / 2)  # batch centre, in rows

    def per_token(self) -> np.ndarray:
        return self.nats / self.tokens

    def with_per_token(self, loss: np.ndarray) -> Curve:
        out = Curve([[0, 1, 1, 1, 0]])
        out.offset, out.rows, out.tokens, out.bytes = self.offset, self.rows, self.tokens, \
            self.bytes
        out.mid, out.nats = self.mid, np.maximum(loss, 0.0) * self.tokens
        return out

    def bpb(self, budget_bytes: int) -> float:
        return float(self.nats.sum() / LN2 / budget_bytes)

    def batches(self) -> list[tuple[int, int, float]]:
        return [(int(o), int(r), float(n)) for o, r, n in zip(self.offset, self.rows, self.nats,
                                                               strict=True)]


def on_grid(curve: Curve, grid: Curve) -> Curve:
    """`curve`'s per-token loss carried to `grid`'s batches (interpolated by position)."""
    return grid.with_per_token(np.interp(grid.mid, curve.mid, curve.per_token()))


def challengers(curves: dict[str, Curve], leader: str, uniform: float, budget_rows: int,
                target_bits: float, rng: np.random.Generator) -> dict[str, Curve]:
    """The recorded runs but the leader, and perturbed copies (nats on the same batches)."""
    lead = curves[leader]
    frac = lead.mid / budget_rows
    init = float(lead.per_token()[0])
    out: dict[str, Curve] = {n: c for n, c in curves.items() if n != leader}
    for i in range(3):
        noise = 1 + 0.01 * rng.standard_normal(len(frac))
        out[f"near-tie {i} (leader ±1%)"] = lead.with_per_token(lead.per_token() * noise)
    for name, c in curves.items():
        loss = c.per_token()
        for slow in (0.5, 0.25):  # learns at half / a quarter of the speed
            stretched = np.interp(c.mid * slow, c.mid, loss)
            out[f"{name} x{slow} speed"] = c.with_per_token(stretched)
        at = c.mid / budget_rows
        for where in (0.1, 0.4):  # the learning rate was too high: the loss blows up
            out[f"{name} diverges at {where:.0%}"] = c.with_per_token(
                np.where(at < where, loss, np.minimum(uniform * 1.2, loss + (at - where) * 20)))
        # the learning rate was too low, or the model is dead: stuck after its first 5%
        out[f"{name} stalls after 5%"] = c.with_per_token(
            np.where(at < 0.05, loss, np.interp(0.05 * budget_rows, c.mid, loss)))
    out["know-nothing (uniform)"] = lead.with_per_token(np.full(len(frac), uniform))
    out["collapsed (2x uniform)"] = lead.with_per_token(np.full(len(frac), 2 * uniform))
    # late droppers: the leader's curve, delayed by a flat warm-up, on a faster model
    for wait in (0.1, 0.2, 0.3, 0.4):
        for gain in (0.05, 0.15, 0.3):
            t = np.clip((frac - wait) / (1 - wait), 0, 1)
            shape = np.interp(t * budget_rows, lead.mid, lead.per_token()) * (1 - gain * t)
            out[f"warm-up {wait:.0%} then {gain:.0%} better"] = lead.with_per_token(
                np.where(frac < wait, init, shape))
    # late droppers that just take the lead: flat at the initial loss, then better than the
    # leader on every later byte by the least gain that ends 1% under the bar
    bar = 0.99 * target_bits
    for wait in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3):
        flat = frac < wait
        rest = float((lead.nats[~flat]).sum())
        gain = 1 - (bar - init * float(lead.tokens[flat].sum())) / rest
        if 0 < gain < 0.9:
            out[f"warm-up {wait:.0%}, then {gain:.0%} better (leads)"] = lead.with_per_token(
                np.where(flat, init, (1 - gain) * lead.per_token()))
    for start, end in ((1.10, 0.95), (1.20, 0.90), (1.30, 0.85), (1.05, 0.97), (1.5, 0.8)):
        factor = start + (end - start) * frac  # starts worse, ends better (schedule-free)
        out[f"starts {start - 1:+.0%} ends {end - 1:+.0%}"] = lead.with_per_token(
            lead.per_token() * factor)
    for grow in (0.3, 0.5, 0.7):  # a small model grown into a better one at `grow`
        factor = np.where(frac < grow, 1.15, 0.9)
        out[f"grown at {grow:.0%}"] = lead.with_per_token(lead.per_token() * factor)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--curves", type=Path, default=Path(tempfile.gettempdir())
                    / "prism-early-stop-curves.json")
    ap.add_argument("--record", action="store_true", help="re-record the curves")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--max-gain", type=float, default=None,
                    help="override scoring.early_stop.max_gain")
    ap.add_argument("--checkpoints", type=lambda s: [float(x) for x in s.split(",")],
                    default=None, help="override scoring.early_stop.checkpoints, e.g. 0.1,0.5")
    ap.add_argument("--data", type=Path, default=None,
                    help="a prepared data folder to record on; default: a corpus built here")
    ap.add_argument("--smoke", action="store_true",
                    help="record examples/baseline alone, 12 steps of 16x32, afresh")
    args = ap.parse_args()
    from prism_challenge.config import Settings
    from prism_challenge.sandbox.early_stop import (
        EarlyStopPlan,
        LeaderCurve,
        checkpoint_positions,
        replay_curve,
    )

    if args.smoke:
        curves_file = Path(tempfile.mkdtemp(prefix="prism-early-stop-")) / "curves.json"
        data = record_curves(curves_file, 12, 32, [ROOT / "examples" / "baseline"], args.data)
    elif args.record or not args.curves.exists():
        data = record_curves(args.curves, args.steps, args.seq_len, data=args.data)
    else:
        data = json.loads(args.curves.read_text())
    settings = Settings().scoring
    cfg = settings.early_stop
    max_gain = cfg.max_gain if args.max_gain is None else args.max_gain
    fractions = cfg.checkpoints if args.checkpoints is None else args.checkpoints
    rows, nbytes = data["budget_rows"], data["budget_bytes"]
    curves = {n: Curve(c) for n, c in data["curves"].items()}
    if not curves:
        sys.exit("no curve was recorded")
    grid = max(curves.values(), key=lambda c: len(c.offset))
    real = {n: on_grid(c, grid) if len(c.offset) != len(grid.offset) else c
            for n, c in curves.items()}
    leader = min(real, key=lambda n: real[n].bpb(nbytes))
    lead = curves[leader]
    leader_bpb = lead.bpb(nbytes)
    target = (1 - settings.dethrone_margin) * leader_bpb
    plan = EarlyStopPlan(
        target_bpb=target, leader=LeaderCurve.from_batches(lead.batches(), rows), leader_id=0,
        checkpoints=checkpoint_positions(fractions, rows), max_gain=max_gain,
        budget_bytes=nbytes, recent_rows=max(1, math.ceil(cfg.recent * rows)))
    uniform = math.log(data["vocab_size"])
    pool = challengers(real, leader, uniform, rows, target * nbytes * LN2,
                       np.random.default_rng(0))
    print(f"{len(curves)} recorded curves, {rows} budget rows of {data['seq_len']} tokens; "
          f"leader {leader} at {leader_bpb:.4f} bpb (uniform "
          f"{uniform / LN2 * grid.tokens.sum() / nbytes:.4f}); target {target:.4f}; "
          f"checkpoints {list(fractions)}; max_gain {max_gain}")
    print(f"{'challenger':44s} {'bpb/target':>10s} {'future leader':>13s} {'stopped at':>10s}"
          f" {'bound':>7s}")
    saved = wrong = winners = losers = 0
    for name, curve in pool.items():
        final = curve.bpb(nbytes)
        wins = final <= target
        decision = replay_curve(plan, curve.batches())
        stopped = decision is not None
        if stopped:
            saved += 1 - decision.position / rows
        wrong += stopped and wins
        winners += wins
        losers += not wins
        where = f"{decision.position / rows:.0%}" if stopped else "-"
        bound = f"{decision.bound_bpb:.4f}" if stopped else ""
        print(f"{name[:44]:44s} {final / target:10.3f} {'yes' if wins else 'no':>13s} "
              f"{where:>10s} {bound:>7s}")
    print(f"{len(pool)} challengers: {losers} lose, {winners} would take the lead")
    print(f"early stop: budget saved {100 * saved / len(pool):.1f}%, "
          f"future leaders stopped {wrong}")
    if args.smoke and (wrong or not losers or not saved):
        sys.exit(f"early_stop smoke: {wrong} future leaders stopped, {losers} losers, budget "
                 f"saved {saved:.2f} challengers' worth: early stop no longer does its job")


if __name__ == "__main__":
    main()
