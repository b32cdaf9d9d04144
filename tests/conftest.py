"""Shared fixtures: each test gets its own store and settings, never the developer's."""

from __future__ import annotations

import pytest

from prism_challenge.storage import Store


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's PRISM_* variables must not leak into what the tests assert.
    import os

    for name in list(os.environ):
        if name.startswith("PRISM_"):
            monkeypatch.delenv(name)


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'prism.db'}")
    yield s
    s.close()


@pytest.fixture
def live_server():
    """Serve FastAPI apps on a real uvicorn server on 127.0.0.1 (a free port each).

    Returns `start(app) -> base_url`; every server started is stopped at teardown.
    """
    from prism_challenge.api.server import ApiServer

    servers: list[ApiServer] = []

    def start(app) -> str:
        server = ApiServer(app)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()
