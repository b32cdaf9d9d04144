"""The brief's JSON: open test cells carry what to copy, leaning and recipe come from evidence."""

import pytest

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry.directives import program_json
from prism_challenge.registry.evidence import parse_stratum, stratum_of
from prism_challenge.registry.hypotheses import SingleFactor
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.state import RegistryState

ARMS = {"optimizer": "muon", "norm": "rmsnorm", "params": "1e+06-1e+07"}
OPT = SingleFactor(axis="optimizer", treatment="muon", control="adamw")


def test_stratum_is_every_other_axis_or_the_configured_ones():
    assert stratum_of(OPT, ARMS, ["*"]) == "norm=rmsnorm,params=1e+06-1e+07"
    assert stratum_of(OPT, ARMS, ["params", "optimizer"]) == "params=1e+06-1e+07"
    assert parse_stratum("norm=rmsnorm,params=1e+06-1e+07") == {
        "norm": "rmsnorm", "params": "1e+06-1e+07"}
    assert parse_stratum("") == {}


def _observe(state, cfg, hotkey, bpb, opt):
    reading = {"arms": {"optimizer": opt, "norm": "rmsnorm"}, "raw": {"optimizer": opt}}
    apply(state, "observation", {"hotkey": hotkey, "bpb": bpb, "eligible": True,
                                 "reading": reading}, cfg)


def test_open_cell_tells_what_to_copy_and_leaning_follows_evidence():
    cfg = RegistrySettings()
    state = RegistryState()
    apply(state, "hypothesis", {"spec": OPT.model_dump(), "importance": 0.5}, cfg)
    _observe(state, cfg, "a", 2.0, "adamw")
    doc = program_json(state, cfg)
    (row,) = doc["explore"]
    assert row["cells"] == {"T": {"optimizer": "muon"}, "C": {"optimizer": "adamw"}}
    assert row["open"] == [{"stratum": {"norm": "rmsnorm"}, "cell": "T",
                            "set": {"optimizer": "muon"}}]
    assert doc["open_cells"] == [{"hypothesis": "H001", **row["open"][0]}]
    assert doc["leaning"] == {} and doc["recipe"] == {}
    _observe(state, cfg, "b", 1.9, "muon")  # completes the pair: one win
    _observe(state, cfg, "c", 2.0, "adamw")
    _observe(state, cfg, "d", 1.9, "muon")  # a second win: Pr(theta > 1/2) = 0.8125
    doc = program_json(state, cfg)
    assert doc["explore"][0]["n"] == 2
    assert doc["leaning"] == {"optimizer": "muon"}
    assert doc["open_cells"] == []


def test_a_run_is_evidence_for_one_claim_only():
    """Two claims could use the same runs; the run counts once, for the claim whose partner
    waited longest, and its partners leave every queue."""
    cfg = RegistrySettings()
    state = RegistryState()
    for spec in (OPT, SingleFactor(axis="norm", treatment="rmsnorm", control="layernorm")):
        apply(state, "hypothesis", {"spec": spec.model_dump(), "importance": 0.5}, cfg)

    def run(hotkey, bpb, opt, norm):
        reading = {"arms": {"optimizer": opt, "norm": norm}, "raw": {}}
        apply(state, "observation", {"hotkey": hotkey, "bpb": bpb, "eligible": True,
                                     "reading": reading}, cfg)

    run("a", 2.0, "adamw", "layernorm")  # waits in H001 C and H002 C
    run("b", 2.1, "adamw", "rmsnorm")  # completes H002 with a (oldest partner): a loss
    run("c", 1.9, "muon", "layernorm")  # a is gone: waits, no evidence for H001
    h1, h2 = state.hypotheses["H001"], state.hypotheses["H002"]
    assert (h2.wins, h2.losses) == (0, 1) and h1.n == 0
    waiting = sorted(e[2] for q in state.queues.values() for e in q)
    assert waiting == [3, 3]  # only c waits (in H001 T and H002 C); a and b were used


def test_grid_reuses_runs_of_the_pair_claims_nested_in_it():
    cfg = RegistrySettings()
    state = RegistryState()
    hi, lo = "0.001-0.01", "0.0001-0.001"
    grid = {"kind": "interaction", "axis_a": "optimizer", "a1": "muon", "a0": "adamw",
            "axis_b": "lr", "b1": hi, "b0": lo}
    for spec in (OPT.model_dump(), grid):
        apply(state, "hypothesis", {"spec": spec, "importance": 0.5}, cfg)
    y = {("muon", hi): 1.80, ("adamw", lo): 2.10, ("muon", lo): 2.00, ("adamw", hi): 2.05}
    for k, ((opt, lr), bpb) in enumerate(y.items()):
        reading = {"arms": {"optimizer": opt, "lr": lr, "norm": "rmsnorm"}, "raw": {}}
        apply(state, "observation", {"hotkey": f"k{k}", "bpb": bpb, "eligible": True,
                                     "reading": reading}, cfg)
    pair, inter = state.hypotheses["H001"], state.hypotheses["H002"]
    assert (pair.wins, pair.losses) == (2, 0)  # muon wins at lr lo (by 0.10) and hi (0.25)
    assert (inter.wins, inter.losses) == (1, 0)  # I = 1.8 - 2.0 - 2.05 + 2.1 = -0.15
    assert inter.gain_sum == pytest.approx(0.15)
    assert all(not q for q in state.queues.values())  # every run used, none waits
