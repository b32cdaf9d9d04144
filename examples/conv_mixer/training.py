"""Baseline: AdamW with linear warm-up and cosine decay over the token budget."""

import math

import torch


def train(ctx):
    batch_size = 16
    steps = max(1, ctx.token_budget // (batch_size * ctx.seq_len))
    warmup = max(1, steps // 20)
    opt = torch.optim.AdamW(ctx.model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                            weight_decay=0.1)

    def lr_at(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    for step, batch in enumerate(ctx.batches(batch_size)):
        opt.zero_grad(set_to_none=True)
        batch.loss.backward()
        torch.nn.utils.clip_grad_norm_(ctx.model.parameters(), 1.0)
        opt.step()
        schedule.step()
        if step % 20 == 0:
            ctx.log(loss=batch.loss.item(), lr=schedule.get_last_lr()[0])
