"""A minimal stand-in for the harness's ctx (docs/miners.md), enough to run honest bundles.

The real harness (sandbox stage) feeds batches from a socket; here batches are random
tokens and the scored loss is computed the same way (before the batch is handed over).
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F


@dataclass
class Batch:
    inputs: torch.Tensor
    targets: torch.Tensor
    loss: torch.Tensor


@dataclass
class TinyCtx:
    vocab_size: int = 64
    seq_len: int = 16
    token_budget: int = 16 * 8 * 3
    max_params: int = 150_000_000
    device: str = "cpu"
    rank: int = 0
    world_size: int = 1
    model: torch.nn.Module | None = None
    logged: list[dict] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    exhausted: bool = False

    def time_left(self) -> float:
        return 60.0

    def log(self, **scalars) -> None:
        self.logged.append(scalars)

    def batches(self, batch_size, *, autocast_dtype=None, compile=False):
        gen = torch.Generator().manual_seed(0)
        consumed = 0
        while consumed < self.token_budget:
            rows = torch.randint(0, self.vocab_size, (batch_size, self.seq_len + 1), generator=gen)
            inputs, targets = rows[:, :-1], rows[:, 1:]
            with torch.autocast("cpu", dtype=autocast_dtype or torch.float32,
                                enabled=autocast_dtype is not None):
                logits = self.model(inputs)
            loss = F.cross_entropy(logits.float().reshape(-1, self.vocab_size), targets.reshape(-1))
            self.losses.append(loss.item())
            consumed += batch_size * self.seq_len
            yield Batch(inputs, targets, loss)
        self.exhausted = True


def load_script(path: Path, name: str):
    """Import one bundle script as a fresh module (what the harness does in its sandbox)."""
    spec = importlib.util.spec_from_file_location(f"{name}_{time.monotonic_ns()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
