"""The evaluation worker against the real store and the real sandbox runner."""

from __future__ import annotations

import threading
import time

import pytest
from fixture_bundles import bundle as sandbox_bundle
from fixture_bundles import queue_bundle
from sqlalchemy import select
from validator_kit import TINY

from prism_challenge.chain.metagraph import StaticMetagraph
from prism_challenge.config import Settings
from prism_challenge.isolation.bubblewrap import BubblewrapBackend
from prism_challenge.sandbox.record import RunRecord as Record
from prism_challenge.sandbox.runner import Runner
from prism_challenge.scoring import load_leaderboard
from prism_challenge.storage import IllegalTransition, Status, transition
from prism_challenge.storage.lifecycle import reopen_after_infra
from prism_challenge.storage.tables import RunRecord, Score, Submission, Verification
from prism_challenge.validator.recovery import SHUTDOWN_REASON, resume_interrupted
from prism_challenge.validator.worker import EvaluationWorker
from prism_challenge.verification import jobs as verification_jobs


def _settings(tmp_path, **validator) -> Settings:
    return Settings(
        challenge={"seq_len": 32, "token_budget": 32 * 8 * 12, "deadline_s": 30},
        sandbox={"cpu_threads": 1, "memory_bytes": 3 * 2**30, "save_grace_s": 3},
        scoring={"heldout_positions": 256, "heldout_cuts_per_row": 4},
        verification={"snapshot_steps": 2},
        validator={"work_dir": str(tmp_path / "runs"), **validator},
    )


def _queued(store, tag: str = "", files: dict[str, bytes] | None = None) -> int:
    files = dict(files or {n: (TINY / n).read_bytes() for n in ("architecture.py",
                                                                 "training.py")})
    files["training.py"] += f"# {tag}\n".encode()
    return queue_bundle(store, files, "hk" + tag)


def _row(store, sid):
    with store.session() as s:
        row = s.get(Submission, sid)
        return row.status, row.attempts, row.reason


def test_infra_failures_requeue_until_attempts_are_spent(store, tmp_path, prepared_data):
    settings = _settings(tmp_path, max_attempts=2)
    broken = Runner.from_data(settings, BubblewrapBackend(bwrap="/nonexistent/bwrap"),
                              prepared_data)
    worker = EvaluationWorker(settings, store, broken, registry=None)
    sid = _queued(store)
    assert worker.run_once() == sid
    status, attempts, reason = _row(store, sid)
    assert (status, attempts) == ("queued", 1)
    assert reason.startswith("infra: FileNotFoundError")
    assert worker.run_once() == sid
    assert _row(store, sid)[:2] == ("queued", 2)
    assert worker.run_once() is None  # attempts spent: failed instead of claimed
    status, attempts, reason = _row(store, sid)
    assert (status, attempts) == ("failed", 2)
    assert "after 2 attempts" in reason
    with store.session() as s:
        assert s.query(Score).count() == 0 and s.query(RunRecord).count() == 0


def test_a_bundle_sent_again_after_an_infra_failure_is_run_and_scored(store, tmp_path,
                                                                      prepared_data):
    """Runs that ended `infra` leave their records; the same bundle sent again is queued with
    fresh attempts, and its next run is recorded after those, not on top of them (it used to
    collide with attempt 1's record, roll back and be run again forever)."""
    settings = _settings(tmp_path)
    worker = EvaluationWorker(settings, store, Runner.from_data(settings, BubblewrapBackend(),
                                                                prepared_data), registry=None)
    sid = _queued(store)
    with store.session() as s:
        for attempt in (1, 2):
            s.add(RunRecord(submission_id=sid, attempt=attempt, created_at=float(attempt),
                            record={"exit_reason": "infra"}))
        row = s.get(Submission, sid)
        row.status, row.attempts = "failed", 2
        row.reason = "infra failure: host faults on slots [0]: Xid 79"
    with store.session() as s:
        reopen_after_infra(s, s.get(Submission, sid))
    assert _row(store, sid)[:2] == ("queued", 0)
    assert worker.run_once() == sid
    assert _row(store, sid)[0] == "scored"
    with store.session() as s:
        assert s.scalars(select(RunRecord.attempt).where(RunRecord.submission_id == sid)
                         .order_by(RunRecord.attempt)).all() == [1, 2, 3]
        assert s.get(Score, sid) is not None


def test_a_claim_is_taken_by_one_worker_only(store, tmp_path, prepared_data):
    settings = _settings(tmp_path)
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    a, b = (EvaluationWorker(settings, store, runner, registry=None) for _ in range(2))
    sid = _queued(store)
    assert a.claim() == sid
    assert b.claim() is None
    assert _row(store, sid)[:2] == ("running", 1)


def test_three_shutdowns_spend_no_attempt_and_the_run_scores_once(store, tmp_path,
                                                                   prepared_data):
    """A shutdown mid-run hands the run back without charging it; after three, the run
    completes on the first real attempt and is scored exactly once. Each step sleeps 0.3 s,
    so the shutdown 1.5 s after the claim always comes before the run's end (a tiny run on
    a prewarmed sandbox can end within that)."""
    settings = _settings(tmp_path, max_attempts=2)
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    files = {n: (TINY / n).read_bytes() for n in ("architecture.py", "training.py")}
    files["training.py"] = b"import time\n" + files["training.py"].replace(
        b"        opt.step()\n", b"        opt.step()\n        time.sleep(0.3)\n")
    sid = _queued(store, files=files)
    for _ in range(3):
        cancel = threading.Event()
        worker = EvaluationWorker(settings, store, runner, registry=None, cancel=cancel)
        threading.Timer(1.5, cancel.set).start()
        started = time.monotonic()
        assert worker.run_once() == sid
        assert time.monotonic() - started < 20
        assert _row(store, sid) == ("queued", 0, SHUTDOWN_REASON)
        assert not list((tmp_path / "runs").glob("*"))  # the run directory was cleaned up
    worker = EvaluationWorker(settings, store, runner, registry=None)
    assert worker.run_once() == sid
    assert _row(store, sid)[:2] == ("scored", 1)
    with store.session() as s:
        assert s.query(Score).filter_by(submission_id=sid).count() == 1
        assert [r.attempt for r in s.query(RunRecord).filter_by(submission_id=sid)] == [1]


@pytest.mark.parametrize("stopping", [True, False])
def test_whatever_a_stopping_validator_raises_spends_no_attempt(store, tmp_path, prepared_data,
                                                                stopping):
    """A run that fails on the validator's side while it is stopping (here: its work folder
    cannot be made) is handed back as a shutdown, not charged as an infrastructure failure;
    the same failure while running is one."""
    settings = _settings(tmp_path)
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    cancel = threading.Event()
    worker = EvaluationWorker(settings, store, runner, registry=None, cancel=cancel)
    sid = _queued(store)
    assert worker.claim() == sid
    (tmp_path / "runs").write_text("not a folder")
    if stopping:
        cancel.set()
    worker.evaluate(sid)
    status, attempts, reason = _row(store, sid)
    if stopping:
        assert (status, attempts, reason) == ("queued", 0, SHUTDOWN_REASON)
    else:
        assert (status, attempts) == ("queued", 1) and reason.startswith("infra: ")


@pytest.mark.parametrize("attempts", [1, 3])
def test_recovery_requeues_interrupted_runs_and_refunds_the_attempt(any_store, attempts):
    """The validator died mid-run: its fault, not the miner's. The run goes back to the queue
    with the interrupted attempt handed back, however many attempts were spent before."""
    store = any_store
    sid, idle = _queued(store), _queued(store, "idle")
    with store.session() as s:
        for _ in range(attempts):
            transition(s, sid, Status.RUNNING)
            if _ < attempts - 1:
                transition(s, sid, Status.QUEUED)
    assert resume_interrupted(store) == [sid]
    assert _row(store, sid)[:2] == ("queued", attempts - 1)
    assert _row(store, idle)[:2] == ("queued", 0)


def test_recovery_counts_runs_a_clean_shutdown_handed_back(any_store):
    store = any_store
    sid, other = _queued(store), _queued(store, "other")
    with store.session() as s:
        transition(s, sid, Status.RUNNING)
        transition(s, sid, Status.QUEUED, refund=True, reason=SHUTDOWN_REASON)
    assert resume_interrupted(store) == [sid]
    assert _row(store, sid)[:2] == ("queued", 0) and _row(store, other)[:2] == ("queued", 0)


def test_only_running_to_queued_refunds_an_attempt(any_store):
    store = any_store
    sid = _queued(store)
    with store.session() as s:
        with pytest.raises(IllegalTransition, match="only running -> queued"):
            transition(s, sid, Status.RUNNING, refund=True)
        transition(s, sid, Status.RUNNING)
        with pytest.raises(IllegalTransition, match="only running -> queued"):
            transition(s, sid, Status.FAILED, refund=True)
    assert _row(store, sid)[:2] == ("running", 1)


def _verification(store, sid):
    with store.session() as s:
        row = s.get(Verification, sid)
        return None if row is None else (row.status, row.attempts, row.reason)


def test_a_contender_is_replayed_before_it_can_lead(store, tmp_path, prepared_data):
    """Honest run: scored, queued for replay as the would-be leader, replayed, leads. A
    stealthy peeker that beats it: scored eligible, replayed, fails, never leads. Then a
    collapsed model is stopped early against that leader: censored, never a contender.

    The collapsed model pays about 10 nats a token (some 5 bpb): a model much more confident
    than that has a held-out bpb whose sampling noise alone crosses the gap gate. With
    `max_gain` 0.1 it is still far enough behind the leader to be stopped at 20%."""
    settings = _settings(tmp_path)
    scoring = settings.scoring.model_copy(update={
        "early_stop": settings.scoring.early_stop.model_copy(update={"max_gain": 0.1})})
    settings = settings.model_copy(update={"scoring": scoring})
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    worker = EvaluationWorker(settings, store, runner, registry=None)
    honest = _queued(store, "honest")
    assert worker.run_once() == honest
    assert _verification(store, honest) == ("queued", 0, None)
    with store.session() as s:
        assert load_leaderboard(s, settings.scoring).leader is None  # not verified yet
    assert worker.run_once() == honest  # the replay comes first
    assert _verification(store, honest)[:2] == ("passed", 1)
    with store.session() as s:
        assert load_leaderboard(s, settings.scoring).leader.submission_id == honest
        key = s.get(Score, honest).corpus
    # scored under the run's competition key, the one the runner sets its bars under
    assert key == _record(store, honest).competition == runner.competition
    cheat = _queued(store, "cheat", files=sandbox_bundle("peek", EVERY="16", GUARD="5"))
    assert worker.run_once() == cheat
    with store.session() as s:
        assert s.get(Score, cheat).eligible  # provisionally: it passes the original's screens
    assert _verification(store, cheat) == ("queued", 0, None)  # ... and would lead
    assert worker.run_once() == cheat
    status, _, reason = _verification(store, cheat)
    assert status == "failed" and "positions:" in reason
    with store.session() as s:
        board = load_leaderboard(s, settings.scoring)
    assert board.leader.submission_id == honest
    assert cheat not in [x.entry.submission_id for x in board.standings]
    assert _record(store, cheat).stopped_early is None  # judged against the leader, kept

    hopeless = _queued(store, "hopeless", files=sandbox_bundle("constant", CONFIDENCE="10"))
    assert worker.run_once() == hopeless
    record = _record(store, hopeless)
    stop = record.stopped_early
    assert (stop.checkpoint, stop.position, stop.leader_submission) == (20 / 96, 24, honest)
    assert record.consumed.rows == 24 and "stopped early at 21%" in record.exit_detail
    assert stop.bound_bpb > stop.target_bpb
    with store.session() as s:
        score = s.get(Score, hopeless)
        assert score.detail["censored"] and score.eligible, score.detail
        assert s.get(Verification, hopeless) is None  # never a contender
        board = load_leaderboard(s, settings.scoring)
    assert board.leader.submission_id == honest
    assert [e.submission_id for e in board.censored] == [hopeless]


def _record(store, sid) -> Record:
    with store.session() as s:
        row = s.scalars(select(RunRecord).where(RunRecord.submission_id == sid)).one()
        return Record.model_validate(row.record)


def test_recovery_requeues_interrupted_replays(any_store):
    store = any_store
    sid = _queued(store)
    with store.session() as s:
        s.add(Verification(submission_id=sid, status="running", attempts=1, created_at=0.0,
                           updated_at=0.0))
    assert verification_jobs.resume_interrupted(store) == [sid]
    assert _verification(store, sid)[0] == "queued"
    assert verification_jobs.claim(store) == sid
    assert _verification(store, sid)[:2] == ("running", 2)
    with store.session() as s:  # the validator's failure: not the miner's, never failed
        assert verification_jobs.retry_or_fail(s, sid, "infra: x", 2) == "incomparable"
    assert "could not be completed" in _verification(store, sid)[2]


def _scored(store, tag: str) -> int:
    sid = _queued(store, tag)
    with store.session() as s:
        transition(s, sid, Status.RUNNING)
        s.add(Score(submission_id=sid, bpb=1.0, heldout_delta=0.0, eligible=True,
                    corpus="demo", detail={}, created_at=time.time()))
        transition(s, sid, Status.SCORED)
    return sid


def test_a_replay_the_validator_cannot_complete_leaves_the_run_eligible(store, tmp_path):
    """A contender whose replay kept failing on the validator's side is neither verified nor
    failed: it stays eligible, and is never queued again (nor served to peers as failed)."""
    settings = _settings(tmp_path)
    sid = _scored(store, "x")
    with store.session() as s:
        assert verification_jobs.queue_contenders(s, settings) == [sid]
    for _ in range(settings.verification.max_attempts):
        assert verification_jobs.claim(store) == sid
        with store.session() as s:
            verification_jobs.retry_or_fail(s, sid, "infra: OSError: disk full",
                                            settings.verification.max_attempts)
    assert _verification(store, sid)[0] == "incomparable"
    with store.session() as s:
        board = load_leaderboard(s, settings.scoring)
        assert verification_jobs.queue_contenders(s, settings) == []
    (entry,) = [x.entry for x in board.standings]
    assert entry.submission_id == sid and entry.eligible and board.ineligible == []
    assert board.leader is None  # unverified here: it cannot lead on this validator alone


def test_a_deregistered_hotkey_takes_no_replay_slot(store, tmp_path):
    """A worker queues contenders as the weights rank: among registered hotkeys only."""
    settings = _settings(tmp_path, slots=8)
    gone, kept = _scored(store, "gone"), _scored(store, "kept")
    worker = EvaluationWorker(settings, store, None, None,
                              metagraph=StaticMetagraph.of(["hkkept"]))
    with store.session() as s:
        assert worker._queue_replays(s) == [kept]
    assert _verification(store, gone) is None


def test_replay_queue_and_claims_race_safely(any_store, tmp_path):
    """Two writers queue contenders at once (a worker and the epoch loop): the second waits
    and queues nothing twice. Two workers then claim together: each replay goes to one."""
    store = any_store
    settings = _settings(tmp_path, slots=8)
    sids = sorted(_scored(store, f"c{i}") for i in range(6))
    first = store._sessions()
    assert sorted(verification_jobs.queue_contenders(first, settings)) == sids
    second: dict[str, list[int]] = {}

    def queue_again() -> None:
        with store.session() as s:
            second["queued"] = verification_jobs.queue_contenders(s, settings)

    racer = threading.Thread(target=queue_again)
    racer.start()
    racer.join(0.5)
    assert racer.is_alive()  # waits for the first writer instead of reading past it
    first.commit()
    first.close()
    racer.join(30)
    assert second == {"queued": []}
    claimed: list[list[int]] = [[], []]

    def drain(mine: list[int]) -> None:
        while (sid := verification_jobs.claim(store)) is not None:
            mine.append(sid)

    workers = [threading.Thread(target=drain, args=(c,)) for c in claimed]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert sorted(claimed[0] + claimed[1]) == sids
    assert {_verification(store, sid)[:2] for sid in sids} == {("running", 1)}


def test_a_replay_claimed_as_the_shutdown_begins_goes_back_unstarted(store, tmp_path, caplog,
                                                                     prepared_data):
    """The stop can land between a slot's last look at it and its claim of a replay: the
    claimed replay is handed back as it was (no attempt spent) and no sandbox starts."""
    settings = _settings(tmp_path)
    runner = Runner.from_data(settings, BubblewrapBackend(), prepared_data)
    worker = EvaluationWorker(settings, store, runner, registry=None)
    honest = _queued(store, "honest")
    assert worker.run_once() == honest
    assert _verification(store, honest) == ("queued", 0, None)
    assert verification_jobs.claim(store) == honest
    worker.cancel.set()
    with caplog.at_level("INFO", logger="prism"):
        worker.verify(honest)
    assert _verification(store, honest)[:2] == ("queued", 0)
    assert "contender replay" not in caplog.text
    assert not (tmp_path / "runs" / f"{honest}-replay").exists()
