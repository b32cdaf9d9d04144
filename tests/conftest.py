"""Shared fixtures: each test gets its own store and settings, never the developer's."""

from __future__ import annotations

import pytest
from runner_kit import feeder, make_runner, run, runner, tiny_run  # noqa: F401 (fixtures)
from slow_first import slow_first

from prism_challenge.storage import Store


def pytest_collection_modifyitems(config, items):
    slow_first(items)  # the longest files start first, so the workers' tails are short


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


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server (started once per session), or a skip naming what is missing."""
    from postgres_kit import PostgresServer, server_bin

    bindir = server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries are not installed (/usr/lib/postgresql/*/bin; "
                    "`apt-get install postgresql`, as .ci/run does)")
    server = PostgresServer.start(bindir)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """The URL of a new, empty store on each backend the node supports."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'prism.db'}"
    server = request.getfixturevalue("postgres_server")
    return server.new_store_url()


@pytest.fixture
def any_store(store_url) -> Store:
    """`store` on each backend (SQLite and a real PostgreSQL server)."""
    s = Store(store_url)
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


@pytest.fixture(scope="session")
def prepared_data(tmp_path_factory):
    """Path of a real prepared data root (the full prepare-data pipeline, local jsonl source).

    ~580 KB of deterministic English-like text (850 documents), vocab_size 512, split
    0.8 / 0.1 / 0.1, 16,384-token shards (train spans several shards; val ~17k tokens).
    Built once per session in about a second. Shared: tests must not modify it; copy it
    (shutil.copytree) to corrupt or change it.
    """
    from prism_challenge.data import prepare_data
    from prism_challenge.data.synthetic import english_like_documents, small_spec, write_jsonl

    base = tmp_path_factory.mktemp("prepared-data")
    source = write_jsonl(base / "source" / "docs.jsonl", english_like_documents(850, seed=0))
    root = base / "data"
    prepare_data(small_spec([source]), root)
    return root
