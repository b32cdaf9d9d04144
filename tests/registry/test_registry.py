"""The store-backed registry: evidence per claim, replay determinism, bad input, journal."""

import hashlib
import math

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select

from prism_challenge.config.settings import RegistrySettings, Settings
from prism_challenge.registry import LedgerError, Observation, Registry, replay
from prism_challenge.registry.directives import CHARTER, END, START, mutable_block
from prism_challenge.storage import Store
from prism_challenge.storage.tables import RegistryEvent
from tests.registry.conftest import NORM, OPT, feed, obs


def test_seeds_are_ledger_events_and_listed(store):
    reg = Registry(store, Settings())
    hyps = reg.hypotheses()
    assert len(hyps) == 8 and {h["origin"] for h in hyps} == {"seed"}
    assert Registry(store, Settings()).hypotheses() == hyps  # reopening does not reseed
    with store.session() as s:
        assert s.execute(select(func.count()).select_from(RegistryEvent)).scalar() == 8


def test_a_true_effect_is_supported_and_only_its_claim_moves(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT, NORM])
    feed(reg, 24)
    opt, norm = reg.hypotheses()
    assert (opt["wins"], opt["losses"]) == (12, 0)  # 24 runs -> 12 disjoint matched pairs
    assert opt["status"] == "supported"
    assert opt["effect"]["n"] == 12
    assert opt["effect"]["mean_gain_bpb"] == pytest.approx(0.05, abs=0.006)
    assert opt["posterior"]["a"] == 14 and opt["posterior"]["b"] == 2
    assert norm["n"] == 0  # nobody varied the norm: no evidence for it at all


def test_a_reversed_effect_is_refuted_and_archived(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    feed(reg, 24, effect=-0.05)
    (opt,) = reg.hypotheses()
    assert opt["status"] == "refuted" and opt["archived"]
    assert reg.hypotheses(include_archived=False) == []
    _, _, doc = reg.program()
    assert doc["recipe"] == {"optimizer": "adamw"}


def test_runs_of_one_hotkey_never_make_evidence(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    for i in range(20):
        reg.observe(obs(i, 2.0 - 0.05 * (i % 2), hotkey="sybil",
                        opt="muon" if i % 2 else "adamw"))
    assert reg.hypotheses()[0]["n"] == 0


def test_ineligible_runs_are_kept_but_never_evidence(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    for i in range(10):
        reg.observe(obs(i, 0.1, eligible=False, opt="muon" if i % 2 else "adamw"))
    state = reg.state()
    assert state.n_obs == 10 and state.n_eligible == 0 and state.hypotheses["H001"].n == 0


def test_observe_is_idempotent_per_submission(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    reg.observe(obs(1, 2.0))
    reg.observe(obs(1, 1.0))
    assert reg.state().n_obs == 1


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_bad_observation_is_refused_and_stores_nothing(store, bad):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    before = reg.program()[1]
    with pytest.raises(ValidationError):
        reg.observe(obs(1, bad))
    with pytest.raises(ValidationError):
        reg.observe({"submission_id": 2, "hotkey": "", "digest": "d", "bpb": 2.0,
                     "eligible": True, "accepted_at": 0})
    assert reg.state().n_obs == 0 and reg.program()[1] == before


def test_refused_hypothesis_stores_nothing(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    mirrored = {"spec": {"kind": "single", "axis": "optimizer", "treatment": "adamw",
                         "control": "muon"}}
    for payload in (mirrored, {"spec": {"kind": "single", "axis": "nope", "treatment": "a",
                                        "control": "b"}}, {"spec": {"kind": "weird"}}):
        with pytest.raises(LedgerError):
            reg.add_hypothesis(payload)
    assert list(reg.state().hypotheses) == ["H001"]


def test_replaying_the_ledger_gives_the_same_digest(tmp_path):
    cfg = RegistrySettings(checkpoint_every=10)
    a = Registry(Store(f"sqlite:///{tmp_path / 'a.db'}"), cfg, seeds=[OPT, NORM])
    b = Registry(Store(f"sqlite:///{tmp_path / 'b.db'}"), cfg, seeds=[OPT, NORM])
    feed(a, 30)
    feed(b, 30)
    text, digest, doc = a.program()
    assert digest == hashlib.sha256(text.encode()).hexdigest() == doc["digest"]
    assert b.program()[1] == digest  # another store, same ledger
    assert a.replay().model_dump_json() == a.state().model_dump_json()  # fold from scratch
    with a.store.session() as s:
        events = [(e.kind, e.payload) for e in s.execute(select(RegistryEvent)).scalars()]
    from prism_challenge.registry.directives import render_program

    assert render_program(replay(events, cfg), cfg)[1] == digest
    a.observe(obs(99, 1.9, opt="muon"))
    assert a.program()[1] != digest  # new evidence, new brief


def test_program_has_the_immutable_charter_and_one_mutable_block(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT, NORM])
    first = reg.program()[0]
    feed(reg, 24)
    text = reg.program()[0]
    assert text.startswith(CHARTER) and first.startswith(CHARTER)
    assert text.count(START) == 1 and text.count(END) == 1
    block = mutable_block(text)
    assert "H001 supported: optimizer=muon gives lower bpb than optimizer=adamw" in block
    assert "use optimizer=muon" in block
    with pytest.raises(ValueError):
        mutable_block(CHARTER)


def test_checkpoint_journal_every_n_observations(store):
    reg = Registry(store, RegistrySettings(checkpoint_every=10), seeds=[OPT, NORM])
    feed(reg, 25)
    journal = reg.checkpoints()
    assert [c["at"] for c in journal] == [10, 20]
    assert journal[0]["new"] == ["H001", "H002"]
    assert journal[0]["moved"]["H001"][0] == 0.5 and journal[0]["moved"]["H001"][1] > 0.5
    assert "H001" in journal[1]["shares"]  # H001 got decided: its share fell to 0
    assert journal[1]["shares"]["H001"][1] == 0.0


def test_theory_graph_links_claims_sharing_an_axis(store):
    reg = Registry(store, Settings())
    graph = reg.theory_graph()
    ids = {n["id"] for n in graph["nodes"]}
    assert {"H001", "H008", "axis:optimizer"} <= ids
    assert {"from": "H001", "to": "H008", "type": "parent"} in graph["edges"]
    assert {"from": "H001", "to": "H008", "type": "linked"} in graph["edges"]


def test_refused_axis_proposal_stores_nothing(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    before = reg.state().model_dump_json()
    bad = [
        {"spec": {"name": "warmup", "kind": "float", "low": 0, "high": float("inf"),
                  "edges": [1]}, "treatment": "a", "control": "b", "cycle": 1},
        {"spec": {"name": "warmup", "kind": "categorical", "values": ["a", "b"]},
         "treatment": "a", "control": "zzz", "cycle": 1},
        {"spec": {"name": "lr2", "kind": "categorical", "values": ["a", "b"],
                  "source": "measured"}, "treatment": "a", "control": "b", "cycle": 1},
    ]
    for payload in bad:
        with pytest.raises(LedgerError):
            reg.propose_axis(payload)
    assert reg.state().model_dump_json() == before


def test_censored_runs_count_towards_the_stall_but_are_never_evidence(store):
    """A run stopped early has a lower bound, not a bpb: no contrast may use it, but it
    certifies that no new best was found."""
    reg = Registry(store, RegistrySettings(stall_window=3), seeds=[OPT])
    reg.observe(obs(0, 2.0, opt="adamw"))
    for i in range(1, 7):
        reg.observe(Observation.model_validate({**obs(i, 1.0, opt="muon").model_dump(),
                                                "censored": True}))
    state = reg.state()
    assert (state.n_obs, state.n_eligible, state.n_censored) == (7, 1, 6)
    assert state.best_bpb == 2.0 and state.since_best == 6 and state.stall_cycle == 2
    assert state.hypotheses["H001"].n == 0
    assert [e[0] for q in state.queues.values() for e in q] == ["hk0"]  # waits alone


def test_runs_under_other_terms_are_never_compared(store):
    """A new competition key (another data version or budget) drops the runs waiting for a
    partner and the best so far: a run is contrasted only with runs under the same terms,
    and what the claims learnt before stays."""
    reg = Registry(store, RegistrySettings(stall_window=3), seeds=[OPT])

    def under(key, *args, **kw):
        return Observation.model_validate({**obs(*args, **kw).model_dump(),
                                           "competition": key})

    reg.observe(under("demo@aaaa", 0, 2.0, opt="adamw"))
    assert [e[0] for q in reg.state().queues.values() for e in q] == ["hk0"]
    reg.observe(under("demo@bbbb", 1, 3.0, opt="muon"))
    state = reg.state()
    assert state.competition == "demo@bbbb" and state.best_bpb == 3.0
    assert state.hypotheses["H001"].n == 0  # the adamw run of the old terms is no partner
    assert [e[0] for q in state.queues.values() for e in q] == ["hk1"]
    reg.observe(under("demo@bbbb", 2, 2.5, opt="adamw"))
    assert reg.state().hypotheses["H001"].n == 1  # partners under the same terms
    assert reg.replay().model_dump_json() == reg.state().model_dump_json()  # from scratch
