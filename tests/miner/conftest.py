"""Miner-loop fixtures: a tiny config file next to the shared prepared data root."""

from __future__ import annotations

import pytest
from miner_kit import run_guide, write_tiny_config


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("miner-config") / "tiny.yaml")


@pytest.fixture(scope="session")
def guide_run(tiny_config, prepared_data, tmp_path_factory):
    """docs/miners.md's `prism check` and `prism eval` of examples/baseline, run once as
    written: (folder, [(argv, process)]). The guide's test asserts on it, and the `--compare`
    test takes its eval output as the stored reference, so the baseline is evaluated once."""
    folder = tmp_path_factory.mktemp("guide")
    return folder, run_guide(folder, tiny_config, prepared_data)
