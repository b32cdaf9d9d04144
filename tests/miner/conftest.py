"""Miner-loop fixtures: a tiny config file next to the shared prepared data root."""

from __future__ import annotations

import pytest
from miner_kit import write_tiny_config


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory):
    return write_tiny_config(tmp_path_factory.mktemp("miner-config") / "tiny.yaml")
