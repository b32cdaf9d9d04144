"""Evaluation slots: disjoint groups of GPUs and CPU cores, each owned by one run at a time.

A GPU host is split into groups of `sandbox.nproc_per_node` GPUs, one slot per group (the
default slot count); the host's CPU cores are shared out among the slots too, so no two runs
contend for a GPU or a core. A CPU host keeps `validator.slots` (1 by default) and pins each
slot to its own cores. A slot is held through `lease()` for the whole of a job (a run with its
evaluation, a replay): a second holder is refused, never queued behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from prism_challenge.config.settings import Settings
from prism_challenge.hardware.devices import GpuInfo
from prism_challenge.isolation.spec import GpuDevice


class SlotPlanError(ValueError):
    """The configuration asks for slots this host cannot give."""


class SlotBusy(RuntimeError):
    """Another job holds the slot: two runs never share a slot's devices."""


@dataclass(eq=False)
class Slot:
    index: int
    gpus: tuple[GpuInfo, ...]
    cpus: tuple[int, ...]
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def devices(self) -> tuple[GpuDevice, ...]:
        return tuple(g.device for g in self.gpus)

    def describe(self) -> str:
        gpus = ",".join(d.id for d in self.devices) or "none"
        return f"slot {self.index} (GPUs {gpus}; CPU cores {_ranges(self.cpus)})"

    @contextmanager
    def lease(self) -> Iterator[Slot]:
        """Own the slot for a job; the same thread may re-enter (a probe inside its run)."""
        if not self._lock.acquire(blocking=False):
            raise SlotBusy(f"{self.describe()} is already running a job")
        try:
            yield self
        finally:
            self._lock.release()


def plan_slots(settings: Settings, gpus: list[GpuInfo], cpus: tuple[int, ...]) -> list[Slot]:
    """Split the host's GPUs and cores into disjoint slots (see the module docstring)."""
    nproc = settings.sandbox.nproc_per_node
    wanted = settings.validator.slots
    if gpus:
        groups = len(gpus) // nproc
        if groups == 0:
            raise SlotPlanError(f"{len(gpus)} GPU(s) cannot fill one slot of "
                                f"sandbox.nproc_per_node={nproc}")
        count = groups if wanted is None else wanted
        if count > groups:
            raise SlotPlanError(f"validator.slots={count} needs {count * nproc} GPUs "
                                f"(nproc_per_node={nproc}); this validator has {len(gpus)}")
    else:
        count = wanted or 1
    if count > len(cpus):
        raise SlotPlanError(f"{count} slots need at least {count} CPU cores; this validator "
                            f"may use {len(cpus)} ({_ranges(cpus)})")
    share = len(cpus) // count
    return [Slot(i, tuple(gpus[i * nproc:(i + 1) * nproc]) if gpus else (),
                 tuple(cpus[i * share:(i + 1) * share])) for i in range(count)]


def _ranges(cpus: tuple[int, ...]) -> str:
    """0,1,2,5 -> '0-2,5' (the cpuset notation)."""
    out: list[str] = []
    for c in sorted(cpus):
        if out and out[-1].split("-")[-1] == str(c - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out) or "all"
