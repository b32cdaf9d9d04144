import math

import pytest

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry.allocation import allocate, score
from prism_challenge.registry.ledger import apply
from prism_challenge.registry.state import RegistryState


def _state(cfg, *specs):
    state = RegistryState()
    for spec, origin, importance in specs:
        apply(state, "hypothesis", {"spec": spec, "origin": origin, "importance": importance}, cfg)
    return state


OPT = {"kind": "single", "axis": "optimizer", "treatment": "muon", "control": "adamw"}
NORM = {"kind": "single", "axis": "norm", "treatment": "rmsnorm", "control": "layernorm"}
POS = {"kind": "single", "axis": "position", "treatment": "rope", "control": "learned"}


def test_softmax_shares_by_hand():
    cfg = RegistrySettings(temperature=0.5)
    state = _state(cfg, (OPT, "seed", 0.8), (NORM, "seed", 0.4))
    a = allocate(state, cfg)
    # fresh claims: information value 1, so scores are the importances
    assert a.scores == {"H001": pytest.approx(0.8), "H002": pytest.approx(0.4)}
    e1, e2 = math.exp(0.8 / 0.5), math.exp(0.4 / 0.5)
    assert a.shares["H001"] == pytest.approx(e1 / (e1 + e2))
    assert a.shares["H002"] == pytest.approx(e2 / (e1 + e2))
    assert sum(a.shares.values()) == pytest.approx(1.0)


def test_llm_claims_are_discounted_by_the_credibility_ramp():
    cfg = RegistrySettings()
    state = _state(cfg, (OPT, "llm", 0.8))
    assert score(state.hypotheses["H001"], cfg) == pytest.approx(0.8 * 0.25)
    h = state.hypotheses["H001"]
    h.wins, h.losses = 3, 3  # n = 6: credibility 0.625, P(theta>1/2) = 1/2
    assert score(h, cfg) == pytest.approx(0.8 * 0.625)


def test_indecision_streak_halves_the_score_every_half_life():
    cfg = RegistrySettings(indecision_half_life=10)
    state = _state(cfg, (OPT, "seed", 1.0))
    h = state.hypotheses["H001"]
    h.wins, h.losses, h.streak = 10, 10, 20
    assert score(h, cfg) == pytest.approx(1.0 * 0.25)


def test_decision_sprint_takes_its_share():
    cfg = RegistrySettings(sprint_share=0.5, sprint_trigger=0.75)
    state = _state(cfg, (OPT, "seed", 0.5), (NORM, "seed", 0.5), (POS, "seed", 0.5))
    state.hypotheses["H002"].wins = 8  # Beta(10, 2): P(theta > 0.6) ~ 0.97 but n = 8 < 10
    a = allocate(state, cfg)
    assert a.sprint == "H002"
    assert a.shares["H002"] == pytest.approx(0.5)
    assert a.shares["H001"] == pytest.approx(0.25) and a.shares["H003"] == pytest.approx(0.25)
    state.hypotheses["H002"].streak = cfg.sprint_max_streak + 1  # idled: no more sprinting
    assert allocate(state, cfg).sprint is None


def test_settled_and_archived_claims_get_no_share():
    cfg = RegistrySettings()
    state = _state(cfg, (OPT, "seed", 0.5), (NORM, "seed", 0.5))
    state.hypotheses["H001"].status = "supported"
    assert allocate(state, cfg).shares == {"H002": pytest.approx(1.0)}
