"""The evaluation worker: queued submission -> sandboxed run -> score -> registry, and
contender replays: scored run -> replay -> verdict.

Claiming is a compare-and-set (queued -> running), and the score row is written in the same
transaction as running -> scored, so two workers (or a restarted validator) can never score
a submission twice. A run that fails on the validator's side goes back to the queue until its
attempts are spent. Replays come first: they decide who is paid.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from sqlalchemy import select

from prism_challenge.bundle import Bundle
from prism_challenge.config.settings import Settings
from prism_challenge.registry.observation import Observation
from prism_challenge.registry.service import Registry
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Cancelled, Runner
from prism_challenge.scoring import ScoringError, record_score, score_record
from prism_challenge.scoring.verification import verdict
from prism_challenge.storage import IllegalTransition, Status, Store, transition
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Submission
from prism_challenge.validator import verification_jobs

log = logging.getLogger("prism.validator")


class EvaluationWorker:
    def __init__(self, settings: Settings, store: Store, runner: Runner,
                 registry: Registry | None, *, cancel: threading.Event | None = None) -> None:
        self.settings = settings
        self.store = store
        self.runner = runner
        self.registry = registry
        self.cancel = cancel or threading.Event()
        self.work_dir = Path(settings.validator.work_dir)

    def claim(self) -> int | None:
        """Take the oldest queued submission (or fail it when its attempts are spent)."""
        max_attempts = self.settings.validator.max_attempts
        with self.store.session() as s:
            ids = list(s.scalars(
                select(Submission.id).where(Submission.status == Status.QUEUED.value)
                .order_by(Submission.accepted_at, Submission.id).limit(8)))
        for sid in ids:
            try:
                with self.store.session() as s:
                    row = s.get(Submission, sid)
                    if row.attempts >= max_attempts:
                        transition(s, sid, Status.FAILED, expected=Status.QUEUED,
                                   reason=f"{row.reason or 'failed'} (after {row.attempts} "
                                          "attempts)")
                        continue
                    transition(s, sid, Status.RUNNING, expected=Status.QUEUED)
                    return sid
            except IllegalTransition:
                continue  # another worker took it
        return None

    def run_once(self) -> int | None:
        sid = verification_jobs.claim(self.store)
        if sid is not None:
            self.verify(sid)
            return sid
        sid = self.claim()
        if sid is not None:
            self.evaluate(sid)
        return sid

    def verify(self, sid: int) -> None:
        """Replay a contender and record the verdict (then look for the next contender)."""
        max_attempts = self.settings.verification.max_attempts
        with self.store.session() as s:
            row = s.get(Submission, sid)
            bundle = Bundle.from_wire(row.bundle)
            rec = s.scalars(select(RunRecordRow).where(RunRecordRow.submission_id == sid)
                            .order_by(RunRecordRow.attempt.desc())).first()
            record = RunRecord.model_validate(rec.record)
        run_dir = self.work_dir / f"{sid}-replay"
        log.info("submission %s: contender replay", sid)
        try:
            replay = self.runner.replay(bundle.files, record, run_dir, cancel=self.cancel)
            result = verdict(replay, self.settings.verification)
        except Cancelled:
            with self.store.session() as s:
                verification_jobs.retry_or_fail(s, sid, "interrupted by a validator shutdown",
                                                max_attempts, counted=False)
            return
        except Exception as exc:  # the validator's side failed: retry later
            log.exception("submission %s: replay failed on the validator's side", sid)
            with self.store.session() as s:
                verification_jobs.retry_or_fail(s, sid, f"infra: {type(exc).__name__}: {exc}"
                                                [:500], max_attempts)
            return
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        with self.store.session() as s:
            verification_jobs.finish(s, sid, passed=result.passed,
                                     reason="; ".join(result.reasons)[:2000] or None,
                                     replay=replay.model_dump(mode="json"))
            queued = verification_jobs.queue_contenders(s, self.settings)
        log.info("submission %s: replay %s %s; next contenders %s", sid,
                 "passed" if result.passed else "failed", "; ".join(result.reasons)[:300],
                 queued)

    def evaluate(self, sid: int) -> None:
        with self.store.session() as s:
            row = s.get(Submission, sid)
            bundle, attempt = Bundle.from_wire(row.bundle), row.attempts
        run_dir = self.work_dir / f"{sid}-{attempt}"
        log.info("submission %s: attempt %s", sid, attempt)
        try:
            record = self.runner.run(bundle.files, bundle.digest, run_dir, cancel=self.cancel)
        except Cancelled:
            self._requeue(sid, "interrupted by a validator shutdown")
            return
        except Exception as exc:  # the validator's side failed: retry later
            log.exception("submission %s: run failed on the validator's side", sid)
            self._requeue(sid, f"infra: {type(exc).__name__}: {exc}"[:500])
            return
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        self._score(sid, attempt, bundle, record)

    def _requeue(self, sid: int, reason: str) -> None:
        with self.store.session() as s:
            transition(s, sid, Status.QUEUED, expected=Status.RUNNING, reason=reason)

    def _score(self, sid: int, attempt: int, bundle: Bundle, record: RunRecord) -> None:
        now = time.time()
        with self.store.session() as s:
            s.add(RunRecordRow(submission_id=sid, attempt=attempt,
                               record=record.model_dump(mode="json"), created_at=now))
            if record.exit_reason == "infra":
                transition(s, sid, Status.QUEUED, expected=Status.RUNNING,
                           reason=f"infra: {record.exit_detail}"[:500])
                return
            try:
                result = score_record(record, self.settings.scoring)
            except ScoringError as exc:
                transition(s, sid, Status.FAILED, expected=Status.RUNNING,
                           reason=f"unscorable record: {exc}"[:500])
                return
            record_score(s, sid, result, record.corpus, now=now)
            reason = None if result.eligible else "; ".join(result.reasons)[:1000]
            transition(s, sid, Status.SCORED, expected=Status.RUNNING, reason=reason)
            row = s.get(Submission, sid)
            hotkey, accepted_at = row.hotkey, row.accepted_at
            verification_jobs.queue_contenders(s, self.settings, now=now)
        log.info("submission %s scored: bpb %.4f eligible %s", sid, result.bpb, result.eligible)
        self.observe(sid, hotkey, bundle, record, result.bpb, result.eligible, accepted_at)

    def observe(self, sid: int, hotkey: str, bundle: Bundle, record: RunRecord, bpb: float,
                eligible: bool, accepted_at: float) -> None:
        if self.registry is None:
            return
        try:
            self.registry.observe(Observation(
                submission_id=sid, hotkey=hotkey, digest=bundle.digest, measured=record.axes,
                declared=dict(bundle.meta.axes or {}), bpb=bpb, eligible=eligible,
                accepted_at=accepted_at))
        except Exception:  # the registry must never block scoring; caught up at start-up
            log.exception("submission %s: registry observation failed", sid)

    def catch_up_registry(self) -> int:
        """Hand every scored submission to the registry again (idempotent per submission)."""
        if self.registry is None:
            return 0
        from prism_challenge.storage.tables import Score

        with self.store.session() as s:
            rows = s.execute(
                select(Submission, Score).join(Score, Score.submission_id == Submission.id)
                .order_by(Submission.accepted_at)).all()
            items = []
            for sub, score in rows:
                rec = s.scalars(select(RunRecordRow).where(RunRecordRow.submission_id == sub.id)
                                .order_by(RunRecordRow.attempt.desc())).first()
                if rec is not None:
                    items.append((sub.id, sub.hotkey, sub.bundle, rec.record, score.bpb,
                                  score.eligible, sub.accepted_at))
        for sid, hotkey, wire, raw, bpb, eligible, accepted_at in items:
            self.observe(sid, hotkey, Bundle.from_wire(wire), RunRecord.model_validate(raw), bpb,
                         eligible, accepted_at)
        return len(items)
