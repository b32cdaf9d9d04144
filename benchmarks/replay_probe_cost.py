"""What a replay's probes cost per training step, the two ways a round can run, side by side.

In one process, on the baseline model at the demo's shape (16 rows of 128, vocab 4096, one
thread): for each step a training step (scored forward, backward, AdamW), then the step's
kept positions (drawn as a run draws them, `sampling.kept_positions` at the keep rate)
probed with full-batch rounds (every row of the step in each round) and with compact rounds
(the cut rows only), interleaved so a busy machine slows all three alike.

    .venv/bin/python benchmarks/replay_probe_cost.py [--steps 40 --batch 16 --seq-len 128]
    .venv/bin/python benchmarks/replay_probe_cost.py --smoke   # 6 steps of 8x32, vocab 512

Stops with an error when the two kinds of round disagree (> 1e-5 nats) or the compact
rounds did not forward fewer rows.

Last line: `probe per step / training step: full batch X.XXx, compact Y.YYx`.
"""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--keep-rate", type=float, default=0.02)
    parser.add_argument("--bundle", type=Path, default=ROOT / "examples" / "baseline")
    parser.add_argument("--smoke", action="store_true", help="6 steps of 8x32, vocab 512")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.batch, args.seq_len, args.vocab, args.keep_rate = 6, 8, 32, 512, 0.05

    import torch

    from prism_challenge.sandbox.harness.lm_loss import token_nats
    from prism_challenge.sandbox.harness.loading import build_model, load_module
    from prism_challenge.sandbox.harness.replay_probe import ReplayProbe
    from prism_challenge.sandbox.sampling import kept_positions

    torch.set_num_threads(1)
    B, T, sep = args.batch, args.seq_len, 0
    model = build_model(load_module(args.bundle / "architecture.py", "architecture"),
                        vocab_size=args.vocab, seq_len=T, max_params=10**9, seed=1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    full, compact = (ReplayProbe(model, model, None, sep, T) for _ in range(2))
    full.full_batch = True
    secret, g = secrets.token_bytes(32), torch.Generator().manual_seed(0)
    spent = {"train": 0.0, "full": 0.0, "compact": 0.0}
    positions = 0
    worst = 0.0
    for step in range(args.steps):
        rows = torch.randint(1, args.vocab, (B, T + 1), generator=g)
        inputs, targets = rows[:, :-1].clone(), rows[:, 1:]
        r, p = kept_positions(secret, step * B, B, T, args.keep_rate)
        asked = {"rows": r.tolist(), "positions": p.tolist()}
        positions += len(r)
        answers = {}
        for name, probe in (("full", full), ("compact", compact)):
            if len(r):
                t0 = time.perf_counter()
                answers[name] = probe.losses(model, inputs, targets, asked, None)
                spent[name] += time.perf_counter() - t0
        if len(r):
            worst = max([worst] + [abs(a - b) for a, b in zip(answers["full"],
                                                               answers["compact"], strict=True)])
        t0 = time.perf_counter()
        model.train()
        loss = token_nats(model(inputs), targets, sep).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        spent["train"] += time.perf_counter() - t0
    print(f"{args.steps} steps of {B}x{T} ({args.bundle.name}, vocab {args.vocab}), "
          f"{positions} kept positions ({positions / args.steps:.1f} a step)")
    print(f"rows forwarded by the probes: full batch {full.rows_forwarded}, compact "
          f"{compact.rows_forwarded}; largest difference between the two {worst:.2e} nats")
    print(f"seconds: training {spent['train']:.2f}, full-batch probes {spent['full']:.2f}, "
          f"compact probes {spent['compact']:.2f}")
    if worst > 1e-5 or not compact.rows_forwarded < full.rows_forwarded:
        raise SystemExit(f"replay_probe_cost: compact and full-batch rounds disagree by "
                         f"{worst:.2e} nats or forwarded no fewer rows")
    print(f"probe per step / training step: full batch {spent['full'] / spent['train']:.2f}x, "
          f"compact {spent['compact'] / spent['train']:.2f}x")


if __name__ == "__main__":
    main()
