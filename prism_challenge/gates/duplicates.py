"""Duplicate detection against earlier bundles of other hotkeys (docs/security.md B7).

A bundle is refused when another hotkey's earlier, still-standing bundle has the same
digest, the same normalised code, or a fingerprint at least `gates.duplicate_threshold`
similar (Jaccard). "Earlier" is precedence (chain/precedence.py): the commitment block,
then the committer's uid, the same on every validator; this validator's `accepted_at` and
the submission id only break what the chain leaves tied. So the original always wins and
its copies never outrank it. A hotkey's own earlier bundles are ignored: a miner iterating
on their own design is the point of the subnet.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.chain.precedence import precedence
from prism_challenge.gates.fingerprint import Fingerprint
from prism_challenge.storage.tables import BundleFingerprint, Submission


@dataclass(frozen=True)
class DuplicateMatch:
    submission_id: int  # the original
    hotkey: str
    similarity: float
    exact: bool

    def reason(self) -> str:
        how = ("identical after normalisation" if self.exact
               else f"{self.similarity:.0%} similar after normalisation")
        return (f"duplicate: near-copy of submission {self.submission_id} by hotkey "
                f"{self.hotkey} ({how}); the original keeps precedence")


def find_original(
    session: Session,
    *,
    submission_id: int,
    hotkey: str,
    digest: str,
    accepted_at: float,
    fp: Fingerprint,
    threshold: float,
    block: int | None = None,
    uid: int | None = None,
) -> DuplicateMatch | None:
    """The earliest standing bundle of another hotkey that this one copies, if any."""
    mine = precedence(block, uid, accepted_at, submission_id)
    rows = session.execute(
        select(BundleFingerprint, Submission.block, Submission.uid)
        .join(Submission, Submission.id == BundleFingerprint.submission_id)
        .where(BundleFingerprint.hotkey != hotkey, BundleFingerprint.active.is_(True))
    ).all()
    ordered = sorted(((precedence(b, u, row.accepted_at, row.submission_id), row)
                      for row, b, u in rows), key=lambda pair: pair[0])
    for key, row in ordered:
        if key >= mine:
            break
        if row.digest == digest or row.exact == fp.exact:
            return DuplicateMatch(row.submission_id, row.hotkey, 1.0, exact=True)
        similarity = fp.similarity(Fingerprint(frozenset(row.shingles), row.exact))
        if similarity >= threshold:
            return DuplicateMatch(row.submission_id, row.hotkey, similarity, exact=False)
    return None


def record_fingerprint(
    session: Session, *, submission_id: int, hotkey: str, digest: str, accepted_at: float,
    fp: Fingerprint,
) -> None:
    """Remember a bundle that passed the static gates (idempotent: a held one comes back)."""
    row = session.get(BundleFingerprint, submission_id)
    if row is None:
        session.add(BundleFingerprint(
            submission_id=submission_id, hotkey=hotkey, digest=digest, exact=fp.exact,
            shingles=sorted(fp.shingles), accepted_at=accepted_at, active=True))


def deactivate(session: Session, submission_id: int) -> None:
    """A bundle refused later (e.g. by the LLM) no longer blocks anyone."""
    row = session.get(BundleFingerprint, submission_id)
    if row is not None:
        row.active = False
