"""The miner's training time starts with torch's lazy imports done: torch.optim's first
optimizer imports torch._dynamo (seconds of CPU, triton too on GPU builds), and the harness
has imported it before its hello, whether the sandbox started prewarmed or cold, so no run
pays it inside its deadline and a failure to import it is the environment's."""

from __future__ import annotations

from sandbox_kit import bundle, digest_of, tiny_settings

TRAINING = b'''
import sys

import torch


def train(ctx):
    if "torch._dynamo" not in sys.modules:
        raise RuntimeError("torch._dynamo was not imported before train(ctx)")
    opt = torch.optim.SGD(ctx.model.parameters(), lr=0.1)
    for batch in ctx.batches(4):
        opt.zero_grad()
        batch.loss.backward()
        opt.step()
'''


def test_train_starts_with_the_optimizers_import_done(prepared_data, tmp_path):
    """A cold start (a fresh interpreter: what a GPU build's sandbox has too, where the
    prewarmed interpreter does not preload it); a prewarmed one on a CPU build is
    tests/isolation/test_prewarm.py's."""
    from prism_challenge.isolation.bubblewrap import BubblewrapBackend
    from prism_challenge.sandbox.runner import Runner

    files = {**bundle("tiny"), "training.py": TRAINING}
    runner = Runner.from_data(tiny_settings(), BubblewrapBackend(prewarm=False), prepared_data)
    record = runner.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason == "ok", record.exit_detail
    assert record.stack.start == "cold" and record.summary.count > 0
