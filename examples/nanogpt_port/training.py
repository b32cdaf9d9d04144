"""nanoGPT's train.py loop ported to PRISM (docs/porting.md).

Kept: configure_optimizers' decay / no-decay parameter groups, AdamW(betas 0.9, 0.95), the
warm-up + cosine `get_lr`, gradient accumulation, clipping at 1.0. Dropped, because the
harness owns them: the data loader (`get_batch`), the tokenizer, seeding, DDP wrapping,
`torch.compile` (ask `ctx.batches(..., compile=True)`), GradScaler / autocast setup
(`autocast_dtype=`), evaluation, checkpoints and wandb. max_iters comes from the token budget.
"""

import math

import torch

BATCH_SIZE = 8  # rows per micro-step
GRADIENT_ACCUMULATION_STEPS = 2
LEARNING_RATE = 3e-3
MIN_LR = 3e-4
WEIGHT_DECAY = 0.1
GRAD_CLIP = 1.0


def configure_optimizers(model, weight_decay, learning_rate):
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95))


def train(ctx):
    max_iters = max(1, ctx.token_budget // (BATCH_SIZE * GRADIENT_ACCUMULATION_STEPS
                                            * ctx.seq_len))
    warmup_iters = max(1, max_iters // 20)

    def get_lr(it):
        if it < warmup_iters:
            return LEARNING_RATE * (it + 1) / (warmup_iters + 1)
        ratio = min(1.0, (it - warmup_iters) / max(1, max_iters - warmup_iters))
        return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LEARNING_RATE - MIN_LR)

    optimizer = configure_optimizers(ctx.model, WEIGHT_DECAY, LEARNING_RATE)
    it = 0
    for micro_step, batch in enumerate(ctx.batches(BATCH_SIZE)):
        (batch.loss / GRADIENT_ACCUMULATION_STEPS).backward()
        if (micro_step + 1) % GRADIENT_ACCUMULATION_STEPS:
            continue
        lr = get_lr(it)
        for group in optimizer.param_groups:
            group["lr"] = lr
        torch.nn.utils.clip_grad_norm_(ctx.model.parameters(), GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if it % 10 == 0:
            ctx.log(loss=batch.loss.item(), lr=lr)
        it += 1
