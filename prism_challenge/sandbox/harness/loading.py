"""Import the miner's scripts from files, and build the model under the forced seed."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace


class ContractError(RuntimeError):
    """The miner's code broke the contract of docs/miners.md (the message says how)."""


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ContractError(f"{path.name}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build_model(architecture: ModuleType, *, vocab_size: int, seq_len: int, max_params: int,
                seed: int, device: str = "cpu"):
    """`build_model(ctx)` on the CPU under the forced seed; checks type and parameter cap.
    `device="meta"` builds the same structure without computing any value (the eval
    sandbox then fills every tensor from an earlier CPU build: eval_main._Models), and
    skips the initialisers (`_no_values`)."""
    import torch

    from prism_challenge.sandbox.harness.seeding import seed_everything

    fn = getattr(architecture, "build_model", None)
    if not callable(fn):
        raise ContractError("architecture.py must define build_model(ctx)")
    seed_everything(seed)
    ctx = SimpleNamespace(vocab_size=vocab_size, seq_len=seq_len, max_params=max_params)
    with torch.device(device), _no_values() if device == "meta" else contextlib.nullcontext():
        model = fn(ctx)
    if not isinstance(model, torch.nn.Module):
        raise ContractError(f"build_model returned {type(model).__name__}, not a torch.nn.Module;"
                            " return the model itself (nothing wrapped around it)")
    n = count_state(model, vars(architecture))
    if n > max_params:
        raise ContractError(f"the model holds {n:,} tensor elements (parameters, buffers and "
                            f"other tensors), over the cap of {max_params:,}")
    return model


# in-place ops that change a tensor's shape, storage or flags, not only its values
_SHAPING = frozenset({"resize_", "resize_as_", "set_", "as_strided_", "squeeze_", "unsqueeze_",
                      "transpose_", "t_", "swapdims_", "swapaxes_", "requires_grad_",
                      "share_memory_", "detach_", "rename_", "refine_names_"})


def _no_values():
    """A torch function mode in which an in-place op that only writes values (an
    initialiser: `nn.init.normal_`, `Tensor.uniform_`, `fill_`, `mul_`, ...) on a meta tensor
    returns that tensor untouched. On the meta device there are no values to write, but
    torch still runs some of these through Python decompositions: `normal_` costs about
    1 ms a call and, the first time, an import of torch._dynamo (about 2 s of CPU where it
    is not loaded yet). The structure the build makes (modules, shapes, dtypes, flags) is
    unchanged."""
    import torch

    class NoValues(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            first = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if (name.endswith("_") and not name.endswith("__") and name not in _SHAPING
                    and isinstance(first, torch.Tensor) and first.is_meta):
                return first
            return func(*args, **kwargs)

    return NoValues()


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
