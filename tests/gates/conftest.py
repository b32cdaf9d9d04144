"""Fixtures of the gate tests: a live OpenAI-compatible stub shared by a module."""

from __future__ import annotations

import pytest
from gates_llm_stub import LlmStub


@pytest.fixture(scope="module")
def llm_stub():
    stub = LlmStub().start()
    yield stub
    stub.stop()


@pytest.fixture
def stub(llm_stub):
    llm_stub.requests.clear()
    llm_stub.headers.clear()
    llm_stub.respond = lambda body: ("json", {"decision": "allow", "reasons": [],
                                              "findings": []})
    return llm_stub
