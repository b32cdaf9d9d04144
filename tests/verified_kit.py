"""Marking scored submissions as verified, for tests of what comes after the replay."""

from __future__ import annotations

from prism_challenge.storage.tables import Verification


def mark_verified(session, submission_id: int, status: str = "passed", at: float = 0.0) -> None:
    """Record the contender replay's outcome as if it had run (the replay is tested for real
    in tests/verification)."""
    session.add(Verification(submission_id=submission_id, status=status, attempts=1,
                             reason=None if status == "passed" else "replay: test",
                             created_at=at, updated_at=at))
