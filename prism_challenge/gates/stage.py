"""The gate stage: every due `received` submission goes through three gates in order.

1. AST policy + contract (`check_policy`): a violation is a final rejection; the LLM never
   sees such a bundle, so no prompt injection can undo it.
2. Duplicates: a near-copy of another hotkey's earlier standing bundle is rejected with a
   pointer to the original; otherwise the fingerprint is recorded.
3. LLM review (cached by digest and policy version): allow -> queued, reject -> rejected.
   If the reviewer is unavailable the submission stays `received` with a reason and a
   `not_before` pushed back exponentially (llm.backoff_s .. llm.max_backoff_s). With
   `llm.enabled: false` it is queued and marked `reviewed = "unreviewed"`.

No database transaction is held open during the LLM call, and every status change is a
compare-and-set through `lifecycle.transition`, so concurrent workers cannot double-move
a submission.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select

from prism_challenge.bundle import Bundle, BundleError
from prism_challenge.config.settings import Settings
from prism_challenge.gates.axis_claims import axis_contradictions
from prism_challenge.gates.duplicates import deactivate, find_original, record_fingerprint
from prism_challenge.gates.fingerprint import fingerprint
from prism_challenge.gates.policy import check_policy
from prism_challenge.gates.prompt import GATE_POLICY_VERSION
from prism_challenge.gates.reviewer import LlmReviewer, ReviewUnavailable
from prism_challenge.gates.verdict import Verdict
from prism_challenge.gates.violation import summarise
from prism_challenge.storage import IllegalTransition, Status, Store, transition
from prism_challenge.storage.tables import BundleFingerprint, GateHold, LlmVerdict, Submission

REVIEWED_LLM = "llm"
REVIEWED_NONE = "unreviewed"


@dataclass(frozen=True)
class GateOutcome:
    submission_id: int
    status: Status  # queued, rejected, or received (held)
    reason: str | None


@dataclass(frozen=True)
class _Candidate:
    id: int
    hotkey: str
    digest: str
    accepted_at: float
    blob: bytes
    block: int | None = None
    uid: int | None = None


class GateStage:
    def __init__(self, settings: Settings, store: Store, reviewer: LlmReviewer | None) -> None:
        if settings.llm.enabled and reviewer is None:
            raise ValueError(
                "llm.enabled is true but no reviewer was given: pass LlmReviewer(settings.llm) "
                "or set llm.enabled: false explicitly"
            )
        self.settings = settings
        self.store = store
        self.reviewer = reviewer if settings.llm.enabled else None

    def process_due(self, now: float | None = None) -> list[GateOutcome]:
        """Gate `received` submissions whose not_before <= now, in precedence order.

        A submission still settling (new, not yet due, never gated) holds back every one
        after it in precedence: a bundle committed earlier but uploaded a little later is
        then gated first, and its near-copies are judged against it on every validator.
        """
        now = time.time() if now is None else now
        with self.store.session() as s:
            rows = s.execute(
                select(Submission.id, Submission.not_before, BundleFingerprint.submission_id)
                .outerjoin(BundleFingerprint, BundleFingerprint.submission_id == Submission.id)
                .where(Submission.status == Status.RECEIVED.value)
                .order_by(Submission.block.is_(None), Submission.block,  # precedence order
                          Submission.uid.is_(None), Submission.uid,
                          Submission.accepted_at, Submission.id)
            ).all()
        ids = []
        for submission_id, not_before, gated in rows:
            if not_before > now:
                if gated is None:
                    break  # settling: everything after it waits
                continue  # held after the duplicate gate (LLM unavailable): no one waits
            ids.append(submission_id)
            if len(ids) == self.settings.gates.batch_size:
                break
        outcomes = []
        for submission_id in ids:
            try:
                outcome = self.process_one(submission_id, now)
            except Exception as exc:  # noqa: BLE001 - one bad bundle must not stop the loop
                # A gate bug is held and retried, never turned into a rejection of a
                # possibly honest miner, and never a crash of the validator.
                outcome = self._hold(submission_id, f"{type(exc).__name__}: {exc}"[:200], now,
                                     what="gate error")
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def process_one(self, submission_id: int, now: float) -> GateOutcome | None:
        """Gate one submission; None if it is no longer `received` (another worker won)."""
        with self.store.session() as s:
            row = s.get(Submission, submission_id)
            if row is None or row.status != Status.RECEIVED.value:
                return None
            c = _Candidate(row.id, row.hotkey, row.digest, row.accepted_at, row.bundle,
                           row.block, row.uid)
        try:
            bundle = Bundle.from_wire(c.blob)
        except BundleError as exc:
            return self._finish(c.id, Status.REJECTED, f"bundle refused: {exc}", now)

        violations = check_policy(bundle.files)
        if violations:
            return self._finish(
                c.id, Status.REJECTED, "AST policy:\n" + summarise(violations), now)

        fp = fingerprint(bundle.files)
        with self.store.session() as s:
            match = find_original(
                s, submission_id=c.id, hotkey=c.hotkey, digest=c.digest,
                accepted_at=c.accepted_at, fp=fp,
                threshold=self.settings.gates.duplicate_threshold, block=c.block, uid=c.uid)
            if match is None:
                record_fingerprint(s, submission_id=c.id, hotkey=c.hotkey, digest=c.digest,
                                   accepted_at=c.accepted_at, fp=fp)
            cached = s.scalar(select(LlmVerdict).where(
                LlmVerdict.digest == c.digest, LlmVerdict.policy_version == GATE_POLICY_VERSION))
            cached_verdict = None if cached is None else Verdict.model_validate(cached.verdict)
        if match is not None:
            return self._finish(c.id, Status.REJECTED, match.reason(), now)

        claims = axis_note(bundle)
        if self.reviewer is None:
            return self._finish(c.id, Status.QUEUED,
                                "gates passed (LLM review disabled)" + claims, now,
                                reviewed=REVIEWED_NONE)
        verdict, fresh = cached_verdict, False
        if verdict is None:
            texts = {name: bundle.source(name) for name in bundle.files}
            try:
                verdict = self.reviewer.review(texts, c.digest)
            except ReviewUnavailable as exc:
                return self._hold(c.id, str(exc), now)
            fresh = True
        if verdict.decision == "allow":
            status, reason = Status.QUEUED, "gates passed (LLM review: allow)" + claims
        else:
            status, reason = Status.REJECTED, "LLM review rejected:\n" + verdict.summary()
        return self._finish(c.id, status, reason, now, reviewed=REVIEWED_LLM,
                            cache=(c.digest, verdict) if fresh else None)

    def _finish(
        self, submission_id: int, status: Status, reason: str, now: float, *,
        reviewed: str | None = None, cache: tuple[str, Verdict] | None = None,
    ) -> GateOutcome | None:
        try:
            with self.store.session() as s:
                if cache is not None:
                    self._cache(s, *cache, now)
                row = transition(s, submission_id, status, reason=reason,
                                 expected=Status.RECEIVED, now=now)
                if reviewed is not None:
                    row.reviewed = reviewed
                if status == Status.REJECTED:
                    deactivate(s, submission_id)
        except IllegalTransition:
            return None
        return GateOutcome(submission_id, status, reason)

    def _cache(self, s, digest: str, verdict: Verdict, now: float) -> None:
        exists = s.scalar(select(LlmVerdict.id).where(
            LlmVerdict.digest == digest, LlmVerdict.policy_version == GATE_POLICY_VERSION))
        if exists is None:
            s.add(LlmVerdict(digest=digest, policy_version=GATE_POLICY_VERSION,
                             decision=verdict.decision, verdict=verdict.model_dump(),
                             model=self.settings.llm.model, created_at=now))

    def _hold(self, submission_id: int, error: str, now: float, *,
              what: str = "LLM review unavailable") -> GateOutcome | None:
        llm = self.settings.llm
        try:
            with self.store.session() as s:
                hold = s.get(GateHold, submission_id)
                if hold is None:
                    hold = GateHold(submission_id=submission_id, holds=0, updated_at=now)
                    s.add(hold)
                delay = min(llm.max_backoff_s, llm.backoff_s * 2.0 ** min(hold.holds, 60))
                hold.holds += 1
                hold.last_error = error
                hold.updated_at = now
                retry = datetime.fromtimestamp(now + delay, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                reason = f"held: {what} ({error}), retry at {retry}"
                transition(s, submission_id, Status.RECEIVED, reason=reason,
                           expected=Status.RECEIVED, not_before=now + delay, now=now)
        except IllegalTransition:
            return None
        return GateOutcome(submission_id, Status.RECEIVED, reason)


def axis_note(bundle: Bundle) -> str:
    """The declared axes the code contradicts, as lines appended to a queued reason (the
    submission page shows it); "" when the declaration agrees with the code."""
    lines = axis_contradictions(bundle.files, dict(bundle.meta.axes))
    return "".join(f"\naxis flag: {line}" for line in lines)
