"""The evaluation worker: queued submission -> sandboxed run -> score -> registry, and
contender replays: scored run -> replay -> verdict.

Claiming is a compare-and-set (queued -> running), and the score row is written in the same
transaction as running -> scored, so two workers (or a restarted validator) can never score
a submission twice. A run that fails on the validator's side goes back to the queue until its
attempts are spent. Replays come first: they decide who is paid. A node gives each worker its
own slot (GPUs and cores), held for a whole run or replay; the shared `Rotation` probes the
slot before it takes one and sends a run that met a host fault to another slot. The runner
may also be a cluster slot (`cluster.ray_pool.RemoteSlot`): the same calls, run on a node.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TypeVar

from sqlalchemy import func, select

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.bundle import Bundle
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.config.settings import Settings
from prism_challenge.hardware.faults import BLAMEABLE, blamed
from prism_challenge.hardware.slots import Slot
from prism_challenge.registry.observation import Observation
from prism_challenge.registry.service import Registry
from prism_challenge.sandbox.early_stop import EarlyStopPlan
from prism_challenge.sandbox.heldout_round import RoundClock
from prism_challenge.sandbox.record import RunRecord
from prism_challenge.sandbox.runner import Cancelled, Runner
from prism_challenge.scoring import ScoringError, record_score, score_record
from prism_challenge.scoring.early_stop import leader_to_beat
from prism_challenge.storage import IllegalTransition, Status, Store, transition
from prism_challenge.storage.tables import RunRecord as RunRecordRow
from prism_challenge.storage.tables import Submission, Verification
from prism_challenge.validator.recovery import SHUTDOWN_REASON
from prism_challenge.validator.rotation import Rotation
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.verification.replay import ReplayRecord, draw_plan
from prism_challenge.verification.verdict import verdict

log = logging.getLogger("prism.validator")
R = TypeVar("R", RunRecord, ReplayRecord)


class EvaluationWorker:
    def __init__(self, settings: Settings, store: Store, runner: Runner,
                 registry: Registry | None, *, cancel: threading.Event | None = None,
                 slot: Slot | None = None, rotation: Rotation | None = None,
                 capacity: Callable[[], int] | None = None,
                 metagraph: MetagraphView | None = None, hotkey: str | None = None) -> None:
        """`metagraph` and `hotkey` (this validator's): contenders and the early-stop bar
        are chosen as the weights are, on the same ranking among registered hotkeys."""
        self.settings = settings
        self.store = store
        self.runner = runner if slot is None else runner.on_slot(slot)
        self.registry = registry
        self.cancel = cancel or threading.Event()
        self.work_dir = Path(settings.validator.work_dir)
        self.rounds = RoundClock.open(self.work_dir.parent / "heldout-master.key",
                                      settings.scoring.heldout_round_s)
        self.slot = slot
        self.rotation = rotation if slot is not None else None
        self.capacity = capacity  # the slots a cluster has now (validator.executor: ray)
        self.metagraph = metagraph
        self.hotkey = hotkey

    def _lease(self):
        """Own the slot for a whole job (nothing else runs on its devices meanwhile)."""
        return self.slot.lease() if self.slot is not None else nullcontext()

    def _slot_count(self) -> int | None:
        if self.capacity is not None:
            return self.capacity()
        return len(self.rotation.slots) if self.rotation is not None else None

    def _queue_replays(self, s, now: float | None = None) -> list[int]:
        """Queue the contenders of what this validator ranks (the epoch loop does the same):
        the shared-input aggregate when agreement is on, registered hotkeys only."""
        ranked = ranked_entries(s, self.settings, self.hotkey, now=now)
        return verification_jobs.queue_contenders(s, self.settings, now=now,
                                                  slots=self._slot_count(),
                                                  entries=ranked.entries,
                                                  metagraph=self.metagraph,
                                                  corpus=ranked.corpus)

    def claim(self, *, admitted: bool = False) -> int | None:
        """Take the oldest queued submission (or fail it when its attempts are spent)."""
        max_attempts = self.settings.validator.max_attempts
        with self.store.session() as s:
            ids = list(s.scalars(
                select(Submission.id).where(Submission.status == Status.QUEUED.value)
                .order_by(Submission.accepted_at, Submission.id).limit(8)))
        if self.rotation is not None:  # before a slot takes a run, its probe must pass
            ids = [i for i in ids if self.rotation.may_take(self.slot, i)]
            if not ids or not (admitted or self.rotation.admit(self.slot)):
                return None
        if self.cancel.is_set():
            return None
        for sid in ids:
            try:
                with self.store.session() as s:
                    row = s.get(Submission, sid)
                    if row.attempts >= max_attempts:
                        if self.rotation is not None:
                            self.rotation.settle(sid)
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
        """One job on this slot: a queued contender replay first, else the oldest queued
        submission; None when there was none, or when the validator is stopping (nothing new
        starts after shutdown began, even between the slot's probe and the claim)."""
        if self.cancel.is_set():
            return None
        admitted = False
        if self.rotation is not None and self._replay_waiting():
            admitted = self.rotation.admit(self.slot)
            if not admitted or self.cancel.is_set():
                return None
        if self.rotation is None or admitted:
            sid = verification_jobs.claim(self.store)
            if sid is not None:
                self.verify(sid)
                return sid
        sid = self.claim(admitted=admitted)
        if sid is not None:
            self.evaluate(sid)
        return sid

    def _replay_waiting(self) -> bool:
        with self.store.session() as s:
            return bool(s.scalar(select(func.count()).select_from(Verification)
                                 .where(Verification.status == "queued")))

    def verify(self, sid: int) -> None:
        """Replay a contender and record the verdict (then look for the next contender)."""
        max_attempts = self.settings.verification.max_attempts
        with self.store.session() as s:
            row = s.get(Submission, sid)
            bundle = Bundle.from_wire(row.bundle)
            rec = s.scalars(select(RunRecordRow).where(RunRecordRow.submission_id == sid)
                            .order_by(RunRecordRow.attempt.desc())).first()
            record = RunRecord.stored(rec)
            plan = verification_jobs.replay_plan(
                s, sid, lambda: draw_plan(record,
                                          snapshots=self.settings.verification.snapshot_steps))
        if self.cancel.is_set():  # the shutdown began while it was claimed: back, unstarted
            with self.store.session() as s:
                verification_jobs.retry_or_fail(s, sid, SHUTDOWN_REASON, max_attempts,
                                                counted=False)
            return
        run_dir = self.work_dir / f"{sid}-replay"
        log.info("submission %s: contender replay", sid)
        started = time.monotonic()
        try:
            with self._lease():
                replay = self.runner.replay(bundle.files, record, run_dir, cancel=self.cancel,
                                            plan=plan)
                # infra only on the host's evidence; a retry meets the same plan anyway
                replay = self._blame_host(replay, started)
            result = verdict(replay, self.settings.verification)
        except Exception as exc:  # the validator's side failed (or stopped it): retry later
            if isinstance(exc, Cancelled) or self.cancel.is_set():
                # whatever a stopping validator's replay raised, the shutdown caused it
                log.debug("submission %s: replay stopped by the shutdown: %r", sid, exc)
                with self.store.session() as s:
                    verification_jobs.retry_or_fail(s, sid, SHUTDOWN_REASON,
                                                    max_attempts, counted=False)
                return
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
                                     replay=replay.model_dump(mode="json"),
                                     comparable=result.comparable)
            queued = self._queue_replays(s)
        log.info("submission %s: replay %s %s; next contenders %s", sid,
                 "passed" if result.passed else "failed" if result.comparable
                 else "not comparable", "; ".join(result.reasons)[:300],
                 queued)

    def evaluate(self, sid: int) -> None:
        with self.store.session() as s:
            row = s.get(Submission, sid)
            # the run's number: its attempt, after any run stored before the attempts were
            # renewed (a bundle sent again after an infrastructure failure starts from 0)
            last = s.scalar(select(func.max(RunRecordRow.attempt))
                            .where(RunRecordRow.submission_id == sid)) or 0
            bundle, attempt = Bundle.from_wire(row.bundle), max(row.attempts, last + 1)
        run_dir = self.work_dir / f"{sid}-{attempt}"
        where = f" on {self.slot.describe()}" if self.slot is not None else ""
        log.info("submission %s: attempt %s%s", sid, attempt, where)
        started = time.monotonic()
        try:  # from here on, whatever fails on our side sends the submission back
            early_stop = self._early_stop_plan(sid)
            with self._lease():
                record = self.runner.run(bundle.files, bundle.digest, run_dir,
                                         cancel=self.cancel, early_stop=early_stop,
                                         heldout_round=self.rounds.current())
                record = self._blame_host(record, started)
        except Exception as exc:  # the validator's side failed (or stopped it): retry later
            if isinstance(exc, Cancelled) or self.cancel.is_set():
                # the validator's interruption, whatever the run raised: no attempt spent
                log.debug("submission %s: run stopped by the shutdown: %r", sid, exc)
                with self.store.session() as s:
                    transition(s, sid, Status.QUEUED, expected=Status.RUNNING, refund=True,
                               reason=SHUTDOWN_REASON)
                return
            log.exception("submission %s: run failed on the validator's side", sid)
            with self.store.session() as s:
                self._infra(s, sid, f"{type(exc).__name__}: {exc}")
            return
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        self._score(sid, attempt, bundle, record)

    def _early_stop_plan(self, sid: int) -> EarlyStopPlan | None:
        """The bar this run must be able to clear, fixed before it starts from the store and
        the runner's data version (a cluster slot answers with the head's own data)."""
        with self.store.session() as s:
            leader = leader_to_beat(s, self.settings.scoring, self.runner.competition, sid,
                                    self.metagraph)
        if leader is None:
            return None
        entry, record = leader
        return self.runner.early_stop_plan(entry.bpb, entry.submission_id, record)

    def _blame_host(self, record: R, started: float) -> R:
        """A crash or a hang (of a run or a replay) on a slot whose GPUs logged a hardware
        Xid meanwhile, or whose probe now fails, was the host's: it becomes infra. Nothing
        the sandbox printed counts."""
        if self.rotation is None or record.exit_reason not in BLAMEABLE:
            return record
        return blamed(record, self.rotation.host_evidence(self.slot, started - 1.0))

    def _infra(self, s, sid: int, detail: str) -> None:
        """The run failed on the host's side: retry it on another slot, never charge it."""
        if self.rotation is None:
            transition(s, sid, Status.QUEUED, expected=Status.RUNNING,
                       reason=f"infra: {detail}"[:500])
            return
        retry, faulted = self.rotation.host_fault(sid, self.slot)
        if retry:
            log.warning("submission %s: host fault on %s, requeued for another slot: %s",
                        sid, self.slot.describe(), detail[:300])
            transition(s, sid, Status.QUEUED, expected=Status.RUNNING,
                       reason=f"infra: {detail[:460]} (slot {self.slot.index})")
            return
        log.error("submission %s: host faults on slots %s; failed as an infrastructure "
                  "failure, not charged to the miner", sid, faulted)
        transition(s, sid, Status.FAILED, expected=Status.RUNNING,
                   reason=f"infra failure: host faults on slots {faulted}: {detail}"[:500])

    def _score(self, sid: int, attempt: int, bundle: Bundle, record: RunRecord) -> None:
        now = time.time()
        with self.store.session() as s:
            s.add(RunRecordRow(submission_id=sid, attempt=attempt,
                               record=record.model_dump(mode="json"),
                               steps=record.steps_blob(), created_at=now))
            if record.exit_reason == "infra":
                self._infra(s, sid, record.exit_detail)
                return
            if self.rotation is not None:
                self.rotation.settle(sid)
            try:
                result = score_record(record, self.settings.scoring)
            except ScoringError as exc:
                transition(s, sid, Status.FAILED, expected=Status.RUNNING,
                           reason=f"unscorable record: {exc}"[:500])
                return
            record_score(s, sid, result, record.competition, now=now)
            reason = None if result.eligible else "; ".join(result.reasons)[:1000]
            transition(s, sid, Status.SCORED, expected=Status.RUNNING, reason=reason)
            row = s.get(Submission, sid)
            hotkey, accepted_at = row.hotkey, row.accepted_at
            self._queue_replays(s, now)
        log.info("submission %s scored: bpb %.4f eligible %s", sid, result.bpb, result.eligible)
        self.observe(sid, hotkey, bundle, record, result.bpb, result.eligible, accepted_at,
                     censored=result.censored)

    def observe(self, sid: int, hotkey: str, bundle: Bundle, record: RunRecord, bpb: float,
                eligible: bool, accepted_at: float, *, censored: bool = False) -> None:
        if self.registry is None:
            return
        try:
            self.registry.observe(Observation(
                submission_id=sid, hotkey=hotkey, digest=bundle.digest, measured=record.axes,
                declared=dict(bundle.meta.axes or {}), bpb=bpb, eligible=eligible,
                censored=censored, accepted_at=accepted_at, competition=record.competition))
        except Exception:  # the registry must never block scoring; caught up at start-up
            log.exception("submission %s: registry observation failed", sid)

    def catch_up_registry(self) -> int:
        """Hand the registry the scored submissions it has not observed (a crash between a
        score and its observation); returns how many. Start-up reads ids and ledger keys,
        then one missing submission's record at a time: never every record at once."""
        if self.registry is None:
            return 0
        from prism_challenge.storage.tables import RegistryEvent, Score

        with self.store.session() as s:
            observed = set(s.scalars(select(RegistryEvent.key)
                                     .where(RegistryEvent.key.like("obs:%"))))
            scored = s.scalars(select(Submission.id).join(Score, Score.submission_id ==
                                                          Submission.id)
                               .order_by(Submission.accepted_at)).all()
        missing = [sid for sid in scored if f"obs:{sid}" not in observed]
        for sid in missing:
            with self.store.session() as s:
                sub, score = s.get(Submission, sid), s.get(Score, sid)
                rec = s.scalars(select(RunRecordRow).where(RunRecordRow.submission_id == sid)
                                .order_by(RunRecordRow.attempt.desc())).first()
                if rec is None:
                    continue
                item = (sub.hotkey, sub.bundle, rec.record, score.bpb, score.eligible,
                        sub.accepted_at, bool((score.detail or {}).get("censored")))
            hotkey, wire, raw, bpb, eligible, accepted_at, censored = item
            self.observe(sid, hotkey, Bundle.from_wire(wire), RunRecord.model_validate(raw),
                         bpb, eligible, accepted_at, censored=censored)
        return len(missing)
