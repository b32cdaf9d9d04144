"""Registry fixtures: observation builders and a local OpenAI-compatible LLM stub."""

from __future__ import annotations

import json
import time

import pytest
from fastapi import FastAPI

from prism_challenge.api.server import ApiServer
from prism_challenge.config.settings import LlmSettings, RegistrySettings
from prism_challenge.registry import Observation


def measured(opt="adamw", lr=3e-4, params=5_000_000, layers=4, census=None, batch=16, **kw):
    return {
        "param_count": params,
        "layer_count": layers,
        "module_census": census if census is not None else {"LayerNorm": 2},
        "optimizers": [{"cls": opt, "hparams": {"lr": lr}}],
        "batch_size": batch,
        **kw,
    }


def obs(i, bpb, hotkey=None, eligible=True, declared=None, **m) -> Observation:
    return Observation(
        submission_id=i,
        hotkey=hotkey or f"hk{i}",
        digest=f"{i:064x}",
        measured=measured(**m),
        declared=declared or {},
        bpb=bpb,
        eligible=eligible,
        accepted_at=1000.0 + i,
    )


OPT = {"spec": {"kind": "single", "axis": "optimizer", "treatment": "muon", "control": "adamw"},
       "importance": 0.8}
NORM = {"spec": {"kind": "single", "axis": "norm", "treatment": "rmsnorm",
                 "control": "layernorm"}, "importance": 0.5}


def feed(reg, n, effect=0.05, start=0):
    """Alternate muon / adamw runs from distinct hotkeys; muon is better by `effect`."""
    for i in range(start, start + n):
        muon = i % 2 == 0
        wobble = 0.001 * ((i * 7919) % 11 - 5)  # deterministic noise, |x| <= 0.005
        reg.observe(obs(i, 2.0 - (effect if muon else 0.0) + wobble,
                        opt="muon" if muon else "adamw"))


@pytest.fixture
def cfg() -> RegistrySettings:
    return RegistrySettings()


class LlmScript:
    """What the stub answers during one test: the queued contents (JSON strings), the
    requests seen, and whether to fail with an HTTP status or answer after `delay_s`
    (longer than the client's timeout: a timeout)."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.requests: list[dict] = []
        self.fail_status: int | None = None
        self.delay_s = 0.0

    def queue(self, doc: dict) -> None:
        self.answers.append(json.dumps(doc))

    def user_doc(self, i: int = -1) -> dict:
        """The JSON brief the registry sent in request `i`."""
        return json.loads(next(m["content"] for m in self.requests[i]["messages"]
                               if m["role"] == "user"))


class LlmStub:
    """A local OpenAI-compatible server answering /v1/chat/completions from the current
    test's `LlmScript`. A request stays bound to the script it arrived under, so a late
    answer to a timed-out request cannot consume the next test's queue."""

    def __init__(self) -> None:
        self.script = LlmScript()
        app = FastAPI()

        @app.post("/v1/chat/completions")
        def complete(body: dict):
            from fastapi.responses import JSONResponse

            script = self.script
            script.requests.append(body)
            if script.delay_s:
                time.sleep(script.delay_s)
            if script.fail_status is not None:
                return JSONResponse({"error": {"message": "down"}},
                                    status_code=script.fail_status)
            content = script.answers.pop(0) if script.answers else "{}"
            return {
                "id": "stub", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

        self.server = ApiServer(app)


@pytest.fixture(scope="session")
def llm_stub():
    """One stub server for the session (starting uvicorn per test costs more than the test)."""
    stub = LlmStub()
    stub.server.start()
    yield stub
    stub.server.stop()


@pytest.fixture
def llm(llm_stub) -> LlmScript:
    llm_stub.script = LlmScript()
    return llm_stub.script


@pytest.fixture(scope="session")
def llm_settings(llm_stub) -> LlmSettings:
    """The node's `llm` section pointed at the stub (short timeout, so a slow answer is a
    timeout)."""
    return LlmSettings(base_url=f"{llm_stub.server.url}/v1", model="stub-model", timeout_s=1.0,
                       api_key_env="PRISM_TEST_LLM_KEY")


@pytest.fixture(scope="session")
def client(llm_settings):
    """One OpenAI client for the session (each one builds its own TLS context, ~0.1 s)."""
    from prism_challenge.registry import make_client

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRISM_TEST_LLM_KEY", "test")
        return make_client(llm_settings)
