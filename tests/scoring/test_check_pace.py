"""`prism check` projects the smoke run's pace over the full budget and warns, with the
numbers, when the budget will not fit in deadline_s on this machine."""

from scoring_records import make_record

from prism_challenge.config import Settings
from prism_challenge.miner.check import pace_findings


def _settings(deadline_s: float) -> Settings:
    return Settings(challenge={"seq_len": 100, "token_budget": 100_000, "deadline_s": deadline_s})


def test_a_budget_that_fits_the_deadline_is_only_reported():
    (f,) = pace_findings(make_record(train_s=2.0), _settings(300.0))  # 800 tokens in 2 s
    assert f.check == "deadline" and f.status == "info"
    assert "400 tokens/s" in f.detail and "about 250 s" in f.detail
    assert not f.detail.startswith("WARNING")


def test_a_budget_over_the_deadline_is_warned_with_the_cut_point():
    (f,) = pace_findings(make_record(train_s=4.0), _settings(300.0))  # 200 tokens/s: 500 s
    assert f.detail.startswith("WARNING smoke run: 800 tokens in 4.0 s (200 tokens/s)")
    assert "about 500 s, over deadline_s 300 s" in f.detail
    assert "at about 60% of the budget" in f.detail


def test_no_pace_without_training_time():
    assert pace_findings(make_record(train_s=0.0), _settings(300.0)) == []
