"""A replay's plan is drawn once, stored with the verification, and reused by every retry:
the real worker, store, runner and bubblewrap; the stored plan on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import threading

from fixture_bundles import queue_bundle
from sqlalchemy import select
from validator_kit import TINY

from prism_challenge.config import Settings
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.sandbox.record import RunRecord as RecordModel
from prism_challenge.sandbox.runner import Runner
from prism_challenge.storage.tables import RunRecord, Verification
from prism_challenge.validator.worker import EvaluationWorker
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.verification.replay import DrawnPlan


def _settings(tmp_path) -> Settings:
    return Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
        scoring={"heldout_positions": 256,
                 "heldout_cuts_per_row": 4},
        verification={"snapshot_steps": 2},
        validator={"work_dir": str(tmp_path / "runs")},
    )


def _verification(store, sid) -> Verification:
    with store.session() as s:
        row = s.get(Verification, sid)
        s.expunge(row)
        return row


def test_a_retried_replay_meets_the_stored_plan_even_after_the_secret_changed(
        store, tmp_path, prepared_data):
    settings = _settings(tmp_path)
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    files = {n: (TINY / n).read_bytes() for n in ("architecture.py", "training.py")}
    sid = queue_bundle(store, files, "hk-plan")
    assert EvaluationWorker(settings, store, runner, registry=None).run_once() == sid
    assert _verification(store, sid).plan is None  # queued: nothing drawn yet

    # the first attempt is interrupted as the replay starts: the plan is drawn and kept
    shutdown = threading.Event()
    interrupted = copy.copy(runner)
    interrupted.on_event = lambda _msg: shutdown.set()
    assert EvaluationWorker(settings, store, interrupted, None, cancel=shutdown
                            ).run_once() == sid
    first = _verification(store, sid)
    assert (first.status, first.attempts, first.replay) == ("queued", 0, None)
    stored = DrawnPlan.model_validate(first.plan)
    assert len(stored.snapshot_steps) == 2

    with store.session() as s:  # the run's secret changes after the first attempt
        row = s.scalars(select(RunRecord).where(RunRecord.submission_id == sid)).one()
        record = dict(row.record)
        cols = RecordModel.stored(row).columns
        held = sorted(set(cols.step[cols.held()].tolist()))
        record["sample_secret"] = "ab" * 32
        row.record = record
    assert EvaluationWorker(settings, store, runner, registry=None).run_once() == sid
    done = _verification(store, sid)
    assert done.status in ("passed", "failed") and done.attempts == 1
    assert done.plan == first.plan  # never redrawn
    assert done.replay["snapshot_steps"] == stored.snapshot_steps
    assert done.replay["probe_steps"] == [s for s in held if s not in stored.snapshot_steps]


def test_the_plan_is_stored_once_and_returned_on_every_retry(any_store):
    store = any_store
    files = {n: (TINY / n).read_bytes() for n in ("architecture.py", "training.py")}
    sid = queue_bundle(store, files, "hk-stored")
    with store.session() as s:
        s.add(Verification(submission_id=sid, status="running", attempts=1, created_at=0.0,
                           updated_at=0.0))
    draws = iter([DrawnPlan(snapshot_steps=[3, 9]), DrawnPlan(snapshot_steps=[1, 2])])
    with store.session() as s:
        assert verification_jobs.replay_plan(s, sid, lambda: next(draws)).snapshot_steps \
            == [3, 9]
    for _ in range(2):  # each retry: the stored draw, never a new one
        with store.session() as s:
            again = verification_jobs.replay_plan(s, sid, lambda: next(draws))
        assert again.snapshot_steps == [3, 9]
    assert _verification(store, sid).plan == {"snapshot_steps": [3, 9]}
    assert next(draws).snapshot_steps == [1, 2]  # the second draw was never taken
