"""A replay's in-process probe: the losses of a step's kept positions, each predicted from
its row cut right after it (the target and everything later replaced by the filler),
from the model state, RNG and buffers this step's scored forward will see.

A row may hold several kept positions; it is cut once per forward, so no forward ever
holds a copy of a row that shows the target of another copy's position (a model that
compares the rows of its batch would read it there). The positions are answered in
rounds: round k cuts every row at its k-th kept position, in increasing order.

How a round is run depends on what the model's forward depends on:

- compact (the default): the forward gets the cut rows only. A row's logits depend on
  that row alone (the contract the causality screen checks), so an honest model gives the
  same losses as in the full batch, with a fraction of the rows: at the demo's keep rate a
  step holds about 41 kept positions over 16 rows in about 6 rounds, so the probe forwards
  about 41 rows instead of 96.
- full batch: every row of the step, the cut ones in place. A forward that draws random
  numbers (dropout) draws them for the batch's shape, so only the step's own shape gives
  each row the masks its scored forward gives it. The probe switches to it for the rest of
  the run as soon as a compact forward draws from the global RNG or raises, or when the
  first probed step, answered both ways, disagrees by more than `CALIBRATION_TOL` (a
  forward that depends on how many rows it is given); it uses it from the start for a
  compiled forward (a new batch shape would recompile it).

Either way every input lacks the targets it is scored on, so what the model does on
noticing a probe cannot lower these losses; the host compares them with the losses the
original run reported before anyone knew which positions would be checked.
"""

from __future__ import annotations

import contextlib

from prism_challenge.sandbox.sampling import rounds

# nats: compact and full-batch answers of the first probed step further apart than this
# (a forward that depends on the batch's size, not only on its row) keep the full batch
CALIBRATION_TOL = 1e-3


class ReplayProbe:
    """Answers the feeder's probe requests of one run (one rank)."""

    def __init__(self, model, core, ddp, separator_id: int, seq_len: int) -> None:
        self.model, self.core, self.ddp = model, core, ddp
        self.sep, self.seq_len = separator_id, seq_len
        self.full_batch = False  # sticky: once a compact forward cannot be trusted
        self.calibrated = False  # the first compact answers were checked against the full batch
        self.forwards = 0  # probe forwards run (both kinds), for the tests
        self.rows_forwarded = 0

    def losses(self, forward, inputs, targets, probe: dict, amp_dtype,
               compiled: bool = False) -> list[float]:
        """The losses at `probe["rows"][i], probe["positions"][i]`, in that order."""
        groups = rounds(probe["rows"], probe["positions"])
        args = (forward, inputs, targets, probe, groups, amp_dtype)
        compact = None
        if not self.full_batch and not compiled:
            try:
                compact = self._answer(*args, compact=True)
            except Exception:  # noqa: BLE001 - the full batch is the exact fallback
                compact = None
            if compact is not None and self.calibrated:
                return compact
        full = self._answer(*args, compact=False)
        assert full is not None  # a full-batch round never gives up
        if compact is None or not all(abs(a - b) <= CALIBRATION_TOL  # NaN: disagrees
                                      for a, b in zip(compact, full, strict=True)):
            self.full_batch = True
        self.calibrated = True
        return full

    def _answer(self, forward, inputs, targets, probe, groups, amp_dtype, *, compact: bool
                ) -> list[float] | None:
        out = [0.0] * len(probe["rows"])
        for group in groups:
            rows = [probe["rows"][i] for i in group]
            positions = [probe["positions"][i] for i in group]
            nats = self._round(forward, inputs, targets, rows, positions, amp_dtype, compact)
            if nats is None:
                return None
            for i, v in zip(group, nats, strict=True):
                out[i] = v
        return out

    def _round(self, forward, inputs, targets, rows, positions, amp_dtype, compact: bool):
        """One forward with each of `rows` cut after its position; None when a compact
        forward drew random numbers (its losses would not be the scored forward's)."""
        import torch

        device = inputs.device
        idx = torch.tensor(rows, dtype=torch.long, device=device)
        pos = torch.tensor(positions, dtype=torch.long, device=device)
        if compact:  # the cut rows only, at 0..k-1
            cut, at = inputs[idx].clone(), torch.arange(len(rows), device=device)
        else:  # the whole batch, the cut rows in their places
            cut, at = inputs.clone(), idx
        after = torch.arange(self.seq_len, device=device)[None, :] > pos[:, None]
        cut[at] = torch.where(after, torch.full_like(cut[at], self.sep), cut[at])
        buffers = [(b, b.detach().clone()) for b in torch.nn.Module.buffers(self.core)]
        cuda = [device] if device.type == "cuda" else []
        no_sync = self.ddp.no_sync() if self.ddp is not None else contextlib.nullcontext()
        drew = False
        try:
            with torch.random.fork_rng(devices=cuda), no_sync, torch.enable_grad(), \
                    torch.autocast(device_type=device.type, dtype=amp_dtype,
                                   enabled=amp_dtype is not None):
                before = _rng_state(cuda) if compact else None
                self.model.train()
                logits = forward(cut)
                self.forwards += 1
                self.rows_forwarded += int(cut.shape[0])
                drew = compact and not _same(before, _rng_state(cuda))
                picked = logits[at, pos].float()
                nats = torch.nn.functional.cross_entropy(picked, targets[idx, pos],
                                                         reduction="none").detach()
        finally:
            with torch.no_grad():
                for buffer, saved in buffers:
                    buffer.copy_(saved)
        return None if drew else [float(v) for v in nats.cpu()]


def _rng_state(cuda: list) -> list:
    import torch

    return [torch.get_rng_state()] + [torch.cuda.get_rng_state(d) for d in cuda]


def _same(a: list, b: list) -> bool:
    import torch

    return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
