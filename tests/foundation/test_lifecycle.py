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


def test_happy_path_counts_attempts(store):
    sid = _add(store)
    for new in (Status.QUEUED, Status.RUNNING, Status.QUEUED, Status.RUNNING, Status.SCORED):
        with store.session() as s:
            transition(s, sid, new)
    with store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("scored", 2)


@pytest.mark.parametrize("current", list(Status))
def test_every_disallowed_move_is_refused_and_changes_nothing(store, current):
    sid = _add(store, status=current)
    for new in Status:
        if new in ALLOWED[current]:
            continue
        with pytest.raises(IllegalTransition, match="not allowed"):
            with store.session() as s:
                transition(s, sid, new, reason="x")
        assert _status(store, sid) == current.value


def test_final_states_have_no_way_out():
    for final in (Status.SCORED, Status.REJECTED, Status.FAILED):
        assert ALLOWED[final] == frozenset()


def test_compare_and_set_refuses_stale_expectation(store):
    sid = _add(store)
    with store.session() as s:
        transition(s, sid, Status.QUEUED, expected=Status.RECEIVED)
    with pytest.raises(IllegalTransition, match="is queued, not received"):
        with store.session() as s:
            transition(s, sid, Status.QUEUED, expected=Status.RECEIVED)


def test_unknown_submission(store):
    with pytest.raises(IllegalTransition, match="does not exist"):
        with store.session() as s:
            transition(s, 999, Status.QUEUED)


def test_reason_is_recorded(store):
    sid = _add(store)
    with store.session() as s:
        transition(s, sid, Status.REJECTED, reason="AST001 import of os")
    with store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.reason) == ("rejected", "AST001 import of os")
