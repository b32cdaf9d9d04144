"""The causality probe: the logits of a row at positions <= t must depend on nothing but
that row's tokens up to t (not on later tokens, not on the other rows of the batch).

It is a cheap screen, not the proof: a model that recognises the probe can pass it. What
no model can pass by recognising anything is the target-absent held-out score and the
contender replay (docs/security.md); this probe only turns away careless leaks early.
Run in both modes the model can be scored in, with identical RNG for each pair of forwards.
"""

from __future__ import annotations


def probe(model, inputs, positions: list[int], vocab_size: int, seed: int) -> dict:
    import torch

    from prism_challenge.sandbox.harness.lm_loss import check_logits

    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    devices = [inputs.device] if inputs.device.type == "cuda" else []

    def diff(a, b, where) -> float:
        outs = []
        for x in (a, b):
            with torch.random.fork_rng(devices=devices), torch.set_grad_enabled(model.training):
                torch.manual_seed(seed)
                logits = model(x)
                check_logits(logits, *x.shape, vocab_size)
                outs.append(where(logits.detach().float()))
        d = (outs[0] - outs[1]).abs().max().item()
        return d if d == d else float("inf")

    for training in (True, False):
        model.train(training)
        for t in positions:
            changed = inputs.clone()
            tail = changed[:, t + 1:]
            tail.copy_(torch.randint(0, vocab_size, tail.shape, generator=gen).to(tail.device))
            worst = max(worst, diff(inputs, changed, lambda y, t=t: y[:, : t + 1]))
        if inputs.shape[0] > 1:  # no row may see the others: row 0 against the rest, and back
            others = inputs.clone()
            others[1:] = torch.randint(0, vocab_size, others[1:].shape, generator=gen
                                       ).to(others.device)
            worst = max(worst, diff(inputs, others, lambda y: y[:1]))
            first = inputs.clone()
            first[:1] = torch.randint(0, vocab_size, first[:1].shape, generator=gen
                                      ).to(first.device)
            worst = max(worst, diff(inputs, first, lambda y: y[1:]))
    model.train(True)
    return {"max_abs_diff": worst, "positions": list(positions)}
