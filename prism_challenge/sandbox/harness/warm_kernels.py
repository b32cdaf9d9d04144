"""The GPU kernels nearly every language model's forward launches, run once on constant data
in a held-out task process while it waits for its task.

Each held-out task runs in a fresh process with a fresh CUDA context, and a fresh context
loads every kernel at its first launch and makes cuBLAS's handle at its first product: on an
H100 the baseline's first forward in such a process took 0.22 s (its compute: under a
millisecond), all of it on the eval's serial path. Task processes prepare ahead, several at
once, so what this loads there is off that path.

Harness code only, on constant inputs: no code of the miner's runs before the task (so
model code never runs in two processes at once), nothing random is drawn (the RNG streams
are untouched), and what it leaves in the caching allocator is constants.
"""

from __future__ import annotations

WIDTH = 256  # features: small, but past the sizes where cuBLAS picks special small kernels


def warm_kernels(device, autocast_dtype, seq_len: int, vocab_size: int) -> None:
    """One pass of products, norms, activations, attention, embedding, softmax and the
    harness's own logits picking, in float32 and under `autocast_dtype` (None: float32
    only), at `seq_len` positions; waits for the GPU."""
    import torch
    import torch.nn.functional as F

    T = max(2, min(seq_len, 256))  # the logits below stay small at any vocabulary
    rows = 1
    with torch.no_grad():
        for dtype in dict.fromkeys((None, autocast_dtype)):
            with torch.autocast(device_type=device.type, dtype=dtype,
                                enabled=dtype is not None):
                ids = torch.arange(rows * T, device=device).reshape(rows, T) % vocab_size
                table = torch.linspace(-1.0, 1.0, vocab_size * WIDTH,
                                       device=device).reshape(vocab_size, WIDTH)
                x = F.embedding(ids, table)
                w = torch.linspace(-0.1, 0.1, WIDTH * WIDTH, device=device).reshape(WIDTH,
                                                                                    WIDTH)
                h = F.layer_norm(F.linear(x, w), (WIDTH,))
                h = F.gelu(h) + F.silu(h) + torch.relu(h) + torch.tanh(h)
                q = h.reshape(rows, T, 4, WIDTH // 4).transpose(1, 2)
                att = F.scaled_dot_product_attention(q, q, q, is_causal=True)
                h = h + att.transpose(1, 2).reshape(rows, T, WIDTH)
                h = F.rms_norm(h, (WIDTH,)) if hasattr(F, "rms_norm") else h
                logits = F.linear(h, table)  # tied output: vocab-wide product
                F.log_softmax(logits.float(), dim=-1)
                picked = logits[torch.zeros(1, dtype=torch.long, device=device),
                                torch.zeros(1, dtype=torch.long, device=device)]
                picked.detach().float().cpu()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
