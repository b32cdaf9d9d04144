"""Isolation backends behind one interface (`IsolationBackend.run(spec) -> result`)."""

from __future__ import annotations

from prism_challenge.sandbox.backends.spec import (
    IsolationBackend,
    Limits,
    Mount,
    SandboxResult,
    SandboxSpec,
    minimal_env,
)


def make_backend(name: str, *, docker_image: str = "prism-challenge:latest") -> IsolationBackend:
    if name == "bubblewrap":
        from prism_challenge.sandbox.backends.bubblewrap import BubblewrapBackend

        return BubblewrapBackend()
    if name == "docker":
        from prism_challenge.sandbox.backends.docker import DockerBackend

        return DockerBackend(docker_image)
    if name == "none":
        from prism_challenge.sandbox.backends.none import NoIsolationBackend

        return NoIsolationBackend()
    raise ValueError(f"unknown sandbox backend {name!r}")


__all__ = [
    "IsolationBackend", "Limits", "Mount", "SandboxResult", "SandboxSpec", "make_backend",
    "minimal_env",
]
