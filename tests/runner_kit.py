"""Runs in the real sandbox for the sandbox and verification tests: real bubblewrap, real
shards from the data pipeline. tests/conftest.py imports these fixtures, so a session holds
one runner and one shared run of the tiny bundle, whichever folder asks for them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sandbox_kit import bundle, digest_of, tiny_settings

if TYPE_CHECKING:  # imported when a runner is made: a session without sandbox tests skips it
    from prism_challenge.config import Settings
    from prism_challenge.sandbox.runner import Runner


@pytest.fixture(scope="session")
def make_runner(prepared_data):
    from prism_challenge.isolation import make_backend
    from prism_challenge.sandbox.runner import Runner

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


def small_feeder(prepared_data, path, world_size: int = 1):
    """A real feeder on the prepared train split: 64 rows of 32, keep rate 0.05, 8 lanes."""
    from prism_challenge.data import TokenStream
    from prism_challenge.sandbox.feeder import Feeder, FeederPlan

    train = TokenStream.open(prepared_data, "train")
    plan = FeederPlan(seq_len=32, vocab_size=train.manifest.vocab_size,
                      separator_id=train.manifest.separator_id, param_cap=10**6,
                      token_budget=32 * 64, budget_rows=64, deadline_s=30.0,
                      world_size=world_size, sample_secret=b"s" * 32, keep_rate=0.05, lanes=8)
    return Feeder(train, plan, path)


@pytest.fixture
def feeder(prepared_data, tmp_path):
    """`small_feeder` with one rank."""
    f = small_feeder(prepared_data, tmp_path / "feeder.sock")
    yield f
    f.close()


@pytest.fixture(scope="session")
def tiny_run(runner, tmp_path_factory):
    """One run of the tiny fixture bundle on the default runner: (files, record, folder).

    For the tests that only read such a run (its record and stack, its final weights in
    `folder`/eval_inputs, replays of it into their own folders), so the session trains it
    once. Tests must not write into `folder` nor mutate `record` (model_copy it)."""
    files = bundle("tiny")
    folder = tmp_path_factory.mktemp("tiny-run") / "run"
    record = runner.run(files, digest_of(files), folder)
    assert record.exit_reason == "ok", record.exit_detail
    return files, record, folder
