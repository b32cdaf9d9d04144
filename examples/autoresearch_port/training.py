"""An autoresearch-style single-file train.py, its training half (docs/porting.md).

Kept: the hyper-parameters as constants, Muon on the hidden matrices with AdamW on the
embedding and head, a short warm-up, a constant phase and a linear warm-down over the last
WARMDOWN_RATIO of training. Changed: progress is the share of the token budget consumed, not
of a wall-clock TIME_BUDGET: a schedule that reads the clock makes a run that its replay
cannot reproduce. Dropped: the data loader, the tokenizer, the val_bpb evaluation (the
validator scores held-out bpb itself), seeding, `torch.compile` and the summary print.
"""

import torch

BATCH_SIZE = 16
MATRIX_LR = 0.02
EMBEDDING_LR = 6e-3
UNEMBEDDING_LR = 3e-3
WARMUP_RATIO = 0.05
WARMDOWN_RATIO = 0.5
FINAL_LR_FRAC = 0.1


def lr_multiplier(progress: float) -> float:
    if progress < WARMUP_RATIO:
        return (progress + 1e-3) / WARMUP_RATIO
    if progress < 1.0 - WARMDOWN_RATIO:
        return 1.0
    return FINAL_LR_FRAC + (1.0 - FINAL_LR_FRAC) * (1.0 - progress) / WARMDOWN_RATIO


def train(ctx):
    model = ctx.model
    embed, head = model.wte.weight, model.lm_head.weight
    matrices = [p for p in model.parameters() if p.ndim == 2 and p is not embed
                and p is not head]
    muon = torch.optim.Muon(matrices, lr=MATRIX_LR, momentum=0.95,
                            adjust_lr_fn="match_rms_adamw")
    adamw = torch.optim.AdamW([{"params": [embed], "lr": EMBEDDING_LR},
                               {"params": [head], "lr": UNEMBEDDING_LR}],
                              betas=(0.8, 0.95), weight_decay=0.0)
    optimizers = (muon, adamw)
    base = [[g["lr"] for g in opt.param_groups] for opt in optimizers]
    tokens_per_step = BATCH_SIZE * ctx.seq_len
    for step, batch in enumerate(ctx.batches(BATCH_SIZE)):
        progress = min(1.0, step * tokens_per_step / ctx.token_budget)
        scale = lr_multiplier(progress)
        for opt, lrs in zip(optimizers, base, strict=True):
            for group, lr in zip(opt.param_groups, lrs, strict=True):
                group["lr"] = lr * scale
        batch.loss.backward()
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        if step % 20 == 0:
            ctx.log(loss=batch.loss.item(), lr_scale=scale)
