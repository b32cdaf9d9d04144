"""Muon on the hidden weight matrices, AdamW on the rest (embeddings, norms, biases).

Muon orthogonalises each 2-D update (Newton-Schulz), so every direction of a matrix moves
at the same rate; it is defined for matrices only, hence AdamW for everything else. The
tied embedding/output matrix stays with AdamW, as in the Muon reference recipes. Muon
steps first, so the harness records it as this run's first optimiser. Same warm-up and
cosine decay as the baseline, for a one-axis contrast.
"""

import math

import torch

BATCH_SIZE = 16


def train(ctx):
    model = ctx.model
    embed = model.embed.weight
    hidden = [p for n, p in model.named_parameters() if p.ndim == 2 and p is not embed
              and n != "pos"]
    hidden_ids = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in hidden_ids]
    muon = torch.optim.Muon(hidden, lr=0.02, momentum=0.95, weight_decay=0.01,
                            adjust_lr_fn="match_rms_adamw")
    adamw = torch.optim.AdamW(rest, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    steps = max(1, ctx.token_budget // (BATCH_SIZE * ctx.seq_len))
    warmup = max(1, steps // 20)

    def lr_at(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    schedules = [torch.optim.lr_scheduler.LambdaLR(opt, lr_at) for opt in (muon, adamw)]
    for step, batch in enumerate(ctx.batches(BATCH_SIZE)):
        batch.loss.backward()
        for opt in (muon, adamw):
            opt.step()
            opt.zero_grad(set_to_none=True)
        for schedule in schedules:
            schedule.step()
        if step % 20 == 0:
            ctx.log(loss=batch.loss.item(), lr=schedules[0].get_last_lr()[0])
