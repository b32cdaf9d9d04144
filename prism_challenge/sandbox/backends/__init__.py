"""Isolation backends behind one interface (`IsolationBackend.run(spec) -> result`)."""

from __future__ import annotations

from pathlib import Path

from prism_challenge.sandbox.backends.spec import (
    GpuDevice,
    IsolationBackend,
    Limits,
    Mount,
    SandboxResult,
    SandboxSpec,
    minimal_env,
)


def make_backend(name: str, *, docker_image: str = "prism-challenge:latest",
                 dev_dir: Path = Path("/dev")) -> IsolationBackend:
    """`dev_dir` is where bubblewrap finds the GPU device nodes it binds (tests point it at
    stand-in files)."""
    if name == "bubblewrap":
        from prism_challenge.sandbox.backends.bubblewrap import BubblewrapBackend

        return BubblewrapBackend(dev_dir=dev_dir)
    if name == "docker":
        from prism_challenge.sandbox.backends.docker import DockerBackend

        return DockerBackend(docker_image)
    if name == "none":
        from prism_challenge.sandbox.backends.none import NoIsolationBackend

        return NoIsolationBackend()
    raise ValueError(f"unknown sandbox backend {name!r}")


__all__ = [
    "GpuDevice", "IsolationBackend", "Limits", "Mount", "SandboxResult", "SandboxSpec",
    "make_backend", "minimal_env",
]
