"""On a real GPU: a GPU slot's health probe compiles a tiny model with torch.compile (triton)
in the sandbox, passes, and does not compile again at the slot's next probe."""

from __future__ import annotations

from prism_challenge.config import Settings
from prism_challenge.hardware.devices import discover_gpus, host_cpus
from prism_challenge.hardware.health import HealthCheck
from prism_challenge.hardware.slots import plan_slots
from prism_challenge.isolation import make_backend


def test_a_gpu_slots_probe_compiles_once_and_passes(tmp_path):
    settings = Settings(validator={"probe_timeout_s": 300.0})
    slot = plan_slots(settings, discover_gpus([]), host_cpus())[0]
    health = HealthCheck(settings, make_backend("bubblewrap"), tmp_path)
    assert health.compiles(slot)
    first = health.check(slot)
    assert first.ok, first.reason
    assert "torch.compile ok on cuda:0" in first.notes
    assert not health.compiles(slot)
    second = health.check(slot)
    assert second.ok and "torch.compile ok on cuda:0" not in second.notes
