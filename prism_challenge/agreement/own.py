"""This validator's own measurements, read from its store in change order (what it serves).

A row changes when the run is scored, again when its contender replay ends (a pass
verifies it, a failure makes it ineligible), and when it passes to an earlier committer of
the same bundle (its miner and block change: `Submission.taken_over_at`); its change time
is the latest of these, and the cursor walks (change time, submission id), so a peer whose
cursor passed the row reads it again after each. Rows changed in the last `SERVE_LAG_S` are
held back: a transaction that took its timestamp earlier may not have committed yet, and a
cursor that moved past it would skip it for good.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from prism_challenge.agreement.wire import MeasurementRow, cursor
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Score, Submission, Verification

SERVE_LAG_S = 10.0
_ENDED = ("passed", "failed")


@dataclass(frozen=True)
class OwnRow:
    submission_id: int
    changed_at: float
    row: MeasurementRow


def own_rows(session: Session, *, after: tuple[int, int] = (-1, -1), limit: int | None = None,
             now: float | None = None) -> list[OwnRow]:
    """Scored runs changed after the cursor position `after` (and, when `now` is given,
    before `now - SERVE_LAG_S`), oldest change first, at most `limit`."""
    ended = case((Verification.status.in_(_ENDED), Verification.updated_at), else_=None)
    judged = case((ended > Score.created_at, ended), else_=Score.created_at)
    taken = Submission.taken_over_at
    changed = case((taken > judged, taken), else_=judged)
    query = (select(Submission, Score, Verification, changed.label("changed"))
             .join(Score, Score.submission_id == Submission.id)
             .outerjoin(Verification, Verification.submission_id == Submission.id)
             .where(changed >= max(0, after[0] - 1) / 1_000_000)
             .order_by(changed, Submission.id))
    if now is not None:
        query = query.where(changed <= now - SERVE_LAG_S)
    if limit is not None:
        query = query.limit(limit + 64)  # rows of the cursor's own microsecond are skipped
    out: list[OwnRow] = []
    for sub, score, check, changed_at in session.execute(query):
        if (int(changed_at * 1_000_000), sub.id) <= after:
            continue
        row = _row(sub, score, check)
        if row is not None:
            out.append(OwnRow(sub.id, float(changed_at), row))
        if limit is not None and len(out) >= limit:
            break
    return out


def next_cursor(rows: list[OwnRow], after: str | None) -> str | None:
    """The cursor after the last row (`after` itself when there is none)."""
    return cursor(rows[-1].changed_at, rows[-1].submission_id) if rows else after


def _parts(value) -> list[float] | None:
    """The run's stream parts as served: finite numbers only (else none are served)."""
    if not isinstance(value, list) or not all(
            isinstance(x, int | float) and math.isfinite(x) for x in value):
        return None
    return [float(x) for x in value]


def _row(sub: Submission, score: Score, check: Verification | None) -> MeasurementRow | None:
    """The served row; None for what no honest measurement looks like (a non-finite value,
    a hotkey that is not an ss58 address): such a row is not served."""
    if not (math.isfinite(score.bpb) and math.isfinite(score.heldout_delta)):
        return None
    status = None if check is None else check.status
    censored = bool((score.detail or {}).get("censored"))
    try:
        return MeasurementRow(
            miner_hotkey=sub.hotkey, digest=sub.digest, block=sub.block, bpb=score.bpb,
            heldout_delta=score.heldout_delta,
            eligible=score.eligible and not censored and status != "failed",
            verified=status == "passed", measured_at=score.created_at,
            verified_at=check.updated_at if status == "passed" else None,
            corpus=score.corpus, scoring_version=SCORING_VERSION,
            stream_parts=_parts((score.detail or {}).get("stream_parts")))
    except ValueError:
        return None
