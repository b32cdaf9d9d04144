"""Measured axes: what the harness observes about a submission, for the research registry.

Nothing here is taken from the miner's word: the module census and counts come from the
built model, optimiser classes and hyper-parameters from a global optimiser-step hook,
batch size / precision / compile from the miner's `ctx.batches(...)` calls.
"""

from __future__ import annotations

import collections
import numbers


def module_census(model) -> dict[str, int]:
    counts = collections.Counter(type(m).__name__ for m in model.modules())
    counts[type(model).__name__] -= 1
    return {k: v for k, v in sorted(counts.items()) if v > 0}


def layer_count(model) -> int:
    """Depth: the longest ModuleList/Sequential of parameterised blocks, else leaf layers."""
    import torch

    longest = 0
    for m in model.modules():
        if isinstance(m, torch.nn.ModuleList | torch.nn.Sequential):
            blocks = [c for c in m.children() if any(True for _ in c.parameters())]
            longest = max(longest, len(blocks))
    if longest:
        return longest
    return sum(
        1 for m in model.modules()
        if not any(True for _ in m.children()) and any(True for _ in m.parameters(recurse=False))
    )


def _plain(value):
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, tuple | list) and all(isinstance(v, numbers.Real) for v in value):
        return [float(v) for v in value]
    return None


class OptimizerWatch:
    """Records each optimiser's class and first-step hyper-parameters (lr: its peak)."""

    def __init__(self) -> None:
        self.seen: dict[int, dict] = {}
        self._handle = None

    def __enter__(self) -> OptimizerWatch:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._handle = register_optimizer_step_pre_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        if self._handle is not None:
            self._handle.remove()

    def _hook(self, optimizer, args, kwargs) -> None:
        group = optimizer.param_groups[0] if optimizer.param_groups else {}
        entry = self.seen.get(id(optimizer))
        if entry is None:
            if len(self.seen) >= 8:
                return
            hparams = {k: _plain(v) for k, v in sorted(group.items()) if k != "params"}
            self.seen[id(optimizer)] = {"cls": type(optimizer).__name__, "hparams": hparams}
        elif isinstance(group.get("lr"), float | int) and isinstance(entry["hparams"].get("lr"),
                                                                      float):
            # `lr` is the peak over the run: a warm-up schedule starts far below its real lr.
            entry["hparams"]["lr"] = max(entry["hparams"]["lr"], float(group["lr"]))

    def optimizers(self) -> list[dict]:
        return list(self.seen.values())
