"""An autoresearch-style single-file GPT, its model half (docs/porting.md).

The `train.py` of an autoresearch loop holds model, optimiser and loop in one file with the
hyper-parameters as constants at the top; the model half lands here: parameter-free RMSNorm
(as `nn.RMSNorm(elementwise_affine=False)` modules, so the measured census matches the declared
norm), rotary position embeddings, QK-norm, a ReLU² MLP, an untied head with a zero init and a
tanh logit soft-cap. What moved: sizes come from `ctx`, forward returns logits only.
"""

import torch
import torch.nn.functional as F
from torch import nn

N_LAYER = 2
N_EMBD = 128
N_HEAD = 4
SOFTCAP = 15.0
ROPE_BASE = 10000.0


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), dim=-1)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head_dim = N_EMBD // N_HEAD
        self.c_q = nn.Linear(N_EMBD, N_EMBD, bias=False)
        self.c_k = nn.Linear(N_EMBD, N_EMBD, bias=False)
        self.c_v = nn.Linear(N_EMBD, N_EMBD, bias=False)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD, bias=False)
        self.qk_norm = nn.RMSNorm(self.head_dim, elementwise_affine=False)
        nn.init.zeros_(self.c_proj.weight)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (lin(x).view(b, t, N_HEAD, self.head_dim).transpose(1, 2)
                   for lin in (self.c_q, self.c_k, self.c_v))
        q, k = rotary(self.qk_norm(q), cos, sin), rotary(self.qk_norm(k), cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, bias=False)
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, bias=False)
        nn.init.zeros_(self.c_proj.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.relu(self.c_fc(x)).square())


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(N_EMBD, elementwise_affine=False)
        self.attn = Attention()
        self.norm2 = nn.RMSNorm(N_EMBD, elementwise_affine=False)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, N_EMBD)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYER))
        self.norm_f = nn.RMSNorm(N_EMBD, elementwise_affine=False)
        self.lm_head = nn.Linear(N_EMBD, vocab_size, bias=False)
        nn.init.zeros_(self.lm_head.weight)
        half = N_EMBD // N_HEAD // 2
        inv_freq = ROPE_BASE ** (-torch.arange(half, dtype=torch.float32) / half)
        angles = torch.arange(seq_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm_f(x)).float()
        return SOFTCAP * torch.tanh(logits / SOFTCAP)


def build_model(ctx):
    return GPT(ctx.vocab_size, ctx.seq_len)
