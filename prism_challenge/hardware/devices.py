"""The GPUs and CPU cores of this host, as the validator splits them into slots.

GPUs come from `sandbox.gpus` when set, else from `nvidia-smi`, else from `torch.cuda`. Each
is known by its nvidia-smi index (PCI bus order), its UUID and its device-node minor, so a
sandbox can be given exactly its own `/dev/nvidia<minor>` and `CUDA_VISIBLE_DEVICES`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from prism_challenge.isolation.spec import GpuDevice

QUERY = ("index", "uuid", "pci.bus_id", "memory.total", "memory.used")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")


class DeviceError(RuntimeError):
    """The GPUs of this host cannot be listed or do not match the configuration."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the driver reports it; `problem` is set when it does not answer properly."""

    index: int
    uuid: str = ""
    bus_id: str = ""
    minor: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    problem: str = ""

    @property
    def device(self) -> GpuDevice:
        return GpuDevice(id=self.uuid or str(self.index),
                         minor=self.index if self.minor is None else self.minor)

    @property
    def free_fraction(self) -> float | None:
        if not self.memory_total_mib or self.memory_used_mib is None:
            return None
        return 1.0 - self.memory_used_mib / self.memory_total_mib


def _int(field: str) -> int | None:
    return int(field) if field.isdigit() else None


def _minor(bus_id: str, proc_gpus: Path) -> int | None:
    """The device-node minor the driver gave the GPU at `bus_id` (None when unknown)."""
    if not bus_id:
        return None
    domain, _, rest = bus_id.lower().partition(":")
    info = proc_gpus / f"{domain[-4:]}:{rest}" / "information"
    try:
        for line in info.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Device Minor":
                return int(value.strip())
    except (OSError, ValueError):
        return None
    return None


def parse_query(text: str, proc_gpus: Path = PROC_GPUS) -> list[GpuInfo]:
    """Parse `nvidia-smi --query-gpu=<QUERY> --format=csv,noheader,nounits`.

    A GPU in a bad state still gets a line, with bracketed fields such as `[GPU requires
    reset]` or `[Unknown Error]`; those become its `problem`.
    """
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(QUERY) or not fields[0].isdigit():
            continue
        index, uuid, bus_id, total, used = fields
        bad = [f for f in fields if f.startswith("[")]
        gpus.append(GpuInfo(
            index=int(index), uuid=uuid if uuid.startswith(("GPU-", "MIG-")) else "",
            bus_id=bus_id if not bus_id.startswith("[") else "",
            minor=_minor(bus_id, proc_gpus), memory_total_mib=_int(total),
            memory_used_mib=_int(used), problem=", ".join(bad)))
    return gpus


def query_nvidia_smi(timeout_s: float = 30.0) -> list[GpuInfo] | None:
    """Every GPU nvidia-smi (found on PATH) lists; None when there is no nvidia-smi.

    Raises DeviceError when it answers with nothing usable (driver gone, tool hung).
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [exe, f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceError(f"nvidia-smi failed: {exc}") from exc
    gpus = parse_query(done.stdout)
    if done.returncode != 0 and not gpus:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise DeviceError(f"nvidia-smi exited {done.returncode}: {said[-1] if said else ''}")
    return gpus


def _torch_gpus() -> list[GpuInfo]:
    import torch

    return [GpuInfo(index=i) for i in range(torch.cuda.device_count())]


def discover_gpus(configured: list[str]) -> list[GpuInfo]:
    """The GPUs this validator may use, in nvidia-smi order.

    `configured` (`sandbox.gpus`) names them by index or UUID; empty means every GPU the
    host has.
    """
    listed = query_nvidia_smi()
    if not configured:
        return listed if listed is not None else _torch_gpus()
    if listed is None:
        if not all(c.isdigit() for c in configured):
            raise DeviceError("sandbox.gpus names GPUs by UUID but nvidia-smi is not on PATH "
                              "to resolve them; name them by index")
        return [GpuInfo(index=int(c)) for c in configured]
    by_name = {str(g.index): g for g in listed} | {g.uuid: g for g in listed if g.uuid}
    unknown = [c for c in configured if c not in by_name]
    if unknown:
        raise DeviceError(f"sandbox.gpus names {unknown}, which nvidia-smi does not list "
                          f"(it lists {sorted(by_name)})")
    chosen = [by_name[c] for c in configured]
    if len({g.index for g in chosen}) != len(chosen):
        raise DeviceError(f"sandbox.gpus names a GPU twice: {configured}")
    return chosen


def host_cpus() -> tuple[int, ...]:
    """The CPU cores this process may run on (its affinity: a container's cpuset counts)."""
    return tuple(sorted(os.sched_getaffinity(0)))
