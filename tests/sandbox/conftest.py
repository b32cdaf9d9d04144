"""Sandbox test fixtures: real bubblewrap, real shards from the data pipeline."""

from __future__ import annotations

import pytest
from sandbox_kit import digest_of, tiny_settings

from prism_challenge.config import Settings
from prism_challenge.sandbox.backends import make_backend
from prism_challenge.sandbox.runner import Runner


@pytest.fixture(scope="session")
def make_runner(prepared_data):
    def make(settings: Settings | None = None, backend: str = "bubblewrap") -> Runner:
        return Runner.from_data(settings or tiny_settings(), make_backend(backend), prepared_data)

    return make


@pytest.fixture(scope="session")
def runner(make_runner) -> Runner:
    return make_runner()


@pytest.fixture
def run(runner, tmp_path):
    def _run(files: dict[str, bytes], r: Runner | None = None):
        return (r or runner).run(files, digest_of(files), tmp_path / "run")

    return _run
