"""What a sandbox run needs, independent of how it is isolated.

A `SandboxSpec` names the program, what is visible (mounts), the environment (already
scrubbed: nothing of the validator's leaks in) and the limits. Backends turn it into a
bubblewrap command line or a Docker container; the watchdog enforces what the kernel
cannot enforce for us.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

# host_memory: the kernel's OOM killer took the run while it stayed under its own limit (the
# host ran out of memory: infrastructure, never the miner's fault).
ExitCause = Literal["ok", "crash", "timeout", "memory", "host_memory", "pids", "disk", "output",
                    "cancelled"]


# A late-bound kill time (time.monotonic() seconds), e.g. the feeder's deadline plus grace,
# checked alongside the static wall limit; None while unknown.
StopAt = Callable[[], float | None] | None


@dataclass(frozen=True)
class Mount:
    host: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class GpuDevice:
    """One GPU a sandbox may use.

    `id` is how CUDA_VISIBLE_DEVICES and Docker's device request name it (its UUID when
    known, else its nvidia-smi index); `minor` picks its device node, /dev/nvidia<minor>.
    """

    id: str
    minor: int


@dataclass(frozen=True)
class Limits:
    wall_s: float
    memory_bytes: int
    pids_max: int
    disk_bytes: int
    output_bytes: int


@dataclass(frozen=True)
class SandboxSpec:
    argv: tuple[str, ...]
    mounts: tuple[Mount, ...]
    env: dict[str, str]
    limits: Limits
    scratch: Path  # host directory mounted writable; its size counts against disk_bytes
    cwd: str = "/scratch"
    gpus: tuple[GpuDevice, ...] = ()
    cpus: tuple[int, ...] = ()  # CPU cores the whole sandbox is pinned to; () = not pinned
    name: str = "prism-run"
    # may start in the backend's prewarmed interpreter; False: cold (a replay of a run that
    # started cold starts as it did, since a program can tell the two apart)
    prewarm: bool = True
    # False: /tmp and /dev/shm cannot be written. For a sandbox whose processes answer one
    # task each (the eval): a file one leaves there could be read by the next, so there is
    # nowhere to leave one but the scratch the harness writes (TMPDIR lies in it)
    tmp_writable: bool = True


def human_bytes(n: int) -> str:
    """8589934592 -> '8.0 GiB', 3145728 -> '3.0 MiB'; under a KiB, the count in bytes. How a
    limit or a size reads in a run's detail (and wherever PRISM shows a byte count)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class SandboxResult:
    cause: ExitCause
    exit_code: int | None
    wall_s: float
    output: str  # the tail of stdout+stderr, at most limits.output_bytes
    output_bytes_total: int
    peak_memory_bytes: int | None = None
    detail: str = ""
    limits_hit: tuple[str, ...] = field(default_factory=tuple)


class IsolationBackend(Protocol):
    """Runs a spec to completion (or to a limit) and says why it ended."""

    name: str

    def run(self, spec: SandboxSpec, *, stop_at: StopAt = None) -> SandboxResult: ...


# The user name a sandboxed process runs as (uid 65534): /etc/passwd inside says so too.
SANDBOX_USER = "prism"


def minimal_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment a sandboxed process sees: no secrets, no proxies; a user name
    and a home in scratch, as a normal user environment has (compilers and caches ask)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/scratch",
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
        "XDG_CACHE_HOME": "/scratch/cache",
        "TMPDIR": "/scratch/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONHASHSEED": "0",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "TORCHINDUCTOR_CACHE_DIR": "/scratch/inductor",
        "TRITON_CACHE_DIR": "/scratch/triton",
        "MPLCONFIGDIR": "/scratch/mpl",
        "HF_HUB_OFFLINE": "1",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    env.update(extra or {})
    return env
