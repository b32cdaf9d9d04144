"""What the policy learns from the installed torch: which names are modules, and which
attribute names belong to torch's own classes.

Static lookups cannot tell that `torch.nn.modules.loss.F` *is* `torch.nn.functional`, or
that `T` in `T = torch.Tensor; T.item = f` is a torch class. So the policy asks the real
objects: a dotted path rooted at an allowed module is resolved with getattr (public names
only, roots from the allow-list only) to see whether it is a module, and the callable
attributes of `torch.Tensor` and `torch.nn.Module` (plus the harness ctx's API) are names
no bundle may assign on anything but `self`. Both are pure functions of the pinned torch
version, memoised per process.
"""

from __future__ import annotations

import functools
import importlib
import inspect

from prism_challenge.gates.allowlist import modules

# The ctx API (docs/miners.md) a bundle may call but never replace.
CTX_API = frozenset({"batches", "log", "time_left", "model"})
_ROOTS = frozenset(m.split(".")[0] for m in modules())


@functools.lru_cache(maxsize=4096)
def is_module(path: str) -> bool:
    """Whether `path` (e.g. "torch.nn.modules.loss.F") names a module object."""
    parts = path.split(".")
    if parts[0] not in _ROOTS or any(p.startswith("_") for p in parts[1:]):
        return False
    try:
        obj = importlib.import_module(parts[0])
        for part in parts[1:]:
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - an unresolvable name is simply not a known module
        return False
    return inspect.ismodule(obj)


@functools.cache
def protected_names() -> frozenset[str]:
    """Callable public attributes of torch.Tensor and torch.nn.Module, and the ctx API."""
    import torch

    names = set(CTX_API)
    for cls in (torch.Tensor, torch.nn.Module):
        for name in dir(cls):
            if name.startswith("_"):
                continue
            value = inspect.getattr_static(cls, name)
            if callable(value) or isinstance(value, (staticmethod, classmethod)):
                names.add(name)
    return frozenset(names)
