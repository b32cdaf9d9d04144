"""The node's slots in rotation, and where each submission's runs met host faults.

One `Rotation` is shared by a node's evaluation workers (one worker per slot). A slot takes a
run only after its health probe passes; a failing probe takes it out of rotation (logged,
counted in `/metrics`) until a later probe passes, `validator.slot_reprobe_s` later. A run
that ends in a host fault goes back to the queue and, while another slot in rotation has not
failed it yet, is left to that slot; after `validator.infra_retries` retries it is failed as
an infrastructure failure, never charged to the miner. State is in memory: after a restart,
`max_attempts` still bounds every submission.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from prism_challenge.config.settings import Settings
from prism_challenge.hardware.faults import kernel_xids
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot

log = logging.getLogger("prism.validator")


@dataclass(frozen=True)
class SlotState:
    """One slot as `/metrics` shows it."""

    index: int
    gpus: tuple[str, ...]
    cpus: tuple[int, ...]
    in_rotation: bool
    reason: str
    probe_failures: int
    host_faults: int


class Rotation:
    def __init__(self, settings: Settings, slots: list[Slot], health: HealthCheck | None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.slots = list(slots)
        self.health = health
        self.clock = clock
        self._lock = threading.Lock()
        self._out: dict[int, tuple[float, str]] = {}  # slot -> (when taken out, why)
        self._faulted: dict[int, list[int]] = {}  # submission id -> slots of its host faults
        self._probe_failures: Counter[int] = Counter()
        self._host_faults: Counter[int] = Counter()

    # ---- health ---------------------------------------------------------------------------
    def in_rotation(self, slot: Slot) -> bool:
        with self._lock:
            return slot.index not in self._out

    def admit(self, slot: Slot) -> bool:
        """May the slot take a run now? Its probe must pass; a slot out of rotation is not
        even probed before `slot_reprobe_s` has passed."""
        with self._lock:
            out = self._out.get(slot.index)
        if out is not None and self.clock() - out[0] < self.settings.validator.slot_reprobe_s:
            return False
        return self.probe(slot)

    def probe(self, slot: Slot) -> bool:
        """Run the slot's health probe; a failure takes the slot out of rotation."""
        if self.health is None:
            return True
        health = self.health.check(slot)
        if health.cancelled:  # shutting down: the slot takes nothing, and stays in rotation
            return False
        if not health.ok:
            self.take_out(slot, health.reason)
            return False
        with self._lock:
            back = self._out.pop(slot.index, None)
        if back is not None:
            log.warning("%s is back in rotation: its health probe passes (%.1fs)",
                        slot.describe(), health.seconds)
        for note in health.notes:
            log.debug("%s probe: %s", slot.describe(), note)
        return True

    def take_out(self, slot: Slot, reason: str) -> None:
        with self._lock:
            self._out[slot.index] = (self.clock(), reason)
            self._probe_failures[slot.index] += 1
            left = len(self.slots) - len(self._out)
        log.error("%s taken out of rotation: %s (%d of %d slots left in rotation)",
                  slot.describe(), reason, left, len(self.slots))

    # ---- host faults ----------------------------------------------------------------------
    def may_take(self, slot: Slot, sid: int) -> bool:
        """A submission goes to a slot where it has not met a host fault, while one of those
        is in rotation."""
        with self._lock:
            faulted = set(self._faulted.get(sid, ()))
            if slot.index not in faulted:
                return True
            others = [s for s in self.slots
                      if s.index not in self._out and s.index not in faulted]
        return not others

    def host_fault(self, sid: int, slot: Slot) -> tuple[bool, list[int]]:
        """Count a host fault of `sid` on `slot`: (retry it?, slots it faulted on so far)."""
        with self._lock:
            slots = self._faulted.setdefault(sid, [])
            slots.append(slot.index)
            self._host_faults[slot.index] += 1
            faulted = list(slots)
        retry = len(faulted) <= self.settings.validator.infra_retries
        if not retry:
            self.settle(sid)
        return retry, faulted

    def settle(self, sid: int) -> None:
        """The submission is final (or scored): forget its faults."""
        with self._lock:
            self._faulted.pop(sid, None)

    def host_evidence(self, slot: Slot, since_s: float) -> str | None:
        """After a run that failed on `slot`: did the host fail? Xids the kernel logged for
        its GPUs since the run started, else a failing health probe."""
        xids = kernel_xids([g.bus_id for g in slot.gpus if g.bus_id], since_s) if slot.gpus \
            else []
        if xids:
            self.take_out(slot, f"the kernel logged {xids[0].evidence}")
            return xids[0].evidence
        if not self.probe(slot):
            with self._lock:
                why = self._out.get(slot.index, (0.0, "unhealthy"))[1]
            return f"the slot's health probe failed after the run: {why}"
        return None

    # ---- metrics --------------------------------------------------------------------------
    def states(self) -> list[SlotState]:
        with self._lock:
            return [SlotState(s.index, tuple(d.id for d in s.devices), s.cpus,
                              s.index not in self._out, self._out.get(s.index, (0, ""))[1],
                              self._probe_failures[s.index], self._host_faults[s.index])
                    for s in self.slots]
