"""A run's detail names the limit it hit in GiB/MiB, as the miner's one-line errors do, never
as a raw byte count ("memory limit of 8.0 GiB reached", not "8589934592 bytes"): both local
backends (supervise) and Docker."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from prism_challenge.isolation.docker import DockerBackend
from prism_challenge.isolation.spec import Limits, Mount, SandboxSpec, minimal_env
from prism_challenge.isolation.supervise import _oom_cause, supervise

GIB = 2**30


def _limits(**kw) -> Limits:
    return Limits(**{"wall_s": 30, "memory_bytes": 8 * GIB, "pids_max": 64,
                     "disk_bytes": 2**20, "output_bytes": 1024, **kw})


class _Cgroup:
    def __init__(self, peak: int, hits: int) -> None:
        self.peak, self.hits = peak, hits

    def peak_memory(self) -> int:
        return self.peak

    def memory_limit_hits(self) -> int:
        return self.hits


def test_an_oom_kill_names_the_memory_limit_in_gib():
    assert _oom_cause(_Cgroup(8 * GIB, 1), _limits()) == (
        "memory", "memory limit of 8.0 GiB reached")
    assert _oom_cause(_Cgroup(GIB, 0), _limits()) == (
        "host_memory", "killed by the host's OOM killer while under its own limit of 8.0 GiB")


def test_a_full_scratch_space_names_its_limit_in_mib(tmp_path):
    program = (f"import time\n"
               f"for i in range(2):\n"
               f"    open({str(tmp_path)!r} + f'/f{{i}}', 'wb').write(b'x' * (768 << 10))\n"
               f"time.sleep(20)\n")
    result = supervise([sys.executable, "-c", program], _limits(), tmp_path,
                       name="prism-test-disk")
    assert (result.cause, result.detail) == ("disk", "scratch space over 1.0 MiB")


def test_an_output_flood_names_how_much_in_human_units(tmp_path):
    program = ("import sys, time\nsys.stdout.write('x' * (1 << 20)); sys.stdout.flush()\n"
               "time.sleep(20)\n")
    result = supervise([sys.executable, "-c", program], _limits(), tmp_path,
                       name="prism-test-output")
    assert result.cause == "output"
    assert re.fullmatch(r"wrote over \d+\.\d (KiB|MiB) of output", result.detail), result.detail


class _Container:
    def __init__(self, status: str, oom: bool) -> None:
        self.status, self.attrs = status, {"State": {"OOMKilled": oom}}

    def reload(self) -> None:
        pass

    def kill(self) -> None:
        self.status = "exited"

    def wait(self, timeout: float):
        return {"StatusCode": 137}

    def logs(self, **kw) -> bytes:
        return b""

    def remove(self, force: bool) -> None:
        pass


class _Client:
    def __init__(self, container: _Container) -> None:
        self.containers = self
        self.container = container

    def run(self, **kw) -> _Container:
        return self.container


def _docker_spec(tmp_path: Path) -> SandboxSpec:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return SandboxSpec(argv=("python", "-c", "pass"), mounts=(Mount(scratch, "/scratch", True),),
                       env=minimal_env(), limits=_limits(), scratch=scratch, name="prism-test")


def test_docker_names_the_memory_limit_in_gib(tmp_path):
    backend = DockerBackend("img", client=_Client(_Container("exited", oom=True)))
    result = backend.run(_docker_spec(tmp_path))
    assert (result.cause, result.detail) == ("memory", "memory limit of 8.0 GiB reached")


def test_docker_names_the_scratch_limit_in_mib(tmp_path):
    spec = _docker_spec(tmp_path)
    (spec.scratch / "big").write_bytes(b"x" * (2 << 20))
    result = DockerBackend("img", client=_Client(_Container("running", oom=False))).run(spec)
    assert (result.cause, result.detail) == ("disk", "scratch space over 1.0 MiB")
