"""Import the miner's scripts from files, and build the model under the forced seed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace


class ContractError(RuntimeError):
    """The miner's code broke the contract of DESIGN §4 (the message says how)."""


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"{path.name}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_model(architecture: ModuleType, *, vocab_size: int, seq_len: int, max_params: int,
                seed: int):
    """`build_model(ctx)` on the CPU under the forced seed; checks type and parameter cap."""
    import torch

    from prism_challenge.sandbox.harness.seeding import seed_everything

    fn = getattr(architecture, "build_model", None)
    if not callable(fn):
        raise ContractError("architecture.py must define build_model(ctx)")
    seed_everything(seed)
    ctx = SimpleNamespace(vocab_size=vocab_size, seq_len=seq_len, max_params=max_params)
    with torch.device("cpu"):
        model = fn(ctx)
    if not isinstance(model, torch.nn.Module):
        raise ContractError(f"build_model returned {type(model).__name__}, not a torch.nn.Module")
    n = count_params(model)
    if n > max_params:
        raise ContractError(f"the model has {n} parameters, over the cap of {max_params}")
    return model


def count_params(model) -> int:
    seen: set[int] = set()
    total = 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total
