"""LLM proposals in a research cycle, through the real `openai` client against a local
OpenAI-compatible server: the gates, and new axes that become canaries."""

from prism_challenge.config.settings import RegistrySettings
from prism_challenge.registry import Registry, run_cycle
from tests.registry.conftest import OPT, obs

LR = {"spec": {"kind": "threshold", "axis": "lr", "threshold": 1e-3}, "importance": 0.6}


def _h(spec, importance=0.5, rationale=""):
    return {"spec": spec, "importance": importance, "rationale": rationale}


def test_gates_let_only_new_valid_important_claims_in(store, client, llm, llm_settings):
    reg = Registry(store, RegistrySettings(max_proposals=6, cycle_scored=1), seeds=[OPT, LR])
    reg.observe(obs(0, 2.0))
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
    result = run_cycle(reg, client, llm_settings)
    assert result.error is None
    assert result.accepted == ["H003"]
    reasons = [why for _, why in result.refused]
    assert reasons[0].startswith("duplicate: single|optimizer|adamw|muon")
    assert reasons[1] == "near duplicate of H002"
    assert reasons[2] == "importance 0.1 < 0.15"
    assert reasons[3] == "axes: unknown axis 'heads'"
    assert reasons[4].startswith("schema:")
    assert len(reasons) == 5
    h = reg.state().hypotheses["H003"]
    assert h.origin == "llm" and h.spec.axis == "norm"
    sent = llm.requests[0]
    assert len(llm.requests) == 1  # not stalled: no question about axes
    assert sent["model"] == "stub-model"
    assert sent["response_format"]["type"] == "json_schema"
    brief = llm.user_doc(0)
    assert brief["wanted"] == 6 and [x["id"] for x in brief["hypotheses"]] == ["H001", "H002"]
    # the cycle's journal entry holds every verdict, accepted and refused
    (entry,) = reg.journal()[1]
    assert entry["kind"] == "cycle" and entry["cycle"] == 1 and entry["trigger"] == "scored"
    assert [v["accepted"] for v in entry["proposed"]] == ["H003"] + [None] * 5
    assert entry["proposed"][2]["reason"] == "near duplicate of H002"
    assert entry["new"] == [
        {"id": "H001", "statement": "optimizer=muon gives lower bpb than optimizer=adamw",
         "origin": "seed"},
        {"id": "H002", "statement": "lr >= 0.001 gives lower bpb than the other side",
         "origin": "seed"},
        {"id": "H003", "statement": "norm=rmsnorm gives lower bpb than norm=layernorm",
         "origin": "llm"},
    ]


CANARY_AXIS = {
    "spec": {"name": "warmup", "kind": "categorical", "values": ["none", "short", "long"],
             "description": "learning-rate warm-up"},
    "treatment": "short", "control": "none", "rationale": "warm-up stabilises early steps",
}


def _stall(reg, start, n, best=2.0):
    for i in range(start, start + n):
        reg.observe(obs(i, best + 0.01))


def _adopt_canary(store, client, llm, llm_settings):
    cfg = RegistrySettings(stall_window=5, canary_n=10, min_n=10, cycle_scored=1)
    reg = Registry(store, cfg, seeds=[OPT])
    reg.observe(obs(0, 2.0))
    llm.queue({"hypotheses": []})
    run_cycle(reg, client, llm_settings)
    assert len(llm.requests) == 1  # not stalled: axes are not asked for
    _stall(reg, 1, 5)  # stall cycle 1
    llm.queue({"hypotheses": []})
    llm.queue({"axes": [CANARY_AXIS]})
    result = run_cycle(reg, client, llm_settings)
    assert result.accepted == ["warmup"] and len(llm.requests) == 3
    assert "warmup" not in reg.state().axis_status  # once is not enough
    reg.observe(obs(6, 2.01))
    reworded = {**CANARY_AXIS, "spec": {**CANARY_AXIS["spec"], "description": "other words"}}
    llm.queue({"hypotheses": []})
    llm.queue({"axes": [reworded, {**CANARY_AXIS, "spec": {"name": "bad", "kind": "float"}}]})
    result = run_cycle(reg, client, llm_settings)
    assert result.accepted == ["warmup"]  # the same stall cycle: still one
    assert result.refused[0][1].startswith("schema:")
    _stall(reg, 7, 4)  # stall cycle 2
    llm.queue({"hypotheses": []})
    llm.queue({"axes": [reworded]})
    run_cycle(reg, client, llm_settings)
    state = reg.state()
    assert state.axis_status["warmup"] == "canary"
    canary = state.hypotheses["H002"]
    assert canary.canary_axis == "warmup" and canary.origin == "canary"
    _, _, doc = reg.program()
    row = next(r for r in doc["explore"] if r["id"] == "H002")
    assert row["canary"] and row["share"] == cfg.canary_share
    entry = reg.journal(limit=1)[1][0]
    assert entry["axes_proposed"][0]["reason"] == "adopted as a canary (H002)"
    assert entry["axes"] == [{"name": "warmup", "status": ["new", "canary"]}]
    return reg


def test_new_axis_needs_two_stall_cycles_then_is_a_canary(store, client, llm, llm_settings):
    _adopt_canary(store, client, llm, llm_settings)


def _canary_runs(reg, start, pairs, effect):
    for k in range(pairs):
        i = start + 2 * k
        wobble = 0.001 * ((i * 7919) % 7 - 3)
        reg.observe(obs(i, 2.0 - effect + wobble, declared={"warmup": "short"}))
        reg.observe(obs(i + 1, 2.0 + wobble, declared={"warmup": "none"}))


def test_canary_with_an_effect_is_promoted(store, client, llm, llm_settings):
    reg = _adopt_canary(store, client, llm, llm_settings)
    _canary_runs(reg, 100, 10, effect=0.05)
    state = reg.state()
    assert state.axis_status["warmup"] == "active"
    assert state.hypotheses["H002"].canary_axis is None
    assert state.hypotheses["H002"].status == "supported"


def test_canary_without_an_effect_is_reverted(store, client, llm, llm_settings):
    reg = _adopt_canary(store, client, llm, llm_settings)
    _canary_runs(reg, 100, 10, effect=0.0)
    state = reg.state()
    assert state.axis_status["warmup"] == "reverted"
    assert state.hypotheses["H002"].archived
    assert "canary reverted" in state.hypotheses["H002"].archive_reason
    assert "warmup" not in {a.name for a in state.schema()}
    llm.queue({"hypotheses": []})
    llm.queue({"axes": []})  # still stalled: axes are asked for again
    assert run_cycle(reg, client, llm_settings).error is None
    entry = reg.journal(limit=1)[1][0]
    assert entry["axes"] == [{"name": "warmup", "status": ["canary", "reverted"]}]
    moved = {m["id"]: m for m in entry["moved"]}
    assert moved["H002"]["status"] == ["active", "active/archived"]
    assert moved["H002"]["contrasts"] == [0, 10]
    runs = moved["H002"]["runs"]
    assert len(runs) == 10 and all(len(r["submissions"]) == 2 for r in runs)
    assert runs[0]["submissions"] == [101, 100]  # the run that completed it, then its partner


def test_a_misspelt_axis_or_arm_is_refused_with_the_close_names(store, client, llm,
                                                                 llm_settings):
    """A proposer that misspells an axis or an arm hears the names it probably meant, in the
    reason the journal keeps (an unrelated name gets the plain refusal)."""
    reg = Registry(store, RegistrySettings(max_proposals=4, cycle_scored=1), seeds=[OPT])
    reg.observe(obs(0, 2.0))
    llm.queue({"hypotheses": [
        _h({"kind": "single", "axis": "optimzer", "treatment": "muon", "control": "adamw"}),
        _h({"kind": "single", "axis": "norm", "treatment": "rmsnrom", "control": "layernorm"}),
        _h({"kind": "interaction", "axis_a": "norm", "a1": "rmsnorm", "a0": "layernorm",
            "axis_b": "optimizer", "b1": "muon", "b0": "muon"}),
        _h({"kind": "single", "axis": "heads", "treatment": "8", "control": "4"}),
    ]})
    result = run_cycle(reg, client, llm_settings)
    assert result.error is None and result.accepted == []
    reasons = [why for _, why in result.refused]
    arms = reg.state().schema()
    norm_arms = next(a for a in arms if a.name == "norm").arms
    opt_arms = next(a for a in arms if a.name == "optimizer").arms
    assert reasons == [
        "axes: unknown axis 'optimzer'; did you mean 'optimizer'?",
        f"axes: norm: need two different arms of {norm_arms}; 'rmsnrom': did you mean "
        "'rmsnorm'?",
        f"axes: optimizer: need two different arms of {opt_arms}",
        "axes: unknown axis 'heads'",
    ]
