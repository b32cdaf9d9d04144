"""Fixtures of the scoring tests (record builders live in scoring_records.py)."""

import pytest

from prism_challenge.config.settings import ScoringSettings


@pytest.fixture
def settings() -> ScoringSettings:
    # The hand-made record has four batches of 200 tokens: one curve window each.
    return ScoringSettings(curve_windows=4, curve_window_tokens=200)
