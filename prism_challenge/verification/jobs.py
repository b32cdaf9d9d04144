"""Contender replay jobs in the store: which runs to replay, claiming, recording the verdict.

A run is replayed only when it would take the lead (the weights) if it were verified, so
the cost is paid for contenders only. Jobs move queued -> running -> passed | failed |
incomparable (another stack than the original's) with a compare-and-set, like
submissions; a job interrupted by a crash goes back to the queue at start-up, and one the
validator's own side cannot finish is retried `max_attempts` times.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from prism_challenge.chain.metagraph import MetagraphView, registered_among
from prism_challenge.config.settings import Settings
from prism_challenge.scoring.leaderboard import Entry, contenders, latest_corpus
from prism_challenge.scoring.queries import load_entries
from prism_challenge.storage import Store, serialize_on
from prism_challenge.storage.tables import Verification
from prism_challenge.verification.replay import DrawnPlan

ACTIVE = ("queued", "running")


def queue_contenders(session: Session, settings: Settings, *, now: float | None = None,
                     slots: int | None = None, entries: list[Entry] | None = None,
                     metagraph: MetagraphView | None = None, corpus: str | None = None
                     ) -> list[int]:
    """Queue replays for the best contenders, as many as there are evaluation slots free
    (`slots`: the node's planned slot count; else `validator.slots`, else 1). `entries`:
    what the validator ranks (default: its own scores); only runs scored here are queued.
    With a `metagraph`, only registered hotkeys compete, as in the weights. `corpus`: the
    competition key contended on (`Ranked.corpus`, the key weights are set on); default:
    the key of this validator's own latest score."""
    if not settings.verification.enabled:
        return []
    # Workers and the epoch loop queue at once; on PostgreSQL two of them would otherwise
    # both see a contender unqueued and insert it twice.
    serialize_on(session, "verification-queue")
    active = session.scalar(select(func.count()).select_from(Verification)
                            .where(Verification.status.in_(ACTIVE))) or 0
    room = max(0, (slots or settings.validator.slots or 1) - active)
    if room == 0:
        return []
    sc = settings.scoring
    own = load_entries(session)
    scored_here = {e.submission_id for e in own}
    ranked = own if entries is None else entries
    found = [e for e in contenders(ranked, epsilon=sc.epsilon_bpb, margin=sc.dethrone_margin,
                                   z=sc.dethrone_z,
                                   corpus=latest_corpus(own) if corpus is None else corpus,
                                   hotkeys=registered_among(metagraph,
                                                            {e.hotkey for e in ranked}))
             if e.submission_id in scored_here]
    now = time.time() if now is None else now
    queued = []
    for entry in found[:room]:
        session.add(Verification(submission_id=entry.submission_id, status="queued",
                                 attempts=0, created_at=now, updated_at=now))
        queued.append(entry.submission_id)
    session.flush()
    return queued


def claim(store: Store) -> int | None:
    """Take the oldest queued replay (compare-and-set queued -> running)."""
    with store.session() as s:
        ids = list(s.scalars(select(Verification.submission_id)
                             .where(Verification.status == "queued")
                             .order_by(Verification.created_at).limit(8)))
    for sid in ids:
        with store.session() as s:
            done = s.execute(update(Verification)
                             .where(Verification.submission_id == sid,
                                    Verification.status == "queued")
                             .values(status="running", attempts=Verification.attempts + 1,
                                     updated_at=time.time())
                             .execution_options(synchronize_session=False))
            if done.rowcount == 1:
                return sid
    return None


def replay_plan(session: Session, sid: int, draw: Callable[[], DrawnPlan]) -> DrawnPlan:
    """The verification's replay plan: the stored one, or `draw()` stored now (committed
    with the session, before the replay starts). A retry never redraws."""
    row = session.get(Verification, sid)
    if row is None:
        raise ValueError(f"submission {sid} has no verification")
    if row.plan is not None:
        return DrawnPlan.model_validate(row.plan)
    plan = draw()
    row.plan = plan.model_dump(mode="json")
    return plan


def finish(session: Session, sid: int, *, passed: bool, reason: str | None, replay: dict,
           comparable: bool = True) -> None:
    """Record the verdict. A replay on another stack than the original run's ends as
    `incomparable`: neither passed nor failed, the run stays eligible and unverified here
    (a validator with the recorded stack can verify it)."""
    row = session.get(Verification, sid)
    if row is None or row.status != "running":
        raise ValueError(f"verification of submission {sid} is not running")
    row.status = "passed" if passed else "failed" if comparable else "incomparable"
    row.reason = reason
    row.replay = replay
    row.updated_at = time.time()


def retry_or_fail(session: Session, sid: int, reason: str, max_attempts: int, *,
                  counted: bool = True) -> str:
    """The replay failed on the validator's side: queue it again, or give up. A replay
    stopped by a shutdown (`counted=False`) does not spend an attempt. Giving up ends it
    `incomparable`, as a replay on another stack does: the run stays eligible and unverified
    here. The failure was never the miner's, so it must not be failed (ineligible here, and
    told so to every peer)."""
    row = session.get(Verification, sid)
    if row is None or row.status != "running":
        raise ValueError(f"verification of submission {sid} is not running")
    if not counted:
        row.attempts = max(0, row.attempts - 1)
    row.status = "queued" if row.attempts < max_attempts else "incomparable"
    row.reason = reason if row.status == "queued" else (
        f"the replay could not be completed on this validator after {row.attempts} attempts "
        f"({reason})")
    row.updated_at = time.time()
    return row.status


def resume_interrupted(store: Store) -> list[int]:
    """Replays found running at start-up were interrupted: back to the queue."""
    with store.session() as s:
        rows = list(s.scalars(select(Verification).where(Verification.status == "running")))
        for row in rows:
            row.status = "queued"
            row.reason = "resumed after an interrupted replay"
            row.updated_at = time.time()
        return [r.submission_id for r in rows]
