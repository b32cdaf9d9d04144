"""A real validator node runs research cycles against a local OpenAI-compatible server.

`ValidatorNode` with its real threads (the research loop among them), its real API under
uvicorn, real SQLite, and the real `openai` client talking to a FastAPI app on 127.0.0.1
that answers /v1/chat/completions with scripted JSON. Scored submissions are handed to the
node's registry the way its evaluation workers hand them over (`registry.observe`), so the
test needs no sandbox runs: what it exercises is the cycle, not the scoring.
"""

from __future__ import annotations

import time

import httpx
from sqlalchemy import select

from prism_challenge.config import load_settings
from prism_challenge.registry import Observation, assignment_for, replay
from prism_challenge.storage.tables import RegistryEvent
from prism_challenge.validator.node import ValidatorNode
from tests.gates.gates_llm_stub import LlmStub

NEW = {"spec": {"kind": "single", "axis": "position", "treatment": "alibi", "control": "rope"},
       "importance": 0.6, "rationale": "linear biases extrapolate"}
MIRRORED = {"spec": {"kind": "single", "axis": "optimizer", "treatment": "adamw",
                     "control": "muon"}, "importance": 0.9}
UNKNOWN = {"spec": {"kind": "single", "axis": "heads", "treatment": "8", "control": "4"},
           "importance": 0.9}
WARMUP = {"spec": {"name": "warmup", "kind": "categorical", "values": ["none", "short", "long"],
                   "description": "learning-rate warm-up"},
          "treatment": "short", "control": "none", "rationale": "warm-up steadies early steps"}
FAILURE_FIELDS = {"seq", "cycle_failures", "failure_streak", "journal_n", "journal"}


class Script:
    """What the LLM answers now, by question (the system prompt says which)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.hypotheses: list = [NEW, MIRRORED, UNKNOWN]
        self.axes: list = []

    def __call__(self, body: dict):
        system = body["messages"][0]["content"]
        if self.mode == "down":
            return "status", 503
        if self.mode == "slow":
            return "sleep", 3.0  # the node's client gives up after llm.timeout_s = 1
        if self.mode == "garbage":
            return "text", "I think rmsnorm is nice."
        if system.startswith("Progress has stalled"):
            return "json", {"axes": self.axes}
        return "json", {"hypotheses": self.hypotheses}


def _observe(node, i: int, bpb: float) -> None:
    node.registry.observe(Observation(
        submission_id=i, hotkey=f"hk{i}", digest=f"{i:064x}", bpb=bpb, eligible=True,
        accepted_at=1000.0 + i,
        measured={"param_count": 5_000_000, "layer_count": 4, "batch_size": 16,
                  "module_census": {"LayerNorm": 2},
                  "optimizers": [{"cls": "muon" if i % 2 else "adamw", "hparams": {"lr": 3e-4}}]},
    ))


def _wait(url: str, predicate, what: str, timeout_s: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        journal = httpx.get(f"{url}/v1/journal", params={"limit": 100}, timeout=10).json()
        if predicate(journal):
            return journal
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {journal}")


def _keys(node) -> list[str]:
    with node.store.session() as s:
        return list(s.execute(select(RegistryEvent.key).order_by(RegistryEvent.seq)).scalars())


def test_the_node_proposes_survives_a_bad_llm_and_adopts_a_canary(
        tiny_config, tmp_path, monkeypatch):
    stub = LlmStub().start()
    script = Script()
    stub.respond = script
    monkeypatch.setenv("PRISM_TEST_LLM_KEY", "test-key")
    path = tiny_config(
        llm={"enabled": True, "base_url": stub.base_url, "model": "stub-model",
             "api_key_env": "PRISM_TEST_LLM_KEY", "timeout_s": 1, "backoff_s": 0.2,
             "max_backoff_s": 0.4},
        registry={"cycle_scored": 3, "stall_window": 3, "axis_recurrence": 1},
        storage={"url": f"sqlite:///{tmp_path / 'node.db'}"},
        intake={"port": 0},
        validator={"poll_s": 0.05, "epoch_s": 3600, "work_dir": str(tmp_path / "runs")},
    )
    settings = load_settings(path)
    node = ValidatorNode(settings)
    url = node.start()
    try:
        # 1. after cycle_scored scored runs, a cycle proposes; the gates sort the answers
        for i, bpb in enumerate((2.0, 1.9, 1.8)):
            assert httpx.get(f"{url}/v1/journal", timeout=10).json()["total"] == 0
            _observe(node, i + 1, bpb)
        journal = _wait(url, lambda j: j["total"] >= 1, "the first cycle")
        (entry,) = journal["entries"]
        assert (entry["kind"], entry["cycle"], entry["at"], entry["trigger"]) == (
            "cycle", 1, 3, "scored")
        verdicts = [(v["accepted"], v["reason"]) for v in entry["proposed"]]
        assert verdicts == [("H009", "ok"),
                            (None, "duplicate: single|optimizer|adamw|muon"),
                            (None, "axes: unknown axis 'heads'")]
        hyps = {h["id"]: h for h in httpx.get(f"{url}/v1/hypotheses", timeout=10).json()}
        assert hyps["H009"]["origin"] == "llm" and hyps["H009"]["statement"] == (
            "position=alibi gives lower bpb than position=rope")
        assert len(stub.requests) == 1  # not stalled: no question about axes
        md = httpx.get(f"{url}/v1/journal.md", timeout=10).text
        assert "- refused: `" in md and "duplicate: single|optimizer|adamw|muon" in md

        # 2. down, then timing out, then garbage: only failure events, retried with backoff
        keys_before = _keys(node)
        script.mode = "down"
        for i in range(4, 7):
            _observe(node, i, 1.9)  # no improvement: progress stalls (stall_window 3)
        for mode, error in (("down", "InternalServerError"), ("slow", "timeout after 1s"),
                            ("garbage", "the answer is not JSON")):
            script.mode = mode
            _wait(url, lambda j, e=error: j["entries"][0]["kind"] == "cycle_failed"
                  and j["entries"][0]["error"].startswith(e), f"a {mode} failure")
        # the loop keeps failing (garbage) while the ledger is checked
        added = _keys(node)[len(keys_before):]
        assert added[:3] == ["obs:4", "obs:5", "obs:6"]
        assert added[3:] and all(k.startswith("cycle-failed:") for k in added[3:])
        state = node.registry.state()
        with node.store.session() as s:
            events = [(e.kind, e.payload) for e in s.execute(
                select(RegistryEvent).order_by(RegistryEvent.seq)).scalars()]
        without = [(k, p) for k, p in events if not (k == "cycle" and p.get("error"))]
        rebuilt = replay(without, node.registry.cfg)
        assert state.model_dump(exclude=FAILURE_FIELDS) == rebuilt.model_dump(
            exclude=FAILURE_FIELDS)
        assert state.cycles == 1 and state.cycle_failures >= 3 and state.stall_cycle == 1

        # 3. the LLM is back: the stalled cycle asks for axes; the warm-up axis is a canary
        script.hypotheses, script.axes = [], [WARMUP]
        script.mode = "ok"
        journal = _wait(url, lambda j: j["entries"][0]["kind"] == "cycle", "the canary cycle")
        entry = journal["entries"][0]
        assert entry["cycle"] == 2 and entry["stalled"]
        assert entry["axes_proposed"][0]["accepted"] == "warmup"
        assert entry["axes_proposed"][0]["reason"] == "adopted as a canary (H010)"
        assert entry["axes"] == [{"name": "warmup", "status": ["new", "canary"]}]
        brief = httpx.get(f"{url}/v1/program.md", timeout=10).text
        assert "H010: warmup=short gives lower bpb than warmup=none [canary]" in brief
        state = node.registry.state()
        hotkey = next(f"hk{k}" for k in range(200) if assignment_for(
            f"hk{k}", state, settings, None).kind == "canary")
        mine = httpx.get(f"{url}/v1/program.json", params={"hotkey": hotkey}, timeout=10).json()
        assert [r["id"] for r in mine["population"]["focus"]] == ["H009", "H010"]
        assert all(r["model"] == "stub-model" for r in stub.requests)
    finally:
        node.stop(timeout_s=10)
        stub.stop()
