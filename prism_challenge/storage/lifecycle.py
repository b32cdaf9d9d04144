"""The submission state machine (docs/submissions.md), enforced in one place.

Every status change goes through `transition`, which refuses moves the lifecycle does not
allow and does a compare-and-set on the current status, so two workers can never both take
the same submission or score it twice.
"""

from __future__ import annotations

import time
from enum import StrEnum

from sqlalchemy import update
from sqlalchemy.orm import Session

from prism_challenge.storage.tables import Submission


class Status(StrEnum):
    RECEIVED = "received"
    REJECTED = "rejected"
    QUEUED = "queued"
    RUNNING = "running"
    SCORED = "scored"
    FAILED = "failed"


FINAL = frozenset({Status.REJECTED, Status.SCORED, Status.FAILED})

# received -> received is a hold (e.g. the LLM reviewer is unreachable; retried later).
# running -> queued is a resume after a crash or a retryable failure.
ALLOWED: dict[Status, frozenset[Status]] = {
    Status.RECEIVED: frozenset({Status.RECEIVED, Status.QUEUED, Status.REJECTED, Status.FAILED}),
    Status.QUEUED: frozenset({Status.RUNNING, Status.FAILED}),
    Status.RUNNING: frozenset({Status.SCORED, Status.FAILED, Status.QUEUED}),
    Status.REJECTED: frozenset(),
    Status.SCORED: frozenset(),
    Status.FAILED: frozenset(),
}


class IllegalTransition(ValueError):
    """A status change the lifecycle forbids, or one raced by another worker."""


def transition(
    session: Session,
    submission_id: int,
    new: Status | str,
    *,
    reason: str | None = None,
    expected: Status | str | None = None,
    not_before: float | None = None,
    now: float | None = None,
    refund: bool = False,
) -> Submission:
    """Move a submission to `new`; entering RUNNING counts an attempt.

    `expected` pins the status the caller believes is current; the update only applies if
    the row still has it (compare-and-set). `refund` hands back the attempt of a run that
    the validator interrupted (a shutdown, its own crash): only RUNNING -> QUEUED may refund.
    """
    new = Status(new)
    row = session.get(Submission, submission_id)
    if row is None:
        raise IllegalTransition(f"submission {submission_id} does not exist")
    current = Status(row.status)
    if expected is not None and Status(expected) != current:
        raise IllegalTransition(
            f"submission {submission_id} is {current.value}, not {Status(expected).value}"
        )
    if new not in ALLOWED[current]:
        raise IllegalTransition(
            f"submission {submission_id}: {current.value} -> {new.value} is not allowed"
        )
    now = time.time() if now is None else now
    values: dict = {"status": new.value, "reason": reason, "updated_at": now}
    if new == Status.RUNNING:
        values["attempts"] = Submission.attempts + 1
    if refund:
        if (current, new) != (Status.RUNNING, Status.QUEUED):
            raise IllegalTransition(f"submission {submission_id}: only running -> queued "
                                    "refunds an attempt")
        values["attempts"] = Submission.attempts - 1
    if not_before is not None:
        values["not_before"] = not_before
    result = session.execute(
        update(Submission)
        .where(Submission.id == submission_id, Submission.status == current.value)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        raise IllegalTransition(f"submission {submission_id} changed status concurrently")
    session.refresh(row)
    return row


# Every reason the validator writes when a run failed on its side starts so; nothing a
# bundle prints can supply the prefix (the validator writes it before any detail).
INFRA_PREFIX = "infra"


def failed_for_infra(row: Submission) -> bool:
    """A submission that failed on the validator's side, never charged to the miner."""
    return row.status == Status.FAILED.value and (row.reason or "").startswith(INFRA_PREFIX)


def reopen_after_infra(session: Session, row: Submission, *, now: float | None = None
                       ) -> Submission:
    """Queue again, with fresh attempts, a submission that failed for infrastructure reasons
    (the miner submitted the same bundle again): the failure was never the miner's."""
    if not failed_for_infra(row):
        raise IllegalTransition(f"submission {row.id} did not fail on the validator's side")
    now = time.time() if now is None else now
    result = session.execute(
        update(Submission)
        .where(Submission.id == row.id, Submission.status == Status.FAILED.value)
        .values(status=Status.QUEUED.value, attempts=0, updated_at=now,
                reason="submitted again after an infrastructure failure")
        .execution_options(synchronize_session=False))
    if result.rowcount != 1:
        raise IllegalTransition(f"submission {row.id} changed status concurrently")
    session.refresh(row)
    return row
