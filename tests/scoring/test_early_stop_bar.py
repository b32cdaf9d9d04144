"""Which runs are judged against the leader's bar (`scoring/early_stop.leader_to_beat`): only
those after the leader in precedence (commitment block, then uid), the order the lead is
replayed in, whatever order this validator accepted the uploads in."""

from __future__ import annotations

from scoring_records import make_record
from verified_kit import mark_verified

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.scoring import record_score, score_record
from prism_challenge.scoring.early_stop import leader_to_beat
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Submission


def _submission(store, tag: str, block: int, uid: int, accepted_at: float) -> int:
    with store.session() as s:
        row = Submission(digest=tag * 64, hotkey=f"hk-{tag}", status="running",
                         accepted_at=accepted_at, updated_at=accepted_at, reviewed="passed",
                         bundle=b"x", block=block, uid=uid)
        s.add(row)
        s.flush()
        return row.id


def test_only_runs_after_the_leader_in_precedence_meet_its_bar(store, settings):
    record = make_record()
    leader = _submission(store, "a", block=20, uid=5, accepted_at=1.0)
    with store.session() as s:
        record_score(s, leader, score_record(record, settings), "demo", now=1.0)
        mark_verified(s, leader)
        s.add(RunRecordRow(submission_id=leader, attempt=1, record=record.model_dump(mode="json"),
                           steps=record.steps_blob(), created_at=1.0))
    # accepted after the leader, but committed before it: it precedes the leader, so the
    # replay compares it with whoever led before it (and the leader must then dethrone it)
    earlier = _submission(store, "b", block=10, uid=7, accepted_at=2.0)
    same_block = _submission(store, "c", block=20, uid=3, accepted_at=3.0)  # lower uid
    later = _submission(store, "d", block=30, uid=1, accepted_at=0.5)  # accepted first
    with store.session() as s:
        bars = {sid: leader_to_beat(s, settings, "demo", sid)
                for sid in (earlier, same_block, later)}
        assert bars[earlier] is None and bars[same_block] is None
        entry, leader_record = bars[later]
        assert entry.submission_id == leader
        assert leader_record.consumed == record.consumed
        assert leader_to_beat(s, settings, "other-corpus", later) is None


def test_a_deregistered_leader_sets_no_bar(store, settings):
    """The bar is the leader among registered hotkeys, as in the weights: a run stopped
    against a leader that no longer counts would be censored for nothing."""
    record = make_record()
    first = _submission(store, "a", block=10, uid=5, accepted_at=1.0)
    second = _submission(store, "b", block=20, uid=6, accepted_at=2.0)
    for sid in (first, second):
        with store.session() as s:
            record_score(s, sid, score_record(record, settings), "demo", now=1.0)
            mark_verified(s, sid)
            s.add(RunRecordRow(submission_id=sid, attempt=1,
                               record=record.model_dump(mode="json"),
                               steps=record.steps_blob(), created_at=1.0))
    later = _submission(store, "d", block=30, uid=1, accepted_at=3.0)
    with store.session() as s:
        assert leader_to_beat(s, settings, "demo", later)[0].submission_id == first
        both = StaticMetagraph.of(["hk-a", "hk-b", "hk-d"])
        assert leader_to_beat(s, settings, "demo", later, both)[0].submission_id == first
        without_a = StaticMetagraph.of(["hk-b", "hk-d"])
        assert leader_to_beat(s, settings, "demo", later, without_a)[0].submission_id == second
        assert leader_to_beat(s, settings, "demo", later, StaticMetagraph.of(["hk-d"])) is None
