"""The benchmark's simulator still runs end to end on a tiny, seeded swarm."""

import importlib.util
from pathlib import Path

from prism_challenge.config.settings import RegistrySettings

SIM = Path(__file__).resolve().parents[2] / "benchmarks" / "registry_sim.py"


def test_tiny_directed_swarm_learns_the_optimizer_claim():
    spec = importlib.util.spec_from_file_location("registry_sim", SIM)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    out = sim.run(seed=0, n=150, directed_fraction=0.75, noise=0.02, refresh=5,
                  cfg=RegistrySettings())
    assert out["status"][0] == "supported"  # muon beats adamw by 0.04 bpb on the surface
    assert out["status"][3] in {"refuted", "active"}  # bf16 hurts: never supported
    assert not out["ever_supported"][3]
    assert 1 <= out["first_best"] <= 151
