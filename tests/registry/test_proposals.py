"""LLM proposals through the real `openai` client against a local stub server."""

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry import Registry
from prism_challenge.registry.proposals import propose_axes, propose_hypotheses
from tests.registry.conftest import obs

OPT = {"spec": {"kind": "single", "axis": "optimizer", "treatment": "muon", "control": "adamw"},
       "importance": 0.8}
LR = {"spec": {"kind": "threshold", "axis": "lr", "threshold": 1e-3}, "importance": 0.6}


def _h(spec, importance=0.5, rationale=""):
    return {"spec": spec, "importance": importance, "rationale": rationale}


def test_gates_let_only_new_valid_important_claims_in(store, client, llm):
    reg = Registry(store, RegistrySettings(max_proposals=6), seeds=[OPT, LR])
    good = _h({"kind": "single", "axis": "norm", "treatment": "rmsnorm", "control": "layernorm"})
    llm.queue({"hypotheses": [
        good,
        _h({"kind": "single", "axis": "optimizer", "treatment": "adamw", "control": "muon"}),
        _h({"kind": "threshold", "axis": "lr", "threshold": 1.1e-3}),  # near duplicate
        _h({"kind": "single", "axis": "position", "treatment": "rope", "control": "alibi"}, 0.1),
        _h({"kind": "single", "axis": "heads", "treatment": "8", "control": "4"}),
        {"spec": {"kind": "single", "axis": "norm"}, "importance": 0.9},  # schema
        good,  # past max_proposals: never read
    ]})
    report = propose_hypotheses(reg, client, "stub-model")
    assert report.error is None
    assert report.accepted == ["H003"]
    reasons = [why for _, why in report.rejected]
    assert reasons[0].startswith("duplicate: single|optimizer|adamw|muon")
    assert reasons[1] == "near duplicate of H002"
    assert reasons[2] == "importance 0.1 < 0.15"
    assert reasons[3] == "axes: unknown axis 'heads'"
    assert reasons[4].startswith("schema:")
    assert len(reasons) == 5
    h = reg.state().hypotheses["H003"]
    assert h.origin == "llm" and h.spec.axis == "norm"
    sent = llm.requests[0]
    assert sent["model"] == "stub-model"
    assert sent["response_format"]["type"] == "json_schema"


def test_llm_down_or_garbage_adds_nothing(store, client, llm):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    llm.fail_status = 503
    assert propose_hypotheses(reg, client, "m").error.startswith("InternalServerError")
    llm.fail_status = None
    llm.answers.append("this is not json")
    assert propose_hypotheses(reg, client, "m").error.startswith("JSONDecodeError")
    assert list(reg.state().hypotheses) == ["H001"]


CANARY_AXIS = {
    "spec": {"name": "warmup", "kind": "categorical", "values": ["none", "short", "long"],
             "description": "learning-rate warm-up"},
    "treatment": "short", "control": "none", "rationale": "warm-up stabilises early steps",
}


def _stall(reg, start, n, best=2.0):
    for i in range(start, start + n):
        reg.observe(obs(i, best + 0.01))


def _adopt_canary(store, client, llm):
    cfg = RegistrySettings(stall_window=5, canary_n=10, min_n=10)
    reg = Registry(store, cfg, seeds=[OPT])
    llm.queue({"axes": [CANARY_AXIS]})
    assert propose_axes(reg, client, "m").error == "not stalled"
    reg.observe(obs(0, 2.0))
    _stall(reg, 1, 5)  # stall cycle 1
    report = propose_axes(reg, client, "m")
    assert report.accepted == ["warmup"]
    assert "warmup" not in reg.state().axis_status  # once is not enough
    reworded = {**CANARY_AXIS, "spec": {**CANARY_AXIS["spec"], "description": "other words"}}
    llm.queue({"axes": [reworded, {**CANARY_AXIS, "spec": {"name": "bad", "kind": "float"}}]})
    assert propose_axes(reg, client, "m").accepted == ["warmup"]  # same cycle: still 1
    _stall(reg, 6, 5)  # stall cycle 2
    llm.queue({"axes": [reworded]})
    propose_axes(reg, client, "m")
    state = reg.state()
    assert state.axis_status["warmup"] == "canary"
    canary = state.hypotheses["H002"]
    assert canary.canary_axis == "warmup" and canary.origin == "canary"
    _, _, doc = reg.program()
    row = next(r for r in doc["explore"] if r["id"] == "H002")
    assert row["canary"] and row["share"] == cfg.canary_share
    return reg


def test_new_axis_needs_two_stall_cycles_then_is_a_canary(store, client, llm):
    _adopt_canary(store, client, llm)


def _canary_runs(reg, start, pairs, effect):
    for k in range(pairs):
        i = start + 2 * k
        wobble = 0.001 * ((i * 7919) % 7 - 3)
        reg.observe(obs(i, 2.0 - effect + wobble, declared={"warmup": "short"}))
        reg.observe(obs(i + 1, 2.0 + wobble, declared={"warmup": "none"}))


def test_canary_with_an_effect_is_promoted(store, client, llm):
    reg = _adopt_canary(store, client, llm)
    _canary_runs(reg, 100, 10, effect=0.05)
    state = reg.state()
    assert state.axis_status["warmup"] == "active"
    assert state.hypotheses["H002"].canary_axis is None
    assert state.hypotheses["H002"].status == "supported"


def test_canary_without_an_effect_is_reverted(store, client, llm):
    reg = _adopt_canary(store, client, llm)
    _canary_runs(reg, 100, 10, effect=0.0)
    state = reg.state()
    assert state.axis_status["warmup"] == "reverted"
    assert state.hypotheses["H002"].archived
    assert "canary reverted" in state.hypotheses["H002"].archive_reason
    assert "warmup" not in {a.name for a in state.schema()}
