"""The brief's JSON: open test cells carry what to copy, leaning and recipe come from evidence."""

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
