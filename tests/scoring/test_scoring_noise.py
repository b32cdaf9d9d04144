"""The noise of a score: the gap's SE (held-out and best window), the stream's parts, and a
dethrone rule that a challenger within noise of the leader cannot pass."""

import math

import numpy as np
import pytest
from scoring_records import NATS, make_record, with_eval

from prism_challenge.sandbox.heldout import ratio_se
from prism_challenge.sandbox.record import BatchEntry, Budget, Consumed
from prism_challenge.scoring import measures, score_record
from prism_challenge.scoring.leaderboard import Entry, build_leaderboard, paired_se

LN2 = math.log(2)


def test_the_best_windows_se_ignores_its_learning_trend_and_adds_to_the_heldout_se(settings):
    rec = make_record()  # two windows of two batches: too few for an SE
    assert measures.best_window(rec, 2, 400) == (
        pytest.approx((900 + 800) / LN2 / 800, abs=1e-12), None)
    # one window of four batches, 1120 > 1000 > 900 > 800 nats: a falling curve, no jitter
    best, se = measures.best_window(rec, 1, 800)
    bits, nbytes = np.array(NATS) / LN2, np.full(4, 400.0)
    resid = bits - bits.sum() / 1600 * nbytes
    want = math.sqrt(4 * np.sum(np.diff(resid) ** 2) / 6) / 1600
    assert se == pytest.approx(want, abs=1e-12)
    # a straight fall of b bits a batch counts b^2 / 2, against ~ b^2 n^2 / 12 as spread
    assert se < 0.6 * ratio_se(bits, nbytes)
    held = with_eval(rec, val_bpb_trained=3.0, val_bpb_trained_se=0.04)
    gap, gap_se = measures.gap_and_se(held, 1, 800)
    assert gap == pytest.approx(3.0 - best, abs=1e-12)
    assert gap_se == pytest.approx(math.hypot(0.04, want), abs=1e-12)
    scored = score_record(held, settings.model_copy(update={
        "curve_windows": 1, "curve_window_tokens": 800}))
    assert scored.gap_se == pytest.approx(gap_se, abs=1e-12)
    assert scored.gap_bound == pytest.approx(gap - 2 * gap_se, abs=1e-12)
    # one batch per window: no spread to measure, the held-out SE alone
    assert measures.gap_and_se(held, 4, 200)[1] == pytest.approx(0.04, abs=1e-12)


def test_stream_parts_split_the_prequential_bpb_by_stretches_of_rows():
    full = make_record(budget=Budget(rows=8, tokens=800, scored_tokens=800, bytes=1600),
                       consumed=Consumed(rows=8, scored_tokens=800, bytes=1600, nats=sum(NATS)))
    parts = measures.stream_parts(full, 4)  # one batch of two rows per stretch
    assert parts == pytest.approx([n / LN2 / 1600 for n in NATS], abs=1e-12)
    assert sum(parts) == pytest.approx(measures.prequential_bpb(full), abs=1e-9)
    # eight stretches of one row: each batch's bits shared pro rata by rows
    assert measures.stream_parts(full, 8)[:2] == pytest.approx([560 / LN2 / 1600] * 2)
    assert measures.stream_parts(make_record(), 4) is None  # stopped at 8 of 10 rows


def test_paired_se_counts_jitter_not_a_shared_text_or_a_smooth_lead():
    text = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]  # the text's own difficulty, shared
    assert paired_se(text, [x - 0.01 for x in text]) == pytest.approx(0.0, abs=1e-12)
    lead = [x - 0.002 * i for i, x in enumerate(text)]  # a lead that grows smoothly
    assert paired_se(text, lead) == pytest.approx(
        math.sqrt(8 * 7 * 0.002**2 / 14), abs=1e-12)
    jitter = [x + (0.01 if i % 2 else -0.01) for i, x in enumerate(text)]
    assert paired_se(text, jitter) == pytest.approx(math.sqrt(8 * 7 * 0.02**2 / 14))
    assert paired_se(text, text[:4]) is None and paired_se(None, text) is None


def _entry(sid, hotkey, parts):
    return Entry(submission_id=sid, hotkey=hotkey, digest=f"{sid:064x}", accepted_at=float(sid),
                 bpb=sum(parts), heldout_delta=1.0, eligible=True, corpus="demo",
                 scored_at=float(sid), verification="passed", stream_parts=parts)


def _leader(*entries, z=2.0):
    return build_leaderboard(entries, epsilon=0.0, margin=0.005, z=z).leader.submission_id


LEADER = [x / 4 for x in [0.5, 0.3, 0.4, 0.25, 0.35, 0.3, 0.28, 0.32] * 4]  # 32: 2.7 bpb


def test_a_challenger_better_by_less_than_its_noise_does_not_take_the_lead():
    # 0.02 better in all (past the 0.0135 margin), but stretch by stretch it wanders
    # +-0.002 around the leader: other text could reverse it
    wobbly = [x - 0.02 / 32 + (0.002 if i % 2 else -0.002) for i, x in enumerate(LEADER)]
    se = paired_se(wobbly, LEADER)
    assert 0.005 * sum(LEADER) < sum(LEADER) - sum(wobbly) < 0.005 * sum(LEADER) + 2 * se
    assert _leader(_entry(1, "a", LEADER), _entry(2, "b", wobbly)) == 1
    assert _leader(_entry(1, "a", LEADER), _entry(2, "b", wobbly), z=0.0) == 2  # margin alone


def test_a_challenger_clearly_better_takes_the_lead():
    # 0.05 bpb better, ahead early and level late: a deterministic lead on the same text
    steady = [x - (0.1 / 16 if i < 16 else 0.0) + (0.001 if i % 2 else 0.0)
              for i, x in enumerate(LEADER)]
    assert sum(LEADER) - sum(steady) > 0.005 * sum(LEADER) + 2 * paired_se(steady, LEADER)
    assert _leader(_entry(1, "a", LEADER), _entry(2, "b", steady)) == 2


def test_entries_without_stream_parts_fall_back_to_the_margin():
    old = [_entry(1, "a", LEADER).model_copy(update={"stream_parts": None}),
           _entry(2, "b", LEADER).model_copy(update={"bpb": sum(LEADER) * 0.99})]
    assert _leader(*old) == 2
    assert "stream_parts" not in old[1].model_dump()  # not shown on /v1/leaderboard


def test_a_record_score_carries_its_parts_into_the_leaderboard_entry(settings):
    rec = make_record(budget=Budget(rows=8, tokens=800, scored_tokens=800, bytes=1600),
                      consumed=Consumed(rows=8, scored_tokens=800, bytes=1600, nats=sum(NATS)),
                      batches=[BatchEntry(step=i, offset_row=2 * i, rows=2, tokens=200,
                                          bytes=400, nats=n, t=float(i))
                               for i, n in enumerate(NATS)])
    result = score_record(rec, settings.model_copy(update={"dethrone_windows": 4}))
    assert result.stream_parts == pytest.approx([n / LN2 / 1600 for n in NATS])
