"""Reading the leaderboard's input from the store (the only SQL the leaderboard needs)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.scoring.leaderboard import Entry, Leaderboard, build_leaderboard
from prism_challenge.storage.tables import Score, Submission


def load_entries(session: Session) -> list[Entry]:
    """Every scored submission with its score, in accepted order."""
    rows = session.execute(
        select(Submission, Score)
        .join(Score, Score.submission_id == Submission.id)
        .order_by(Submission.accepted_at, Submission.id)
    ).all()
    return [
        Entry(
            submission_id=sub.id,
            hotkey=sub.hotkey,
            digest=sub.digest,
            name=sub.name,
            accepted_at=sub.accepted_at,
            block=sub.block,
            uid=sub.uid,
            bpb=score.bpb,
            heldout_delta=score.heldout_delta,
            eligible=score.eligible,
            reason=score.reason,
            corpus=score.corpus,
            unreviewed=sub.reviewed == "unreviewed",
            scored_at=score.created_at,
        )
        for sub, score in rows
    ]


def load_leaderboard(
    session: Session,
    settings: ScoringSettings,
    *,
    corpus: str | None = None,
    hotkeys: Collection[str] | None = None,
) -> Leaderboard:
    """The leaderboard as the configured epsilon grid and dethrone margin rank it."""
    return build_leaderboard(
        load_entries(session),
        epsilon=settings.epsilon_bpb,
        margin=settings.dethrone_margin,
        corpus=corpus,
        hotkeys=hotkeys,
    )
