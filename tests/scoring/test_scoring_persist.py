import pytest
from scoring_records import make_record, with_eval
from sqlalchemy import func, select
from verified_kit import mark_verified

from prism_challenge.scoring import ScoreExists, load_leaderboard, record_score, score_record
from prism_challenge.storage.tables import Score, Submission


def add_submission(store, digest, hotkey, accepted_at, reviewed="passed"):
    with store.session() as s:
        row = Submission(
            digest=digest, hotkey=hotkey, status="running", accepted_at=accepted_at,
            updated_at=accepted_at, reviewed=reviewed, bundle=b"x", name=f"n-{digest[:4]}",
        )
        s.add(row)
        s.flush()
        return row.id


def test_record_score_persists_result_and_refuses_a_second_score(store, settings):
    sid = add_submission(store, "a" * 64, "hk1", 10.0)
    result = score_record(make_record(), settings)
    with store.session() as s:
        record_score(s, sid, result, "demo", now=123.0)
    with store.session() as s:
        row = s.get(Score, sid)
        assert row.bpb == result.bpb and row.heldout_delta == result.heldout_delta
        assert row.eligible is True and row.reason is None and row.corpus == "demo"
        assert row.created_at == 123.0
        assert row.detail["prequential_bpb"] == result.prequential_bpb
        assert row.detail["notes"] == result.notes
    other = score_record(with_eval(make_record(), val_bpb_trained=99.0), settings)
    with pytest.raises(ScoreExists), store.session() as s:
        record_score(s, sid, other, "demo")
    with store.session() as s:
        assert s.get(Score, sid).bpb == result.bpb  # the first score stands


def test_ineligible_score_keeps_reasons_and_null_delta(store, settings):
    sid = add_submission(store, "b" * 64, "hk1", 10.0)
    result = score_record(make_record(eval=None), settings)
    with store.session() as s:
        record_score(s, sid, result, "demo")
    with store.session() as s:
        row = s.get(Score, sid)
        assert row.eligible is False
        assert row.reason.startswith("missing_eval:")
        assert row.heldout_delta == 0.0 and row.detail["heldout_delta"] is None


@pytest.mark.parametrize(("sid", "corpus", "message"), [
    (999, "demo", "does not exist"), (None, "", "corpus"), (None, "x" * 33, "corpus")])
def test_bad_input_leaves_no_row(store, settings, sid, corpus, message):
    real = add_submission(store, "c" * 64, "hk1", 10.0)
    with pytest.raises(ValueError, match=message), store.session() as s:
        record_score(s, sid or real, score_record(make_record(), settings), corpus)
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Score)) == 0


def test_leaderboard_from_store_marks_unreviewed_and_uses_settings(store, settings):
    base = score_record(make_record(), settings)
    better = base.model_copy(update={"bpb": base.bpb - 0.5})
    a = add_submission(store, "d" * 64, "hk-a", 1.0)
    b = add_submission(store, "e" * 64, "hk-b", 2.0, reviewed="unreviewed")
    with store.session() as s:
        record_score(s, a, base, "demo", now=5.0)
        record_score(s, b, better, "demo", now=6.0)
        mark_verified(s, a)
        mark_verified(s, b)
    with store.session() as s:
        board = load_leaderboard(s, settings)
    assert board.corpus == "demo"
    assert board.leader.submission_id == b
    assert [(x.entry.hotkey, x.entry.unreviewed) for x in board.standings] == [
        ("hk-b", True), ("hk-a", False)
    ]
    assert board.standings[1].entry.name == "n-dddd"


def test_leaderboard_entries_carry_the_held_out_bpb_its_se_and_the_gap_bound(store, settings):
    rec = with_eval(make_record(), val_bpb_trained_se=0.04)
    result = score_record(rec, settings)
    a = add_submission(store, "a" * 64, "hk-a", 1.0)
    with store.session() as s:
        record_score(s, a, result, "demo", now=5.0)
    with store.session() as s:
        (entry,) = [x.entry for x in load_leaderboard(s, settings).standings]
    assert (entry.heldout_bpb, entry.heldout_se) == (3.0, 0.04)
    assert entry.gap == pytest.approx(result.gap) and entry.gap_bound == pytest.approx(
        result.gap - 2 * 0.04)


def test_a_failed_verification_makes_the_entry_ineligible_with_its_reason(store, settings):
    a = add_submission(store, "f" * 64, "hk-a", 1.0)
    b = add_submission(store, "9" * 64, "hk-b", 2.0)
    base = score_record(make_record(), settings)
    with store.session() as s:
        record_score(s, a, base, "demo", now=5.0)
        record_score(s, b, base.model_copy(update={"bpb": base.bpb - 1}), "demo", now=6.0)
        mark_verified(s, a)
        mark_verified(s, b, status="failed")
    with store.session() as s:
        board = load_leaderboard(s, settings)
    assert board.leader.submission_id == a
    assert [e.submission_id for e in board.ineligible] == [b]
    assert board.ineligible[0].reason.startswith("verification: replay")
