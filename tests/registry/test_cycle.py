"""The research cycle's cadence, its failures, and its all-or-nothing writes (real `openai`
client, real uvicorn server answering /v1/chat/completions, real SQLite)."""

import threading

import pytest
from sqlalchemy import func, select

from prism_challenge.config.settings import LlmSettings, RegistrySettings
from prism_challenge.registry import LedgerError, Registry, ResearchLoop, run_cycle
from prism_challenge.registry.loop import backoff_s
from prism_challenge.storage.tables import RegistryEvent, RegistryHypothesis
from tests.registry.conftest import OPT, obs

NORM = {"spec": {"kind": "single", "axis": "norm", "treatment": "rmsnorm",
                 "control": "layernorm"}, "importance": 0.5, "rationale": "cheaper"}
POS = {"spec": {"kind": "single", "axis": "position", "treatment": "rope",
                "control": "learned"}, "importance": 0.6, "rationale": "rotary"}
PREC = {"spec": {"kind": "single", "axis": "precision", "treatment": "bf16",
                 "control": "fp32"}, "importance": 0.4, "rationale": "more steps"}
# Everything a failed cycle may change: the failure count and its journal entry.
FAILURE_FIELDS = {"seq", "cycle_failures", "failure_streak", "journal_n", "journal"}


def _events(store) -> list[tuple[str, str]]:
    with store.session() as s:
        return [(e.key, e.kind) for e in s.execute(
            select(RegistryEvent).order_by(RegistryEvent.seq)).scalars()]


def test_a_cycle_runs_every_cycle_scored_observations(store, client, llm, llm_settings):
    reg = Registry(store, RegistrySettings(cycle_scored=4), seeds=[OPT])
    for i in range(3):
        reg.observe(obs(i, 2.0))
    assert run_cycle(reg, client, llm_settings) is None
    assert llm.requests == []  # not due: the LLM is not even asked
    reg.observe(obs(3, 2.0))
    llm.queue({"hypotheses": [NORM]})
    assert run_cycle(reg, client, llm_settings).accepted == ["H002"]
    assert run_cycle(reg, client, llm_settings) is None  # due again after 4 more
    for i in range(4, 8):
        reg.observe(obs(i, 2.0))
    llm.queue({"hypotheses": []})
    assert run_cycle(reg, client, llm_settings).accepted == []
    state = reg.state()
    assert (state.cycles, state.cycle_obs, state.cycle_failures) == (2, 8, 0)
    assert [k for k, kind in _events(store) if kind in ("cycle", "hypothesis")][-3:] == [
        "hyp:H002:5", "cycle:1", "cycle:2"]


def test_at_most_max_proposals_llm_claims_are_open(store, client, llm, llm_settings):
    reg = Registry(store, RegistrySettings(cycle_scored=1, max_proposals=2), seeds=[OPT])
    reg.observe(obs(0, 2.0))
    llm.queue({"hypotheses": [NORM, POS, PREC]})  # only `wanted` = 2 are read
    assert run_cycle(reg, client, llm_settings).accepted == ["H002", "H003"]
    assert llm.user_doc(0)["wanted"] == 2
    reg.observe(obs(1, 2.0))
    result = run_cycle(reg, client, llm_settings)
    assert result.error is None and result.accepted == [] and len(llm.requests) == 1
    entry = reg.journal(limit=1)[1][0]
    assert entry["cycle"] == 2 and entry["proposed"] == []
    assert entry["skipped"] == "2 LLM claims are open (registry.max_proposals)"


def _break(llm, how: str) -> None:
    if how == "down":
        llm.fail_status = 503
    elif how == "timeout":
        llm.delay_s = 1.5  # the client gives up after llm.timeout_s = 1
        llm.queue({"hypotheses": [NORM]})
    elif how == "not json":
        llm.answers.append("Sure! Here are some hypotheses: rmsnorm beats layernorm.")
    elif how == "no list":
        llm.queue({"claims": [NORM]})


@pytest.mark.parametrize("how,error", [
    ("down", "InternalServerError: Error code: 503"),
    ("timeout", "timeout after 1s"),
    ("not json", "the answer is not JSON"),
    ("no list", "the answer has no 'hypotheses' list"),
])
def test_a_failed_llm_costs_one_failure_event_and_nothing_else(store, client, llm,
                                                               llm_settings, how, error):
    reg = Registry(store, RegistrySettings(cycle_scored=2), seeds=[OPT])
    reg.observe(obs(0, 2.0, opt="muon"))
    reg.observe(obs(1, 2.1, opt="adamw"))
    before, events = reg.state(), _events(store)
    digest = reg.program()[1]
    _break(llm, how)
    result = run_cycle(reg, client, llm_settings)
    assert result.error.startswith(error)
    after = reg.state()
    assert after.model_dump(exclude=FAILURE_FIELDS) == before.model_dump(exclude=FAILURE_FIELDS)
    assert (after.cycle_failures, after.failure_streak, after.cycles) == (1, 1, 0)
    assert _events(store) == [*events, ("cycle-failed:1", "cycle")]
    assert reg.program()[1] == digest
    with store.session() as s:
        assert s.execute(select(func.count()).select_from(RegistryHypothesis)).scalar() == 1
    total, (entry,) = reg.journal()
    assert total == 1 and entry["kind"] == "cycle_failed" and entry["error"].startswith(error)
    # the cycle is still due, and the next answer is taken as usual
    llm.fail_status, llm.delay_s, llm.answers = None, 0.0, []
    llm.queue({"hypotheses": [NORM]})
    result = run_cycle(reg, client, llm_settings)
    assert result.accepted == ["H002"]
    assert (reg.state().failure_streak, reg.state().cycles) == (0, 1)


def test_a_batch_is_written_all_or_nothing(store):
    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    events = _events(store)
    good = ("hyp:x", "hypothesis", {"spec": NORM["spec"], "origin": "llm"})
    bad = ("hyp:y", "hypothesis", {"spec": {"kind": "single", "axis": "nope",
                                            "treatment": "a", "control": "b"}})
    with pytest.raises(LedgerError):
        reg.record(lambda state: [good, bad])
    assert _events(store) == events and list(reg.state().hypotheses) == ["H001"]
    cycle = ("cycle:1", "cycle", {"trigger": "scored", "time": 1.0})
    assert reg.record(lambda state: [cycle]) == [cycle]
    assert reg.record(lambda state: [cycle]) == []  # the same cycle, recorded elsewhere first
    assert reg.state().cycles == 1
    with pytest.raises(LedgerError, match="cycle refused"):
        reg.record(lambda state: [("cycle:2", "cycle", {"trigger": "whenever", "time": 1.0})])


def test_backoff_doubles_up_to_its_cap():
    llm = LlmSettings(backoff_s=30, max_backoff_s=100)
    assert [backoff_s(llm, k) for k in (1, 2, 3, 4, 500)] == [30, 60, 100, 100, 100]


def test_the_loop_runs_a_due_cycle_at_start_up_and_backs_off_after_a_failure(
        store, client, llm, llm_settings):
    reg = Registry(store, RegistrySettings(cycle_scored=1), seeds=[OPT])
    reg.observe(obs(0, 2.0))
    llm.fail_status = 503
    slow = llm_settings.model_copy(update={"backoff_s": 600.0})
    loop = ResearchLoop(reg, slow, poll_s=0.02, client=client)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,))
    thread.start()
    try:
        for _ in range(500):
            if reg.state().cycle_failures:
                break
            stop.wait(0.01)
        stop.wait(0.3)  # ~15 polls: none may retry within the 600 s backoff
    finally:
        stop.set()
        thread.join(5)
    assert len(llm.requests) == 1
    total, (entry,) = reg.journal()
    assert total == 1 and entry["kind"] == "cycle_failed" and entry["trigger"] == "startup"


def test_the_research_loop_is_off_without_an_llm_or_a_cadence(store):
    from prism_challenge.config.settings import Settings

    reg = Registry(store, RegistrySettings(), seeds=[OPT])
    assert ResearchLoop.from_settings(Settings(llm={"enabled": False}), reg) is None
    assert ResearchLoop.from_settings(Settings(registry={"cycle_scored": 0}), reg) is None
    # one message naming the one switch that fixes both LLM users (review and research)
    with pytest.raises(ValueError, match=r"PRISM_NO_SUCH_KEY .*set llm\.enabled: false to run "
                                         r"without the LLM \(no review, no research"):
        ResearchLoop.from_settings(Settings(llm={"api_key_env": "PRISM_NO_SUCH_KEY"}), reg)
