"""Fixtures of the scoring tests (record builders live in scoring_records.py)."""

import pytest

from prism_challenge.config.settings import ScoringSettings


@pytest.fixture
def settings() -> ScoringSettings:
    # The hand-made record has four batches of 200 tokens: one curve window each. The gap
    # thresholds are pinned (the tests' figures are worked out with them), whatever the
    # calibrated defaults are.
    return ScoringSettings(curve_windows=4, curve_window_tokens=200, gap_penalty_start=0.15,
                           gap_zero=0.5)
