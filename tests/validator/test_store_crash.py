"""A node killed (SIGKILL) in the middle of writing a score, on each store backend.

Its open transaction dies with it: on SQLite the uncommitted WAL frames are ignored and the
file lock is dropped by the kernel, on PostgreSQL the server rolls back when the connection
drops. Either way the restarted node finds the submission running with no score and resumes it.
(The end-to-end version, a real `prism validator` killed mid-training, is test_crash_resume.)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

from sqlalchemy import func, select

from prism_challenge.storage import Status, Store, transition
from prism_challenge.storage.tables import RunRecord, Score, Submission
from prism_challenge.validator.recovery import resume_interrupted


def _die_while_scoring(url: str, sid: int, ready) -> None:  # noqa: ANN001
    store = Store(url)
    with store.session() as s:
        transition(s, sid, Status.RUNNING, expected=Status.QUEUED)
    s = store._sessions()  # the scoring transaction, never committed
    s.add(RunRecord(submission_id=sid, attempt=1, record={"bpb": 1.0}, created_at=time.time()))
    s.add(Score(submission_id=sid, bpb=1.0, heldout_delta=0.0, eligible=True, corpus="demo",
                detail={}, created_at=time.time()))
    transition(s, sid, Status.SCORED, expected=Status.RUNNING)
    s.flush()
    ready.set()
    time.sleep(120)


def _count(store: Store, table) -> int:  # noqa: ANN001
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(table))


def test_sigkill_mid_transaction_leaves_a_resumable_run(store_url):
    store = Store(store_url)
    with store.session() as s:
        row = Submission(digest="d" * 64, hotkey="h", status="received", accepted_at=0.0,
                         updated_at=0.0, bundle=b"x")
        s.add(row)
        s.flush()
        transition(s, row.id, Status.QUEUED)
        sid = row.id
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    node = ctx.Process(target=_die_while_scoring, args=(store_url, sid, ready))
    node.start()
    assert ready.wait(60)
    os.kill(node.pid, signal.SIGKILL)
    node.join(10)
    assert node.exitcode == -signal.SIGKILL
    with store.session() as s:
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("running", 1)
    assert (_count(store, Score), _count(store, RunRecord)) == (0, 0)
    assert resume_interrupted(store) == [sid]
    with store.session() as s:  # the dead node's row lock is gone: the next claim proceeds
        transition(s, sid, Status.RUNNING, expected=Status.QUEUED)
    with store.session() as s:  # the interrupted attempt was refunded: this is attempt 1 again
        row = s.get(Submission, sid)
        assert (row.status, row.attempts) == ("running", 1)
    store.close()
