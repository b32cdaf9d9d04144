"""A slot whose sandbox cannot compile is unhealthy: its probe compiles a tiny model with
torch.compile, so the host's broken toolchain is found before a miner's compiled model
crashes on it and is charged for it. Real bubblewrap; the toolchain is broken at the lowest
seam, the sandbox's environment (inductor's C++ compiler points nowhere)."""

from __future__ import annotations

import dataclasses

import pytest

from prism_challenge.config import Settings
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import Slot
from prism_challenge.isolation import make_backend


class EnvBackend:
    """The real bubblewrap backend, with extra environment in every spec; records each
    spec's PRISM_PROBE_COMPILE."""

    def __init__(self, **env: str) -> None:
        self.real = make_backend("bubblewrap")
        self.name = self.real.name
        self.env = env
        self.compiled: list[str] = []

    def run(self, spec, **kw):
        self.compiled.append(spec.env["PRISM_PROBE_COMPILE"])
        return self.real.run(dataclasses.replace(spec, env={**spec.env, **self.env}), **kw)


def check(tmp_path, backend, mode: str):
    settings = Settings(validator={"probe_compile": mode, "probe_timeout_s": 280.0})
    return HealthCheck(settings, backend, tmp_path / "health")


@pytest.mark.timeout(600)
def test_a_sandbox_that_cannot_compile_fails_the_probe_until_it_can(tmp_path):
    backend = EnvBackend(CXX="/nonexistent/c++")
    health = check(tmp_path, backend, "always")
    slot = Slot(0, (), (0,))
    first = health.check(slot)
    assert not first.ok
    assert first.reason.startswith("torch.compile fails in the sandbox on cpu: "), first.reason
    second = health.check(slot)  # a failed slot compiles again at its next probe
    assert not second.ok and backend.compiled == ["1", "1"]


def test_a_cpu_slot_compiles_only_when_asked(tmp_path):
    """auto compiles on slots with GPUs only; never, never: the cheap probe passes."""
    backend = EnvBackend()
    slot = Slot(0, (), (0,))
    for mode in ("auto", "never"):
        health = check(tmp_path / mode, backend, mode)
        assert not health.compiles(slot)
        assert health.check(slot).ok
    assert backend.compiled == ["0", "0"]
