import json
import math

import pytest
from scoring_records import entries, make_record, with_eval

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.sandbox.record import EarlyStop, RunRecord
from prism_challenge.scoring import ScoringError, score_record
from prism_challenge.scoring.penalty import penalised_bpb, penalty_fraction

LN2 = math.log(2)
PREQ = (3820 / LN2 + 1600) / 2000  # see conftest: 3.5555475...
TAIL = 800 / LN2 / 400  # last 10% of the stream = the last batch
UNIFORM = 8 * 1000 / 2000  # 4.0


@pytest.mark.parametrize(
    ("gap", "fraction"),
    [(None, 0.0), (-1.0, 0.0), (0.15, 0.0), (0.2, 0.05 / 0.35), (0.325, 0.5), (0.5, 1.0), (9, 1.0)],
)
def test_penalty_fraction_is_linear_between_start_and_zero(gap, fraction):
    assert penalty_fraction(gap, 0.15, 0.5) == pytest.approx(fraction, abs=1e-12)


def test_penalised_bpb_slides_towards_uniform_and_never_rewards():
    assert penalised_bpb(2.0, 4.0, 0.25) == pytest.approx(2.5, abs=1e-12)
    assert penalised_bpb(2.0, 4.0, 1.0) == pytest.approx(4.0, abs=1e-12)
    assert penalised_bpb(5.0, 4.0, 0.5) == 5.0  # worse than uniform: no "improvement"


def test_honest_record_scores_its_prequential_bpb(settings):
    result = score_record(make_record(), settings)
    assert result.eligible and result.reasons == []
    assert result.bpb == pytest.approx(PREQ, abs=1e-9)
    assert result.prequential_bpb == pytest.approx(PREQ, abs=1e-9)
    assert result.uniform_bpb == pytest.approx(UNIFORM, abs=1e-12)
    assert result.tail_bpb == pytest.approx(TAIL, abs=1e-9)
    assert result.gap == pytest.approx(3.0 - TAIL, abs=1e-9)
    assert result.heldout_delta == pytest.approx(5.1, abs=1e-12)
    assert result.penalty == 0.0
    assert result.unconsumed_tokens == 200
    assert result.notes == ["200 unconsumed tokens charged at log2(256) bits each (exit: deadline)"]


def test_gap_between_thresholds_inflates_bpb(settings):
    result = score_record(with_eval(make_record(), val_bpb_trained=TAIL + 0.3), settings)
    f = (0.3 - 0.15) / (0.5 - 0.15)
    assert result.eligible
    assert result.penalty == pytest.approx(f, abs=1e-9)
    assert result.bpb == pytest.approx(PREQ + f * (UNIFORM - PREQ), abs=1e-9)
    assert any(n.startswith("gap 0.3000 > 0.15") for n in result.notes)


def test_an_honest_gap_near_the_threshold_within_its_noise_is_not_penalised(settings):
    # gap 0.2 > start 0.15, but its held-out SE 0.03 puts the bound at 0.14: noise, not a cheat
    rec = with_eval(make_record(), val_bpb_trained=TAIL + 0.2, val_bpb_trained_se=0.03)
    result = score_record(rec, settings)
    assert result.eligible and result.penalty == 0.0
    assert result.bpb == pytest.approx(PREQ, abs=1e-9)
    assert result.heldout_bpb == pytest.approx(TAIL + 0.2) and result.heldout_se == 0.03
    assert result.gap_bound == pytest.approx(0.2 - 2 * 0.03, abs=1e-9)


def test_a_gap_is_penalised_for_what_exceeds_the_threshold_by_more_than_z_se(settings):
    rec = with_eval(make_record(), val_bpb_trained=TAIL + 0.4, val_bpb_trained_se=0.05)
    result = score_record(rec, settings)
    f = (0.4 - 0.1 - 0.15) / (0.5 - 0.15)  # judged at its bound 0.3, no cliff
    assert result.eligible and result.penalty == pytest.approx(f, abs=1e-9)
    assert any(n.startswith("gap 0.4000 (at least 0.3000 at 2 SE) > 0.15") for n in result.notes)
    # a cheater's gap is far past the threshold, its SE cannot save it
    cheat = with_eval(make_record(), val_bpb_trained=TAIL + 2.0, val_bpb_trained_se=0.05)
    assert [r.split(":")[0] for r in score_record(cheat, settings).reasons] == ["gap"]


def test_gap_past_zero_threshold_zeroes(settings):
    result = score_record(with_eval(make_record(), val_bpb_trained=TAIL + 0.5 + 1e-6), settings)
    assert not result.eligible
    assert result.penalty == 1.0
    assert result.bpb == pytest.approx(UNIFORM, abs=1e-12)
    assert [r.split(":")[0] for r in result.reasons] == ["gap"]


def test_a_gap_names_cheating_where_the_stream_stayed_good(settings):
    result = score_record(with_eval(make_record(), val_bpb_trained=TAIL + 2.0), settings)
    assert not result.eligible
    assert result.reasons[0].endswith("the model read its targets, or the record was tampered with")


def test_a_gap_names_divergence_where_the_stream_got_as_bad_as_held_out(settings):
    """The loss fell to 800 nats a batch, then rose to 1000: held-out text agrees with the tail."""
    rising = make_record()
    rising = rising.with_steps(
        b.model_copy(update={"nats": n})
        for b, n in zip(entries(rising), (1120.0, 800.0, 900.0, 1000.0), strict=True)
    )
    tail = 1000 / LN2 / 400
    result = score_record(with_eval(rising, val_bpb_trained=tail - 0.1), settings)
    assert not result.eligible  # early windows of a "diverged" run could still be read targets
    assert result.tail_bpb == pytest.approx(tail, abs=1e-9)
    assert result.reasons == [
        f"gap: the target-absent held-out bpb is {tail - 0.1 - TAIL:.4f} above the stream's "
        f"best window (zeroed at 0.5): the run diverged (its stream's tail is {tail:.4f} bpb, "
        f"its held-out {tail - 0.1:.4f}); a run whose loss rises past its best is not scored"
    ]


def test_tail_fraction_setting_is_used():
    s = ScoringSettings(tail_fraction=0.5)
    result = score_record(make_record(), s)
    assert result.tail_bpb == pytest.approx(1700 / LN2 / 800, abs=1e-9)


def test_non_finite_record_is_ineligible_scores_uniform_and_stays_valid_json(settings):
    rec = make_record()
    batches = [*entries(rec)[:3], entries(rec)[3].model_copy(update={"nats": float("nan")})]
    nan = make_record(batches=batches, consumed=rec.consumed.model_copy(update={"nats": math.nan}))
    result = score_record(nan, settings)
    assert not result.eligible
    assert result.prequential_bpb is None and result.tail_bpb is None and result.gap is None
    assert result.bpb == UNIFORM
    assert result.reasons[0].startswith("non_finite:")
    json.dumps(result.model_dump(mode="json"), allow_nan=False)


def test_crash_is_charged_not_zeroed(settings):
    result = score_record(make_record(exit_reason="crash"), settings)
    assert result.eligible and result.bpb == pytest.approx(PREQ, abs=1e-9)


def test_infra_failure_is_not_scorable(settings):
    with pytest.raises(ScoringError, match="infra"):
        score_record(make_record(exit_reason="infra"), settings)


def test_a_run_stopped_early_is_censored_at_its_bound(settings):
    stop = EarlyStop(
        checkpoint=0.8, position=8, bound_bpb=3.9, target_bpb=3.2, leader_submission=4, max_gain=0.5
    )
    result = score_record(make_record(exit_reason="ok", stopped_early=stop), settings)
    assert result.censored and result.bpb == 3.9
    assert result.prequential_bpb == pytest.approx(PREQ, abs=1e-9)  # still shown
    assert result.notes[0].startswith("censored: stopped at 80% of the budget")
    assert "at least 3.9000" in result.notes[0] and "bar 3.2000" in result.notes[0]
    assert not score_record(make_record(), settings).censored


def test_records_without_early_stop_still_load():
    raw = make_record().model_dump(mode="json")
    raw.pop("stopped_early")
    for version in (1, 2):
        assert RunRecord.model_validate({**raw, "version": version}).stopped_early is None
