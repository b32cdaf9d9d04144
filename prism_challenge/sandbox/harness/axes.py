"""Measured axes: what the harness observes about a submission, for the research registry.

Nothing here is taken from the miner's word, and nothing is recorded for what a run only
set up: the module census and counts come from the built model; precision and compile from
the iterator that produced each scored forward (`ForwardTally`, counted per scored row);
rows per step from the feeder's served batches (`step_rows`); optimisers from a global
optimiser-step hook that counts only steps able to move the model's own parameters (in a
group with a non-zero lr, holding a parameter with a gradient), ranked by the parameter
elements they moved. A decoy optimiser on a dummy tensor, or an iterator never drawn from,
changes nothing.
"""

from __future__ import annotations

import collections
import math
import numbers
import os


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


def step_rows(rows_per_step: list[int]) -> int | None:
    """Rows per step of a run: the row-weighted median of its scored steps' sizes, so a
    schedule of many one-row steps and a few big ones is placed where its tokens went."""
    if not rows_per_step:
        return None
    ordered = sorted(rows_per_step)
    half, acc = sum(ordered) / 2, 0
    for rows in ordered:
        acc += rows
        if acc >= half:
            return rows
    return ordered[-1]


class ForwardTally:
    """Scored rows per (precision, compiled) of the iterator that produced each forward."""

    def __init__(self) -> None:
        self.rows: collections.Counter = collections.Counter()

    def add(self, rows: int, precision: str, compiled: bool) -> None:
        self.rows[(precision, bool(compiled))] += rows

    def axes(self) -> dict:
        """The precision and compile that produced most scored rows (fp32 / False if none)."""
        by_precision: collections.Counter = collections.Counter()
        compiled = 0
        for (precision, was_compiled), n in self.rows.items():
            by_precision[precision] += n
            compiled += n if was_compiled else 0
        total = sum(by_precision.values())
        precision = max(sorted(by_precision), key=by_precision.get) if total else "fp32"
        return {"precision": precision, "compile": bool(total) and compiled * 2 > total}


MAX_TRACKED = 64  # optimisers followed; the record keeps the 8 that moved most


SAMPLED = 64  # elements drawn from each sampled parameter
DRAWS = 8  # parameters sampled (by size, with replacement) at a measured step
ALWAYS = 8  # each optimiser's first steps are all measured
EVERY = 8  # later steps: one in EVERY, at a private random phase (and weighted EVERY)


class OptimizerWatch:
    """Each optimiser that stepped the model's parameters: class, hyper-parameters (lr: its
    peak), steps taken, parameter elements those steps could move, and how far they actually
    moved them (`update`: the L1 norm of each step's change, summed over steps). `optimizers()`
    ranks by `update`: a decoy with a tiny lr that steps the same parameters moves them next
    to nothing, whichever optimiser was built or stepped first.

    `update` is an unbiased estimate, cheap enough to leave on every run: at a measured step,
    `DRAWS` parameters are drawn with chance proportional to their size and `SAMPLED` of
    their elements each, from private generators (the miner's RNG streams are untouched);
    every step of the first `ALWAYS` is measured, later one in `EVERY` (from a private random
    phase, so each step has the same chance), weighted to match. The sums stay on the
    parameters' devices and are read once, by `optimizers()`: the watch never makes the host
    wait for a GPU during training."""

    def __init__(self, model=None) -> None:
        self.seen: dict[int, dict] = {}
        self._handles: list = []
        self._owned = None if model is None else {id(p) for p in model.parameters()}
        self._pending: dict[int, tuple] = {}  # optimiser -> (weight, [(flat, drawn, before)])
        self._sums: dict[int, dict] = {}  # optimiser -> device -> summed update (a tensor)
        self._gen = None
        self._device_gens: dict = {}
        self._seed = 0

    def __enter__(self) -> OptimizerWatch:
        import torch
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        self._seed = int.from_bytes(os.urandom(8), "little") >> 1
        self._gen = torch.Generator().manual_seed(self._seed)
        self._handles = [register_optimizer_step_pre_hook(self._hook),
                         register_optimizer_step_post_hook(self._after)]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _params(self, optimizer):
        """(group, its model parameters with a gradient) for each group with a non-zero lr."""
        for group in optimizer.param_groups:
            if _is_zero(group.get("lr")):
                continue
            yield group, [p for p in group.get("params", ())
                          if getattr(p, "grad", None) is not None
                          and (self._owned is None or id(p) in self._owned)]

    def _moved(self, optimizer) -> tuple[int, dict, list]:
        """Elements of the model's parameters this step can move, the largest such group
        (its hyper-parameters describe the optimiser), and those parameters."""
        moved, main, main_n, every = 0, {}, -1, []
        for group, params in self._params(optimizer):
            n = sum(p.numel() for p in params)
            moved += n
            every += params
            if n > main_n:
                main, main_n = group, n
        return moved, main, every

    def _generator(self, device):
        import torch

        if device.type == "cpu":
            return self._gen
        gen = self._device_gens.get(device)
        if gen is None:
            gen = self._device_gens[device] = torch.Generator(device=device)
            gen.manual_seed(self._seed)
        return gen

    def _sample(self, params: list, moved: int) -> list:
        """(flat parameter, drawn element indices, their values now, scale) for `DRAWS`
        parameters drawn by size: `scale` * sum of |change| estimates the step's L1 norm."""
        import torch

        sizes = torch.tensor([float(p.numel()) for p in params], dtype=torch.float64)
        picks = torch.multinomial(sizes, DRAWS, replacement=True, generator=self._gen)
        taken = []
        for index, count in collections.Counter(picks.tolist()).items():
            flat = params[index].detach().reshape(-1)
            drawn = torch.randint(flat.numel(), (count * SAMPLED,), device=flat.device,
                                  generator=self._generator(flat.device))
            taken.append((flat, drawn, flat[drawn].float(), moved / (DRAWS * SAMPLED)))
        return taken

    def _hook(self, optimizer, args, kwargs) -> None:
        moved, group, params = self._moved(optimizer)
        if not moved:
            return
        entry = self.seen.get(id(optimizer))
        if entry is None:
            if len(self.seen) >= MAX_TRACKED:
                return
            hparams = {k: _plain(v) for k, v in sorted(group.items()) if k != "params"}
            entry = self.seen[id(optimizer)] = {"cls": type(optimizer).__name__,
                                                "hparams": hparams, "steps": 0, "moved": 0,
                                                "update": 0.0}
        entry["steps"] += 1
        entry["moved"] += moved
        if isinstance(group.get("lr"), float | int) and isinstance(entry["hparams"].get("lr"),
                                                                      float):
            # `lr` is the peak over the run: a warm-up schedule starts far below its real lr.
            entry["hparams"]["lr"] = max(entry["hparams"]["lr"], float(group["lr"]))
        weight = 1.0
        if entry["steps"] > ALWAYS:
            if (entry["steps"] + self._seed) % EVERY:
                return
            weight = float(EVERY)
        try:
            self._pending[id(optimizer)] = (weight, self._sample(params, moved))
        except (RuntimeError, TypeError, ValueError):  # a parameter that cannot be indexed
            self._pending.pop(id(optimizer), None)

    def _after(self, optimizer, args, kwargs) -> None:
        weight, taken = self._pending.pop(id(optimizer), (0.0, None))
        if not taken or id(optimizer) not in self.seen:
            return
        import torch

        sums = self._sums.setdefault(id(optimizer), {})
        try:  # added where the parameters live: no device sync here
            for flat, drawn, before, scale in taken:
                change = (flat[drawn].float() - before).abs().sum() * (scale * weight)
                change = torch.nan_to_num(change, nan=0.0, posinf=0.0, neginf=0.0)
                total = sums.get(change.device)
                sums[change.device] = change if total is None else total + change
        except (RuntimeError, TypeError, ValueError):
            return

    def optimizers(self) -> list[dict]:
        """The optimisers that moved the parameters most first (then most elements they
        could move; ties: first seen); at most 8. Reads the devices' sums (one wait)."""
        for key, sums in self._sums.items():
            try:
                total = sum(float(v) for v in sums.values())
            except (RuntimeError, TypeError, ValueError):  # a device that failed mid-run
                continue
            if math.isfinite(total):
                self.seen[key]["update"] = total
        ranked = sorted(self.seen.values(), key=lambda e: (-e["update"], -e["moved"]))
        return ranked[:8]


def _is_zero(lr) -> bool:
    try:
        return float(lr) == 0.0
    except (TypeError, ValueError, RuntimeError):
        return False
