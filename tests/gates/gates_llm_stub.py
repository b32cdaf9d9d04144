"""A local OpenAI-compatible chat-completions server for the LLM gate's tests.

A real FastAPI app served by uvicorn on 127.0.0.1 in a thread; each test programs how it
answers by setting `stub.respond`, a function of the request body returning one of
("json", obj), ("text", str), ("sleep", seconds), ("status", code). Every request body and
its headers are recorded so tests can check what the reviewer was sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Reply = tuple[str, object]


def completion(content: str) -> dict:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "stub",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class LlmStub:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.respond: Callable[[dict], Reply] = lambda body: ("json", {
            "decision": "allow", "reasons": [], "findings": []})
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.base_url = ""

    async def _chat(self, request: Request):
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        kind, value = self.respond(body)
        if kind == "sleep":
            await asyncio.sleep(float(value))
            return JSONResponse(completion(json.dumps(
                {"decision": "allow", "reasons": [], "findings": []})))
        if kind == "status":
            return JSONResponse({"error": {"message": "stub failure"}}, status_code=int(value))
        content = json.dumps(value) if kind == "json" else str(value)
        return JSONResponse(completion(content))

    def start(self) -> LlmStub:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning",
                                timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("LLM stub did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=5)

    def user_text(self, i: int = -1) -> str:
        return next(m["content"] for m in self.requests[i]["messages"] if m["role"] == "user")

    def system_text(self, i: int = -1) -> str:
        return next(m["content"] for m in self.requests[i]["messages"] if m["role"] == "system")
