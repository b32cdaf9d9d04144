"""On a real GPU, the optimiser watch never makes the host wait for the device during
training: its sums stay on the GPU until `optimizers()` reads them once."""

from __future__ import annotations

import pytest
import torch

from prism_challenge.sandbox.harness.axes import ALWAYS, EVERY, OptimizerWatch


def test_the_optimiser_watch_steps_without_a_device_sync():
    steps = ALWAYS + 2 * EVERY
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 64)).cuda()
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=True)
    grads = [torch.ones_like(p) for p in model.parameters()]
    torch.cuda.synchronize()
    with OptimizerWatch(model) as watch:
        torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
        try:
            for _ in range(steps):
                for p, g in zip(model.parameters(), grads, strict=True):
                    p.grad = g
                opt.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    (entry,) = watch.optimizers()
    assert entry["steps"] == steps and entry["moved"] == steps * n
    assert entry["update"] == pytest.approx(steps * n * 0.1, rel=1e-4)
