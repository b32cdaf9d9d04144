"""A slot's health, checked before it takes a run and after a run that failed.

Two parts. On the host: nvidia-smi must list each of the slot's GPUs without an error field,
with at least `validator.probe_min_free_fraction` of its memory free. In the sandbox, with
exactly the slot's devices and cores: `health_probe` (cpuset, device nodes, CPU matmul, GPU
matmul against the CPU, and `torch.compile` of a tiny model per `validator.probe_compile`:
by default on slots with GPUs, once per slot until a probe of it fails, since a compile
costs seconds and the toolchain does not change between runs). A slot that fails either is
unhealthy; the reason names the check. A probe cut short by the validator's shutdown
(`cancel`) is neither: it says nothing of the slot.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from prism_challenge.config.settings import Settings
from prism_challenge.hardware.devices import DeviceError, query_nvidia_smi
from prism_challenge.hardware.slots import Slot
from prism_challenge.isolation import (
    IsolationBackend,
    Limits,
    Mount,
    SandboxSpec,
    minimal_env,
)

PROBE_LIMITS = dict(memory_bytes=4 * 2**30, pids_max=64, disk_bytes=64 * 2**20,
                    output_bytes=16384)


@dataclass(frozen=True)
class Health:
    ok: bool
    problems: tuple[str, ...]
    seconds: float
    notes: tuple[str, ...] = ()
    cancelled: bool = False  # the validator stopped it: no verdict on the slot

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)


class HealthCheck:
    def __init__(self, settings: Settings, backend: IsolationBackend, work_dir: Path, *,
                 cancel: threading.Event | None = None) -> None:
        self.settings = settings
        self.backend = backend
        self.work_dir = Path(work_dir)
        self.cancel = cancel or threading.Event()  # set on shutdown: a probe stops at once
        self._compiled: set[int] = set()  # slots whose sandbox compiled since their last failure

    def compiles(self, slot: Slot) -> bool:
        """Does this probe of `slot` compile a tiny model?"""
        mode = self.settings.validator.probe_compile
        wanted = mode == "always" or (mode == "auto" and bool(slot.gpus))
        return wanted and slot.index not in self._compiled

    def check(self, slot: Slot) -> Health:
        start = time.monotonic()
        problems = self.host_problems(slot)
        notes: tuple[str, ...] = ()
        if not problems:
            found, notes = self.sandbox_problems(slot)
            problems += found
        if self.cancel.is_set():
            return Health(False, ("the validator is shutting down",),
                          time.monotonic() - start, cancelled=True)
        return Health(not problems, tuple(problems), time.monotonic() - start, notes)

    def host_problems(self, slot: Slot) -> list[str]:
        """What nvidia-smi says of the slot's GPUs (nothing to check on a CPU slot)."""
        if not slot.gpus:
            return []
        try:
            listed = query_nvidia_smi()
        except DeviceError as exc:
            return [str(exc)]
        if listed is None:
            return []  # no nvidia-smi on this host: the sandbox probe alone decides
        by_key = {(g.uuid or str(g.index)): g for g in listed}
        problems = []
        min_free = self.settings.validator.probe_min_free_fraction
        for gpu in slot.gpus:
            now = by_key.get(gpu.uuid or str(gpu.index))
            if now is None:
                problems.append(f"GPU {gpu.device.id} does not answer (nvidia-smi lists it not)")
            elif now.problem:
                problems.append(f"GPU {gpu.device.id}: {now.problem}")
            elif (now.free_fraction or 0.0) < min_free:
                problems.append(f"GPU {gpu.device.id}: {now.memory_used_mib} of "
                                f"{now.memory_total_mib} MiB already in use")
        return problems

    def sandbox_problems(self, slot: Slot) -> tuple[list[str], tuple[str, ...]]:
        scratch = self.work_dir / f"slot-{slot.index}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        isolated = self.backend.name != "none"  # without isolation the host's /dev shows
        compiles = self.compiles(slot)
        env = minimal_env({
            "PRISM_PROBE_COMPILE": "1" if compiles else "0",
            "PRISM_PROBE_CPUS": ",".join(str(c) for c in slot.cpus),
            "PRISM_PROBE_MINORS": ",".join(str(d.minor) for d in slot.devices) if isolated
            else "",
            "PRISM_PROBE_MIN_FREE": str(self.settings.validator.probe_min_free_fraction),
            # the runs' values: the probe then starts in the runs' prewarmed interpreter
            # and compiles as a run does
            "OMP_NUM_THREADS": str(self.settings.sandbox.cpu_threads),
            "TORCHINDUCTOR_COMPILE_THREADS": str(self.settings.sandbox.cpu_threads),
        })
        spec = SandboxSpec(
            argv=(sys.executable, "-m", "prism_challenge.hardware.health_probe"),
            mounts=(Mount(scratch, "/scratch", writable=True),), env=env,
            limits=Limits(wall_s=self.settings.validator.probe_timeout_s, **PROBE_LIMITS),
            scratch=scratch, gpus=slot.devices, cpus=slot.cpus,
            name=f"prism-health-{slot.index}")
        try:
            result = self.backend.run(spec, stop_at=lambda: 0.0 if self.cancel.is_set()
                                      else None)
        except Exception as exc:  # the sandbox itself cannot start on this slot
            return [f"the probe sandbox failed to start: {type(exc).__name__}: {exc}"[:500]], ()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        lines = result.output.strip().splitlines()
        try:
            report = json.loads(lines[-1]) if lines else None
        except ValueError:
            report = None
        if result.cause != "ok" or not isinstance(report, dict):
            tail = result.output.strip()[-300:]
            self._compiled.discard(slot.index)
            return [f"the probe ended with {result.cause} ({result.detail}): {tail}"], ()
        problems = [str(p) for p in report.get("problems", [])]
        if problems:
            self._compiled.discard(slot.index)
        elif compiles:
            self._compiled.add(slot.index)
        return problems, tuple(str(n) for n in report.get("notes", []))
