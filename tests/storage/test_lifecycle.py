"""The lifecycle on each store backend: SQLite and a real PostgreSQL server."""

import threading
import time

import pytest

from prism_challenge.storage import IllegalTransition, Status, transition
from prism_challenge.storage.lifecycle import ALLOWED
from prism_challenge.storage.tables import Submission


def _add(store, digest="d" * 64, status=Status.RECEIVED) -> int:
    with store.session() as s:
        row = Submission(
            digest=digest, hotkey="hk", status=status.value, accepted_at=time.time(),
            updated_at=time.time(), bundle=b"x",
        )
        s.add(row)
        s.flush()
        return row.id


def _status(store, sid) -> str:
    with store.session() as s:
        return s.get(Submission, sid).status


def test_happy_path_counts_attempts(any_store):
    sid = _add(any_store)
    for new in (Status.QUEUED, Status.RUNNING, Status.QUEUED, Status.RUNNING, Status.SCORED):
        with any_store.session() as s:
            transition(s, sid, new)
    with any_store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("scored", 2)


@pytest.mark.parametrize("current", list(Status))
def test_every_disallowed_move_is_refused_and_changes_nothing(any_store, current):
    sid = _add(any_store, status=current)
    for new in Status:
        if new in ALLOWED[current]:
            continue
        with pytest.raises(IllegalTransition, match="not allowed"):
            with any_store.session() as s:
                transition(s, sid, new, reason="x")
        assert _status(any_store, sid) == current.value


def test_final_states_have_no_way_out():
    for final in (Status.SCORED, Status.REJECTED, Status.FAILED):
        assert ALLOWED[final] == frozenset()


def test_compare_and_set_refuses_stale_expectation(any_store):
    sid = _add(any_store)
    with any_store.session() as s:
        transition(s, sid, Status.QUEUED, expected=Status.RECEIVED)
    with pytest.raises(IllegalTransition, match="is queued, not received"):
        with any_store.session() as s:
            transition(s, sid, Status.QUEUED, expected=Status.RECEIVED)


def test_two_workers_racing_for_one_submission_one_wins(any_store):
    """Worker A moved queued -> running and has not committed; worker B tries the same move.
    B must wait for A's transaction and then lose the compare-and-set, never run it twice."""
    sid = _add(any_store, status=Status.QUEUED)
    outcome: dict[str, object] = {}
    a_session = any_store._sessions()
    transition(a_session, sid, Status.RUNNING, expected=Status.QUEUED)

    def worker_b():
        try:
            with any_store.session() as s:
                transition(s, sid, Status.RUNNING, expected=Status.QUEUED)
            outcome["b"] = "won"
        except IllegalTransition as exc:
            outcome["b"] = str(exc)

    b = threading.Thread(target=worker_b)
    b.start()
    b.join(0.5)
    assert b.is_alive()  # B waits on A's uncommitted write (row lock / write lock)
    a_session.commit()
    a_session.close()
    b.join(30)
    assert "is running, not queued" in outcome["b"] or "concurrently" in outcome["b"]
    with any_store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("running", 1)


def test_unknown_submission(any_store):
    with pytest.raises(IllegalTransition, match="does not exist"):
        with any_store.session() as s:
            transition(s, 999, Status.QUEUED)


def test_reason_is_recorded(any_store):
    sid = _add(any_store)
    with any_store.session() as s:
        transition(s, sid, Status.REJECTED, reason="AST001 import of os")
    with any_store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.reason) == ("rejected", "AST001 import of os")
