"""The software and hardware stack a run was measured on, and whether a replay may judge it.

Batch losses are bit-identical only on the same stack: the same torch build, CUDA and cuDNN,
the same GPU model and driver (or the same CPU instruction set), the same deterministic
settings. Across stacks honest runs drift (CPU against GPU: 1.4e-3 nats within 144 steps), so
a replay elsewhere would fail an honest run. The record therefore keeps the stack, and a
replay on another one is "not comparable" (replay it on a host with the recorded stack),
never a failed verification. How the program started (prewarmed or cold) is part of it too:
not for the numbers, but because a model must not be able to tell a replay from its
original.

The software half comes from the harness's first hello (sent before any of the miner's code
is imported, so a bundle cannot forge it); the hardware half is read on the host.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from prism_challenge.isolation.spec import GpuDevice

SOFTWARE = ("torch", "cuda", "cudnn", "cpu_capability", "deterministic", "start")
HARDWARE = ("devices", "driver")
CPUINFO = Path("/proc/cpuinfo")


class Stack(BaseModel):
    """What decides a run's floating-point results, as far as the validator can see it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    cpu_capability: str | None = None
    deterministic: bool | None = None
    # how the program started: "prewarmed" (a fork of the prewarmed interpreter, entered
    # into the sandbox) or "cold". Not a floating-point matter: the program can tell the two
    # apart (its pid, the waiter beside it), so a replay that starts otherwise than its
    # original would be a replay the model can recognise.
    start: str | None = None
    devices: tuple[str, ...] = ()  # GPU models in CUDA order, or ("cpu: <model>",)
    driver: str | None = None

    def differences(self, other: Stack, fields: Sequence[str] = SOFTWARE + HARDWARE
                    ) -> list[str]:
        """`field recorded -> here` for each field both know and that differs."""
        found = []
        for name in fields:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine in (None, ()) or theirs in (None, ()):
                continue  # a record made before the field existed compares on the rest
            if mine != theirs:
                found.append(f"{name} {_show(mine)} -> {_show(theirs)}")
        return found


def _show(value: object) -> str:
    return "+".join(value) if isinstance(value, tuple) else str(value)


def software_from_hello(raw: object) -> Stack | None:
    """The software half the harness reported at its first hello (None when malformed)."""
    if not isinstance(raw, dict):
        return None
    try:
        return Stack.model_validate({k: raw.get(k) for k in SOFTWARE})
    except ValueError:
        return None


def _gpu_models(gpus: Sequence[GpuDevice], timeout_s: float) -> tuple[tuple[str, ...], str | None]:
    exe = shutil.which("nvidia-smi")
    if exe is None or not gpus:
        return (), None
    try:
        done = subprocess.run([exe, "--query-gpu=index,uuid,name,driver_version",
                               "--format=csv,noheader,nounits"], capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return (), None
    rows = {}
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 4:
            rows[fields[0]] = rows[fields[1]] = (fields[2], fields[3])
    found = [rows[g.id] for g in gpus if g.id in rows]
    if len(found) != len(gpus):
        return (), None
    return tuple(name for name, _ in found), found[0][1]


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.machine()


def hardware(gpus: Sequence[GpuDevice], timeout_s: float = 10.0) -> Stack:
    """The hardware half for a sandbox given `gpus` (none: the CPU it runs on)."""
    if not gpus:
        return Stack(devices=(f"cpu: {cpu_model()}",))
    models, driver = _gpu_models(gpus, timeout_s)
    return Stack(devices=models, driver=driver)


def combine(software: Stack | None, hard: Stack) -> Stack:
    soft = software.model_dump(include=set(SOFTWARE)) if software else {}
    return Stack(**soft, devices=hard.devices, driver=hard.driver)


def not_comparable(recorded: Stack | None, here: Stack, fields: Sequence[str]) -> str | None:
    """Why a replay here cannot judge a run recorded on `recorded` (None: it can)."""
    if recorded is None:
        return None
    diff = recorded.differences(here, fields)
    if not diff:
        return None
    return ("not comparable: the run was recorded on another stack (" + "; ".join(diff)
            + "); replay it on a host with the recorded stack")
