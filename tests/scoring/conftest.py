"""Fixtures of the scoring tests (record builders live in scoring_records.py)."""

import pytest

from prism_challenge.config.settings import ScoringSettings


@pytest.fixture
def settings() -> ScoringSettings:
    return ScoringSettings()
