"""Which failures of a GPU run are the host's (infrastructure), not the miner's.

A host fault is one the submission cannot cause and the slot's hardware or driver can: an
Xid the driver logs for hardware (ECC, row remapping, NVLink, a GPU off the bus, GSP), or a
slot whose health probe fails right after the run. Such a run is requeued on another slot
and never charged to the miner; a replay is retried with its stored plan.

Only the host's own evidence decides: `kernel_xids` (the kernel's log for the slot's GPUs)
and the slot's health probe, read by the local rotation (`validator/rotation.py`) and by a
cluster node's slot (`cluster/node_slot.py`) alike, and applied by `blamed`. Text the
sandbox printed is never evidence, since a model can print a driver error whenever it likes
(for instance exactly when a replay's check lands on a step it tampered with).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel

FaultKind = Literal["xid"]
# What a run or replay may end with that the host can have caused (else it is the miner's).
BLAMEABLE = ("crash", "deadline")
R = TypeVar("R", bound=BaseModel)

XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F:.]+)\): (?P<code>\d+)\b")
# Xids of hardware or the driver (ECC, row remapping, NVLink, bus, GSP, reset required).
# Others (13 SM exception, 31 MMU fault, 43 stopped channel, 45 cleanup) follow an
# application's own faults and are not believed as the host's.
HOST_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140, 154})


@dataclass(frozen=True)
class HostFault:
    kind: FaultKind
    evidence: str  # the line that shows it, trimmed


def blamed(record: R, evidence: str | None) -> R:
    """A run or replay record that ended in a crash or a hang while the host showed
    `evidence` of a fault becomes `infra`, its detail naming the evidence; else unchanged."""
    if evidence is None or record.exit_reason not in BLAMEABLE:
        return record
    detail = (f"host fault: {evidence}; the run ended with {record.exit_reason}: "
              f"{record.exit_detail}")
    return record.model_copy(update={"exit_reason": "infra", "exit_detail": detail[:4000]})


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
