"""bf16 autocast, AdamW with a short warm-up, 16 rows a step: the GPU host benchmark's
large bundle (its bare loop runs the same autocast)."""

import torch


def train(ctx):
    batch_size = 16
    opt = torch.optim.AdamW(ctx.model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                            weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 50))
    for batch in ctx.batches(batch_size, autocast_dtype=torch.bfloat16):
        opt.zero_grad(set_to_none=True)
        batch.loss.backward()
        torch.nn.utils.clip_grad_norm_(ctx.model.parameters(), 1.0)
        opt.step()
        schedule.step()
