"""Isolation backends behind one interface (`IsolationBackend.run(spec) -> result`).

In: a `SandboxSpec` (argv, mounts, environment, devices, limits). Out: a `SandboxResult`
(cause, exit code, bounded output, wall time). Guarantees: the process sees only the spec's
mounts and PRISM's harness files (bubblewrap, docker), no network, and is killed with its
whole process tree at its limits. Stands alone: imports nothing of PRISM outside itself.
"""

from __future__ import annotations

from pathlib import Path

from prism_challenge.isolation.spec import (
    GpuDevice,
    IsolationBackend,
    Limits,
    Mount,
    SandboxResult,
    SandboxSpec,
    minimal_env,
)


def make_backend(name: str, *, docker_image: str = "prism-challenge:latest",
                 dev_dir: Path = Path("/dev"), prewarm: bool = True) -> IsolationBackend:
    """`dev_dir` is where bubblewrap finds the GPU device nodes it binds (tests point it at
    stand-in files); `prewarm`: bubblewrap starts `python -m` programs in the prewarmed
    interpreter (isolation/prewarm.py)."""
    if name == "bubblewrap":
        from prism_challenge.isolation.bubblewrap import BubblewrapBackend

        return BubblewrapBackend(dev_dir=dev_dir, prewarm=prewarm)
    if name == "docker":
        from prism_challenge.isolation.docker import DockerBackend

        return DockerBackend(docker_image)
    if name == "none":
        from prism_challenge.isolation.none import NoIsolationBackend

        return NoIsolationBackend()
    raise ValueError(f"unknown sandbox backend {name!r}")


__all__ = [
    "GpuDevice", "IsolationBackend", "Limits", "Mount", "SandboxResult", "SandboxSpec",
    "make_backend", "minimal_env",
]
