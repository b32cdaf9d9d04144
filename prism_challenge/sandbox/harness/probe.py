"""The causality probe: changing tokens after position t must not change logits at <= t.

Run in both modes the model can be scored in (train mode with grad, eval mode without),
with the training batch shape and identical RNG for both forwards, so a model cannot tell
the probe from training and behave causally only when probed.
"""

from __future__ import annotations


def probe(model, inputs, positions: list[int], vocab_size: int, seed: int) -> dict:
    import torch

    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    devices = [inputs.device] if inputs.device.type == "cuda" else []
    for training in (True, False):
        model.train(training)
        for t in positions:
            changed = inputs.clone()
            tail = changed[:, t + 1:]
            tail.copy_(torch.randint(0, vocab_size, tail.shape, generator=gen).to(tail.device))
            outs = []
            for x in (inputs, changed):
                with torch.random.fork_rng(devices=devices), torch.set_grad_enabled(training):
                    torch.manual_seed(seed + t)
                    outs.append(model(x)[:, : t + 1].detach().float())
            diff = (outs[0] - outs[1]).abs().max().item()
            worst = max(worst, diff if diff == diff else float("inf"))
    model.train(True)
    return {"max_abs_diff": worst, "positions": list(positions)}
