"""Reading the leaderboard's input from the store (the only SQL the leaderboard needs)."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.scoring.leaderboard import Entry, Leaderboard, build_leaderboard
from prism_challenge.storage.tables import Score, Submission, Verification


def load_entries(session: Session) -> list[Entry]:
    """Every scored submission with its score and verification, in accepted order.

    A failed verification makes the entry ineligible, with the replay's reason."""
    rows = session.execute(
        select(Submission, Score, Verification)
        .join(Score, Score.submission_id == Submission.id)
        .outerjoin(Verification, Verification.submission_id == Submission.id)
        .order_by(Submission.accepted_at, Submission.id)
    ).all()
    entries = []
    for sub, score, check in rows:
        failed = check is not None and check.status == "failed"
        entries.append(Entry(
            submission_id=sub.id,
            hotkey=sub.hotkey,
            digest=sub.digest,
            name=sub.name,
            accepted_at=sub.accepted_at,
            block=sub.block,
            uid=sub.uid,
            bpb=score.bpb,
            heldout_delta=score.heldout_delta,
            eligible=score.eligible and not failed,
            reason=f"verification: {check.reason}" if failed else score.reason,
            corpus=score.corpus,
            unreviewed=sub.reviewed == "unreviewed",
            scored_at=score.created_at,
            verification="none" if check is None else check.status,
            censored=bool((score.detail or {}).get("censored")),
            **{k: (score.detail or {}).get(k) for k in UNCERTAINTY},
            stream_parts=(score.detail or {}).get("stream_parts"),
        ))
    return entries


UNCERTAINTY = ("heldout_bpb", "heldout_se", "gap", "gap_bound")  # shown with every entry


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
        z=settings.dethrone_z,
        corpus=corpus,
        hotkeys=hotkeys,
    )
