"""Import the miner's scripts from files, and build the model under the forced seed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace


class ContractError(RuntimeError):
    """The miner's code broke the contract of docs/miners.md (the message says how)."""


# The eval answers each held-out task in a process forked from the one that built the model,
# and a CUDA context does not survive a fork: the build must leave CUDA unstarted.
CUDA_IN_BUILD = ("architecture.py used CUDA while its model was built: ask only "
                 "torch.cuda.is_available() or device_count() there, and anything else of "
                 "the GPU in forward (the harness moves the model to the GPU)")


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
        raise ContractError(f"build_model returned {type(model).__name__}, not a torch.nn.Module;"
                            " return the model itself (nothing wrapped around it)")
    n = count_state(model, vars(architecture))
    if n > max_params:
        raise ContractError(f"the model holds {n:,} tensor elements (parameters, buffers and "
                            f"other tensors), over the cap of {max_params:,}")
    return model


def count_params(model) -> int:
    """Elements of the model's parameters (shared ones once), through nn.Module's own code."""
    import torch

    seen: set[int] = set()
    total = 0
    for p in torch.nn.Module.parameters(model):
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def count_state(model, namespace: dict | None = None) -> int:
    """Elements of every tensor the model can hold knowledge in: parameters, buffers
    (persistent or not), tensors kept as plain attributes of its modules (or in a list,
    tuple or dict there), and tensors at module level of its source. Each storage counts
    once, whole: a view holds its whole storage."""
    import torch

    seen: set[int] = set()
    total = 0

    def add(value) -> None:
        nonlocal total
        values = value.values() if isinstance(value, dict) else (
            value if isinstance(value, list | tuple) else (value,))
        for t in values:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key = storage.data_ptr() or id(storage)
                if key not in seen:
                    seen.add(key)
                    total += storage.nbytes() // max(1, t.element_size())

    for module in torch.nn.Module.modules(model):
        for value in vars(module).values():
            add(value)  # _parameters and _buffers are dicts held in vars()
    for value in (namespace or {}).values():
        add(value)
    return total
