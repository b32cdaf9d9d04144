"""Fixtures of the weights tests (entry builders live in weights_entries.py)."""

import pytest
from weights_entries import HOTKEYS


@pytest.fixture
def hk() -> list[str]:
    return HOTKEYS
