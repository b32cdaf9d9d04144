"""Research credit: paid for matched evidence on open claims, one paid run per design and
hotkey, capped per hotkey per window. Near-duplicates earn nothing beyond the first."""

import pytest

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry import Registry, credit_table
from tests.registry.conftest import NORM, OPT, feed, obs


def _points(reg) -> dict[str, float]:
    return {r["hotkey"]: r["points"] for r in reg.credit_table()}


def test_every_run_of_a_contrast_on_an_open_claim_earns_once(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    feed(reg, 24)
    decided_at = reg.state().hypotheses["H001"].decided_at
    assert decided_at == 20  # the 10th pair decided it; pairs 11 and 12 earn nothing
    points = _points(reg)
    decider = f"hk{decided_at - 1}"
    assert points.pop(decider) == 4.0  # its run in the pair + 3 for the decision
    assert points == {f"hk{i}": 1.0 for i in range(decided_at - 1)}
    credits = reg.research_credits()
    assert sum(credits.values()) == pytest.approx(1.0)
    assert credits[decider] == pytest.approx(4 / 23) and credits["hk0"] == pytest.approx(1 / 23)


def test_partners_scored_before_the_claim_existed_are_not_paid(store):
    reg = Registry(store, RegistrySettings(), seeds=[])
    reg.observe(obs(0, 2.05, hotkey="early", opt="adamw"))
    reg.add_hypothesis({**OPT, "origin": "seed"})
    reg.observe(obs(1, 2.0, hotkey="late", opt="muon"))
    assert reg.state().hypotheses["H001"].gain_n == 1  # the early run was the partner
    assert _points(reg) == {"late": 1.0}


def test_a_tie_is_evidence_and_earns_like_a_win(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    reg.observe(obs(0, 2.0, hotkey="a", opt="adamw"))
    reg.observe(obs(1, 2.0005, hotkey="b", opt="muon"))
    h = reg.state().hypotheses["H001"]
    assert (h.ties, h.n) == (1, 0)
    assert _points(reg) == {"a": 1.0, "b": 1.0}


def test_near_duplicate_farming_earns_nothing_beyond_the_first(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    # the farmer sends the same adamw design six times; six honest miners then send muon
    for i in range(6):
        reg.observe(obs(i, 2.05 + 0.0001 * i, hotkey="farmer", opt="adamw"))
    for i in range(6):
        reg.observe(obs(10 + i, 2.0, hotkey=f"honest{i}", opt="muon"))
    h = reg.state().hypotheses["H001"]
    assert h.gain_n == 6  # all six copies were matched as evidence...
    points = _points(reg)
    assert points["farmer"] == 1.0  # ...and only the first was paid
    assert all(points[f"honest{i}"] == 1.0 for i in range(6))
    # completing contrasts with copies of one design is the same slot too
    for i in range(6):
        reg.observe(obs(20 + i, 2.05, hotkey=f"other{i}", opt="adamw"))
    for i in range(6):
        reg.observe(obs(30 + i, 2.05 - 0.0001 * i, hotkey="farmer2", opt="muon"))  # ties
    assert reg.state().hypotheses["H001"].gain_n == 12
    assert _points(reg)["farmer2"] == 1.0


def test_a_copy_serving_another_claim_earns_nothing_either(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT, NORM])
    layer = {"norm": "layernorm"}
    for i in range(2):  # two copies of one design: adamw + layernorm
        reg.observe(obs(i, 2.05, hotkey="farmer", opt="adamw", declared=layer))
    reg.observe(obs(5, 2.0, hotkey="a", opt="muon", declared=layer))  # pairs in H001
    reg.observe(obs(6, 2.0, hotkey="b", opt="adamw", declared={"norm": "rmsnorm"}))  # H002
    state = reg.state()
    assert (state.hypotheses["H001"].gain_n, state.hypotheses["H002"].gain_n) == (1, 1)
    assert _points(reg) == {"farmer": 1.0, "a": 1.0, "b": 1.0}
    # a different design of the same hotkey is another experiment, and is paid
    reg.observe(obs(7, 2.05, hotkey="farmer", opt="adamw", declared={"norm": "rmsnorm"}))
    reg.observe(obs(8, 2.0, hotkey="c", opt="muon", declared={"norm": "rmsnorm"}))
    assert _points(reg)["farmer"] == 2.0


def test_credit_is_capped_per_hotkey_per_window(store):
    cfg = RegistrySettings(credit_cap=2.5, credit_window=40)
    reg = Registry(store, cfg, seeds=[OPT])
    # the prolific hotkey fills a new stratum each time (other batch sizes and lrs)
    designs = [(batch, lr) for batch in (4, 16, 64, 256) for lr in (3e-5, 3e-4)]
    for i, (batch, lr) in enumerate(designs):
        reg.observe(obs(2 * i, 2.05, hotkey=f"partner{i}", opt="adamw", batch=batch, lr=lr))
        reg.observe(obs(2 * i + 1, 2.0, hotkey="prolific", opt="muon", batch=batch, lr=lr))
    rows = {r["hotkey"]: r for r in credit_table(reg.state(), cfg)}
    assert rows["prolific"]["points"] == 2.5 and rows["prolific"]["capped"]
    assert rows["prolific"]["runs"] == 3  # 1 + 1 + the 0.5 left under the cap
    assert not rows["partner0"]["capped"]
    for i in range(40):  # the window moves on: old grants leave, the hotkey earns again
        reg.observe(obs(100 + i, 3.0, hotkey=f"idle{i}", opt="sgd"))
    assert "prolific" not in _points(reg)
    reg.observe(obs(200, 2.05, hotkey="partner", opt="adamw"))
    reg.observe(obs(201, 2.0, hotkey="prolific", opt="muon"))
    assert _points(reg)["prolific"] == 1.0
