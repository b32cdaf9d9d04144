"""A ~100M-parameter GPT for the GPU host benchmark: 12 layers of width 768, 12 heads, no
biases, tied embeddings, fused causal attention (torch's scaled_dot_product_attention)."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class Layer(nn.Module):
    def __init__(self, width: int, heads: int, depth: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(width, bias=False)
        self.attn_in = nn.Linear(width, 3 * width, bias=False)
        self.attn_out = nn.Linear(width, width, bias=False)
        self.ff_norm = nn.LayerNorm(width, bias=False)
        self.ff_in = nn.Linear(width, 4 * width, bias=False)
        self.ff_out = nn.Linear(4 * width, width, bias=False)
        for out in (self.attn_out, self.ff_out):
            nn.init.normal_(out.weight, std=0.02 / math.sqrt(2 * depth))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        b, t, w = h.shape
        q, k, v = self.attn_in(self.attn_norm(h)).view(b, t, 3, self.heads, w // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.attn_out(a.transpose(1, 2).reshape(b, t, w))
        return h + self.ff_out(F.gelu(self.ff_in(self.ff_norm(h))))


class GPT(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int, width: int = 768, depth: int = 12,
                 heads: int = 12) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, width)
        self.positions = nn.Embedding(seq_len, width)
        self.layers = nn.ModuleList(Layer(width, heads, depth) for _ in range(depth))
        self.final_norm = nn.LayerNorm(width, bias=False)
        nn.init.normal_(self.tokens.weight, std=0.02)
        nn.init.normal_(self.positions.weight, std=0.01)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        h = self.tokens(input_ids) + self.positions(torch.arange(t, device=input_ids.device))
        for layer in self.layers:
            h = layer(h)
        return self.final_norm(h) @ self.tokens.weight.T


def build_model(ctx):
    return GPT(ctx.vocab_size, ctx.seq_len)
