"""Writing a score into the store: one row per submission, never overwritten."""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from prism_challenge.scoring.score import ScoreResult
from prism_challenge.storage.tables import Score, Submission


class ScoreExists(ValueError):
    """The submission already has a score; a submission is never scored twice."""


def record_score(
    session: Session,
    submission_id: int,
    result: ScoreResult,
    corpus: str,
    *,
    now: float | None = None,
) -> Score:
    """Add the Score row (the caller commits it with the RUNNING -> SCORED transition).

    The full result goes into `detail`; the columns hold what the leaderboard sorts on
    (an unknown held-out delta is stored as 0.0 there and as null in `detail`).
    """
    if not corpus or len(corpus) > 32:
        raise ValueError(f"corpus must be a non-empty name of at most 32 characters: {corpus!r}")
    if session.get(Submission, submission_id) is None:
        raise ValueError(f"submission {submission_id} does not exist")
    if session.get(Score, submission_id) is not None:
        raise ScoreExists(f"submission {submission_id} already has a score")
    row = Score(
        submission_id=submission_id,
        bpb=result.bpb,
        heldout_delta=0.0 if result.heldout_delta is None else result.heldout_delta,
        eligible=result.eligible,
        reason="; ".join(result.reasons) or None,
        corpus=corpus,
        detail=result.model_dump(mode="json"),
        created_at=time.time() if now is None else now,
    )
    session.add(row)
    session.flush()
    return row
