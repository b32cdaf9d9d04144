"""The benchmark's simulator still runs end to end on a tiny, seeded swarm: populations,
scripted proposals through the real gates, and a farmer of near-duplicates."""

import importlib.util
from pathlib import Path

from prism_challenge.config.settings import RegistrySettings

SIM = Path(__file__).resolve().parents[2] / "benchmarks" / "registry_sim.py"


def test_tiny_directed_swarm_learns_the_optimizer_claim():
    spec = importlib.util.spec_from_file_location("registry_sim", SIM)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    out = sim.run(seed=0, n=250, directed_fraction=0.75, noise=0.02, refresh=5,
                  cfg=RegistrySettings())
    assert out["status"][0] == "supported"  # muon beats adamw by 0.04 bpb on the surface
    assert out["status"][3] in {"refuted", "active"}  # bf16 hurts: never supported
    assert not out["ever_supported"][3]
    assert 1 <= out["first_best"] <= 251
    assert out["cycles"] == 5  # a research cycle every 50 scored submissions
    assert out["origin"].count("llm") >= 1  # the scripted proposer's claims passed the gates
    paid, paid_to_copies, copies_used, copies = out["credit"]
    assert paid > 0 and copies > 0 and paid_to_copies == 0.0
