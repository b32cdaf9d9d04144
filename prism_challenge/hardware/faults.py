"""Which failures of a GPU run are the host's (infrastructure), not the miner's.

A host fault is one the submission cannot cause and the slot's hardware or driver can: an
uncorrectable ECC error, a GPU that fell off the bus, a driver/library mismatch, an NCCL
system or internal error, an Xid the driver logs for hardware. Such a run is requeued on
another slot and never charged to the miner.

What stays the miner's even on a GPU: running out of GPU memory inside its own budget, a
device-side assert, an illegal memory access or misaligned address (a kernel bug), and Xids
that an application causes (13, 31, 43, 45). When one of those appears, the failure is the
miner's whatever else the text says.

Only the host's own evidence decides that a run failed on the host: `kernel_xids` (the
kernel's log for the slot's GPUs) and the slot's health probe (`validator/rotation.py`).
Text the sandbox printed is never evidence, since a model can print a driver error when it
likes; `host_fault` only reads what such a text claims (a diagnosis to show), it does not
make a run infrastructure.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FaultKind = Literal["gpu", "driver", "nccl", "xid"]

# The run's own doing, checked first: any of these makes the failure the miner's.
MINER_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"CUDA out of memory",
    r"OutOfMemoryError",
    r"CUDA error: out of memory",
    r"Cuda failure 'out of memory'",
    r"CUBLAS_STATUS_ALLOC_FAILED",
    r"device-side assert triggered",
    r"an illegal memory access was encountered",
    r"misaligned address",
    r"an illegal instruction was encountered",
    r"ncclInvalidUsage",
    r"ncclInvalidArgument",
))

# (kind, pattern): texts of cudaGetErrorString, NVML, nvidia-smi and NCCL for host faults.
HOST_PATTERNS: tuple[tuple[FaultKind, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(p, re.IGNORECASE)) for kind, p in (
        ("gpu", r"uncorrectable ECC error encountered"),
        ("gpu", r"uncorrectable NVLink error"),
        ("gpu", r"GPU is lost"),
        ("gpu", r"(GPU )?has fallen off the bus"),
        ("gpu", r"GPU requires reset"),
        ("gpu", r"CUDA-capable device\(s\) is/are busy or unavailable"),
        ("gpu", r"all CUDA-capable devices are busy or unavailable"),
        ("gpu", r"no CUDA-capable device is detected"),
        ("gpu", r"No CUDA GPUs are available"),
        ("gpu", r"\bdevice (was )?lost\b"),
        ("gpu", r"CUDA (driver )?error: unknown error"),
        ("gpu", r"Cuda failure 'unknown error'"),
        ("driver", r"CUDA driver version is insufficient for CUDA runtime version"),
        ("driver", r"system has unsupported display driver / cuda driver combination"),
        ("driver", r"CUDA error: system not yet initialized"),
        ("driver", r"Error 80[234]: "),  # torch's cudaGetDeviceCount() failures
        ("driver", r"Driver/library version mismatch"),
        ("driver", r"couldn't communicate with the NVIDIA driver"),
        ("driver", r"Failed to initialize NVML"),
        ("nccl", r"ncclSystemError"),
        ("nccl", r"ncclInternalError"),
        ("nccl", r"unhandled system error"),
        ("nccl", r"NCCL error.*internal error"),
    ))

XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F:.]+)\): (?P<code>\d+)\b")
# Xids of hardware or the driver (ECC, row remapping, NVLink, bus, GSP, reset required).
# Others (13 SM exception, 31 MMU fault, 43 stopped channel, 45 cleanup) follow an
# application's own faults and are not believed as the host's.
HOST_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140, 154})


@dataclass(frozen=True)
class HostFault:
    kind: FaultKind
    evidence: str  # the line that shows it, trimmed


def _line_of(text: str, start: int) -> str:
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return text[begin:end if end >= 0 else len(text)].strip()[:300]


def host_fault(text: str) -> HostFault | None:
    """The first sign of a host fault in a failed run's text, or None (the miner's)."""
    if any(p.search(text) for p in MINER_PATTERNS):
        return None
    for match in XID.finditer(text):
        if int(match.group("code")) in HOST_XIDS:
            return HostFault("xid", _line_of(text, match.start()))
    for kind, pattern in HOST_PATTERNS:
        matches = list(pattern.finditer(text))
        if matches:  # the last: a traceback's message comes after its source lines
            return HostFault(kind, _line_of(text, matches[-1].start()))
    return None


def _same_bus(a: str, b: str) -> bool:
    """PCI ids as the driver logs them (0000:3b:00) vs nvidia-smi (00000000:3B:00.0)."""
    def norm(bus: str) -> str:
        domain, _, rest = bus.lower().partition(":")
        return f"{int(domain, 16):x}:{rest.split('.')[0]}" if rest else bus.lower()
    try:
        return norm(a) == norm(b)
    except ValueError:
        return False


def kernel_xids(bus_ids: list[str], since_s: float,
                kmsg: Path = Path("/dev/kmsg")) -> list[HostFault]:
    """Host Xids the kernel logged for these GPUs since `since_s` (CLOCK_MONOTONIC seconds).

    Reads /dev/kmsg records (`prio,seq,usec,flags;message`); a host where the log cannot be
    read (unprivileged, no driver) yields nothing, and the slot's health probe decides.
    """
    try:
        fd = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:  # EPIPE: a record was overwritten while reading
                if exc.errno == errno.EPIPE:
                    continue
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    faults = []
    for line in b"".join(chunks).decode("utf-8", errors="replace").splitlines():
        head, sep, message = line.partition(";")
        fields = head.split(",")
        if not sep or len(fields) < 3 or not fields[2].isdigit():
            continue
        if int(fields[2]) / 1e6 < since_s:
            continue
        match = XID.search(message)
        if (match and int(match.group("code")) in HOST_XIDS
                and any(_same_bus(match.group("bus"), b) for b in bus_ids)):
            faults.append(HostFault("xid", message.strip()[:300]))
    return faults
