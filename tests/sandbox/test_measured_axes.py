"""Measured axes come from what the run did, in the real sandbox: a decoy optimiser stepped
first and an iterator asked for but never drawn from leave the record's axes unchanged."""

from __future__ import annotations

from sandbox_kit import BATCH, STEPS, bundle

DECOYS = b'''"""AdamW over every batch, behind a Muon-looking decoy and an unused bf16 iterator."""

import torch


class Muon(torch.optim.SGD):
    pass


def train(ctx):
    dummy = torch.zeros(3, requires_grad=True)
    decoy = Muon([dummy], lr=0.5)
    unused = ctx.batches(BATCH_ROWS, autocast_dtype=torch.bfloat16, compile=True)
    opt = torch.optim.AdamW(ctx.model.parameters(), lr=3e-3)
    for batch in ctx.batches(4):
        dummy.grad = torch.ones(3)
        decoy.step()
        opt.zero_grad()
        batch.loss.backward()
        opt.step()
    del unused
'''


def test_decoys_do_not_change_the_axes(run):
    files = bundle("tiny")
    files["training.py"] = DECOYS.replace(b"BATCH_ROWS", str(BATCH * 4).encode())
    record = run(files)
    assert record.exit_reason == "ok", record.exit_detail
    axes = record.axes
    assert [(o.cls, o.hparams["lr"], o.steps) for o in axes.optimizers] == [
        ("AdamW", 3e-3, 2 * STEPS)]
    assert axes.optimizers[0].moved == 2 * STEPS * axes.param_count
    assert axes.optimizers[0].update > 0  # how far its steps moved the weights, measured
    assert (axes.batch_size, axes.precision, axes.compile) == (4, "fp32", False)
