"""Isolation with Docker, for production GPU hosts (driven through the `docker` SDK).

`container_kwargs` is a pure function of the spec so the exact container we ask for is
testable without an engine: no network, read-only root, every capability dropped,
no-new-privileges, pid and memory limits, a size-limited tmpfs, uid 65534, the slot's GPUs by
device request and its CPU cores as a cpuset, and the pinned image.
"""

from __future__ import annotations

import time
from typing import Any

from prism_challenge.isolation.spec import SandboxResult, SandboxSpec, StopAt, human_bytes
from prism_challenge.isolation.supervise import dir_size, memory_limit_reached

NOBODY = "65534:65534"


def container_kwargs(spec: SandboxSpec, image: str) -> dict[str, Any]:
    from docker.types import DeviceRequest

    volumes = {
        str(m.host): {"bind": m.target, "mode": "rw" if m.writable else "ro"} for m in spec.mounts
    }
    kwargs: dict[str, Any] = {
        "image": image,
        "command": list(spec.argv),
        "environment": dict(spec.env),
        "working_dir": spec.cwd,
        "user": NOBODY,
        "network_mode": "none",
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "pids_limit": spec.limits.pids_max,
        "mem_limit": spec.limits.memory_bytes,
        "memswap_limit": spec.limits.memory_bytes,
        "tmpfs": {"/tmp": f"{'rw' if spec.tmp_writable else 'ro'},nosuid,nodev,"
                          f"size={min(spec.limits.disk_bytes, 2**30)}"},
        "ulimits": _ulimits(spec),
        "volumes": volumes,
        # no /dev/shm at all where the spec keeps /tmp unwritable (/dev is root's, 0755)
        "ipc_mode": "private" if spec.tmp_writable else "none",
        "detach": True,
        "name": spec.name,
        "labels": {"prism.sandbox": "1"},
    }
    if spec.tmp_writable:
        kwargs["shm_size"] = min(spec.limits.memory_bytes // 4, 2**31)
    if spec.gpus:  # the runtime exposes exactly these GPUs (as 0..n-1 inside)
        kwargs["device_requests"] = [
            DeviceRequest(device_ids=[g.id for g in spec.gpus], capabilities=[["gpu"]])
        ]
    if spec.cpus:
        kwargs["cpuset_cpus"] = ",".join(str(c) for c in spec.cpus)
    return kwargs


def _ulimits(spec: SandboxSpec) -> list:
    from docker.types import Ulimit

    return [
        Ulimit(name="core", soft=0, hard=0),
        Ulimit(name="fsize", soft=spec.limits.disk_bytes, hard=spec.limits.disk_bytes),
        Ulimit(name="nofile", soft=4096, hard=4096),
    ]


class DockerBackend:
    name = "docker"

    def __init__(self, image: str, client: Any = None) -> None:
        import docker

        self.image = image
        self.client = client or docker.from_env()

    def run(self, spec: SandboxSpec, *, stop_at: StopAt = None) -> SandboxResult:
        (spec.scratch / "tmp").mkdir(parents=True, exist_ok=True)
        # The container runs as 65534; it must be able to use the run's writable mounts.
        for mount in spec.mounts:
            if mount.writable and mount.host.is_dir():
                mount.host.chmod(0o777)
        container = self.client.containers.run(**container_kwargs(spec, self.image))
        start = time.monotonic()
        cause, detail = None, ""
        try:
            while True:
                container.reload()
                if container.status in ("exited", "dead"):
                    break
                late = stop_at() if stop_at is not None else None
                if time.monotonic() - start > spec.limits.wall_s or (
                    late is not None and time.monotonic() > late
                ):
                    cause, detail = "timeout", "wall-clock limit or deadline passed"
                    break
                if dir_size(spec.scratch) > spec.limits.disk_bytes:
                    disk = human_bytes(spec.limits.disk_bytes)
                    cause, detail = "disk", f"scratch space over {disk}"
                    break
                time.sleep(0.5)
            if cause is not None:
                container.kill()
            state = container.attrs.get("State", {})
            code = container.wait(timeout=30).get("StatusCode")
            logs = container.logs(stdout=True, stderr=True, tail=2000) or b""
            if cause is None and state.get("OOMKilled"):
                cause, detail = "memory", memory_limit_reached(spec.limits)
            if cause is None:
                cause = "ok" if code == 0 else "crash"
                detail = "" if code == 0 else f"exit status {code}"
            output = logs[-spec.limits.output_bytes:].decode("utf-8", errors="replace")
            hit = () if cause in ("ok", "crash") else (cause,)
            return SandboxResult(cause, code, time.monotonic() - start, output, len(logs),
                                 None, detail, hit)
        finally:
            container.remove(force=True)
