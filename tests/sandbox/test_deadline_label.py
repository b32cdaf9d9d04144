"""A run the deadline cut says so: exit reason, limits_hit, detail and the scoring note."""

from __future__ import annotations

from sandbox_kit import bundle, digest_of, tiny_settings

from prism_challenge.miner.curve import plot_learning_curve
from prism_challenge.scoring import score_record


def test_a_run_cut_by_the_deadline_is_labelled_end_to_end(make_runner, tmp_path):
    # 4 s: a few of the bundle's half-second steps even on a loaded host, never all twelve
    runner = make_runner(tiny_settings({"deadline_s": 4.0}))
    files = bundle("slow_learner")
    record = runner.run(files, digest_of(files), tmp_path / "run")
    assert record.exit_reason == "deadline", (record.exit_reason, record.exit_detail)
    assert record.limits_hit[0] == "deadline_s"
    assert record.exit_detail.startswith("deadline_s 4 s ran out at budget row ")
    assert 0 < record.consumed.rows < record.budget.rows
    score = score_record(record, runner.settings.scoring)
    assert score.unconsumed_tokens == record.budget.scored_tokens - record.consumed.scored_tokens
    assert score.notes[0].endswith("(exit: deadline)")
    assert score.eligible, score.reasons  # a deadline charges the rest; it is not a gate
    png = plot_learning_curve(record, score, tmp_path / "curve.png", "slow")  # budget-end mark
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
