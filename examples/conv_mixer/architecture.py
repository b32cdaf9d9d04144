"""Conv mixer: gated, dilated causal depthwise convolutions instead of attention.

Causality comes from left padding only: a kernel of size k with dilation d is padded by
(k - 1) * d zeros in front, so position t mixes tokens t - (k - 1) * d .. t and never t + 1.
Dilations double per block, so four blocks of kernel 4 see the last 46 tokens. There is no
position embedding: the convolution's kernel already knows the order. RMSNorm, pre-norm.
"""

import torch
import torch.nn.functional as F
from torch import nn

DIM = 128
KERNEL = 4
DILATIONS = (1, 2, 4, 8)


class CausalDepthwiseConv(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.left = (KERNEL - 1) * dilation
        self.conv = nn.Conv1d(dim, dim, KERNEL, dilation=dilation, groups=dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, T, D]
        y = self.conv(F.pad(x.transpose(1, 2), (self.left, 0)))
        return y.transpose(1, 2)


class Block(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(dim)
        self.gate_in = nn.Linear(dim, 2 * dim)
        self.conv = CausalDepthwiseConv(dim, dilation)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.RMSNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u, gate = self.gate_in(self.norm1(x)).chunk(2, dim=-1)
        x = x + self.out(self.conv(u) * F.silu(gate))
        return x + self.mlp(self.norm2(x))


class ConvMixerLM(nn.Module):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, DIM)
        self.blocks = nn.ModuleList(Block(DIM, d) for d in DILATIONS)
        self.norm = nn.RMSNorm(DIM)
        self.head = nn.Linear(DIM, vocab_size, bias=False)
        self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build_model(ctx):
    return ConvMixerLM(ctx.vocab_size)
