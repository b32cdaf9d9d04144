"""Reading a submission's public state (status, reason, attempts, score) from the store."""

from __future__ import annotations

from sqlalchemy.orm import Session

from prism_challenge.intake.schemas import ScoreView, SubmissionView, VerificationView
from prism_challenge.storage import FINAL, Status
from prism_challenge.storage.tables import Score, Submission, Verification


def submission_view(session: Session, submission_id: int) -> SubmissionView | None:
    row = session.get(Submission, submission_id)
    if row is None:
        return None
    score = session.get(Score, submission_id)
    check = session.get(Verification, submission_id)
    return SubmissionView(
        id=row.id,
        hotkey=row.hotkey,
        digest=row.digest,
        name=row.name,
        status=row.status,
        final=Status(row.status) in FINAL,
        reason=row.reason,
        attempts=row.attempts,
        accepted_at=row.accepted_at,
        block=row.block,
        score=None
        if score is None
        else ScoreView(
            bpb=score.bpb,
            heldout_delta=score.heldout_delta,
            eligible=score.eligible,
            reason=score.reason,
            corpus=score.corpus,
        ),
        verification=None if check is None else VerificationView(status=check.status,
                                                                  reason=check.reason),
    )
