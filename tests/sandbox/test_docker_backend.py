"""The Docker backend: the container we ask for, and a real run where an engine answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_challenge.config import Settings
from prism_challenge.isolation import (
    GpuDevice,
    Limits,
    Mount,
    SandboxSpec,
    make_backend,
    minimal_env,
)
from prism_challenge.isolation.docker import container_kwargs


def _spec(tmp_path: Path, gpus=(), cpus=()) -> SandboxSpec:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return SandboxSpec(
        argv=("python", "-c", "print('hi')"),
        mounts=(Mount(tmp_path / "sub", "/submission"), Mount(scratch, "/scratch", True)),
        env=minimal_env({"PRISM_SEED": "1"}),
        limits=Limits(wall_s=30, memory_bytes=2**30, pids_max=99, disk_bytes=2**26,
                      output_bytes=4096),
        scratch=scratch, gpus=tuple(gpus), cpus=tuple(cpus), name="prism-test",
    )


def test_container_is_locked_down(tmp_path):
    kw = container_kwargs(_spec(tmp_path), "prism-challenge@sha256:" + "a" * 64)
    assert kw["image"].endswith("a" * 64)
    assert kw["network_mode"] == "none"
    assert kw["read_only"] is True
    assert kw["cap_drop"] == ["ALL"]
    assert kw["security_opt"] == ["no-new-privileges:true"]
    assert kw["user"] == "65534:65534"
    assert kw["pids_limit"] == 99
    assert kw["mem_limit"] == kw["memswap_limit"] == 2**30
    assert kw["tmpfs"]["/tmp"].startswith("rw,nosuid,nodev,size=")
    assert kw["volumes"][str(tmp_path / "sub")] == {"bind": "/submission", "mode": "ro"}
    assert kw["volumes"][str(tmp_path / "scratch")] == {"bind": "/scratch", "mode": "rw"}
    assert set(kw["environment"]) == set(minimal_env({"PRISM_SEED": "1"}))
    assert not any("KEY" in k or "SECRET" in k for k in kw["environment"])
    assert "device_requests" not in kw and "cpuset_cpus" not in kw
    ulimits = {u["Name"]: u["Hard"] for u in kw["ulimits"]}
    assert ulimits == {"core": 0, "fsize": 2**26, "nofile": 4096}


def test_gpus_are_requested_by_device_id_and_cores_as_a_cpuset(tmp_path):
    gpus = (GpuDevice("0", 0), GpuDevice("GPU-5e0c2d1a-3", 3))
    kw = container_kwargs(_spec(tmp_path, gpus=gpus, cpus=(4, 5, 6)), "img")
    (request,) = kw["device_requests"]
    assert request["DeviceIDs"] == ["0", "GPU-5e0c2d1a-3"]
    assert request["Capabilities"] == [["gpu"]]
    assert kw["cpuset_cpus"] == "4,5,6"


def test_none_backend_is_refused_in_production():
    with pytest.raises(ValueError, match="refused when mode is 'production'"):
        Settings(mode="production", sandbox={"backend": "none"})


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        make_backend("chroot")


def _engine():
    try:
        import docker

        client = docker.from_env(timeout=3)
        client.ping()
        return client
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return None


@pytest.mark.skipif(_engine() is None, reason="no Docker engine answers on this machine")
def test_real_container_has_no_network(tmp_path):  # pragma: no cover - needs an engine
    from prism_challenge.isolation.docker import DockerBackend

    spec = _spec(tmp_path)
    spec = SandboxSpec(**{**spec.__dict__, "argv": (
        "python", "-c",
        "import socket,os\ntry:\n socket.create_connection(('1.1.1.1',443),2); print('NET')\n"
        "except OSError: print('NONET', os.getuid())")})
    result = DockerBackend("python:3.11-slim", client=_engine()).run(spec)
    assert result.cause == "ok"
    assert "NONET 65534" in result.output
