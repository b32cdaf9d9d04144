"""Start-up recovery: whatever a stopped or killed validator left half-done is resumed.

A submission found `running` at start-up was interrupted (the process died mid-run); one
found `queued` with the shutdown reason was handed back by a clean shutdown. Either way the
interruption was the validator's, so the attempt is refunded and the run starts again: an
operator's restarts never spend a miner's attempts. Scored submissions that the research
registry has not folded in yet are handed to it again (observe is idempotent).
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from prism_challenge.storage import Status, Store, transition
from prism_challenge.storage.tables import Submission

log = logging.getLogger("prism.validator")

# The reason a clean shutdown leaves on the runs it hands back (worker and recovery agree).
SHUTDOWN_REASON = "interrupted by a validator shutdown"


def resume_interrupted(store: Store) -> list[int]:
    """Requeue (refunding the attempt) every run the last process left running; return those
    and the ones a clean shutdown handed back, in id order: all of them run again."""
    with store.session() as s:
        running = list(s.scalars(select(Submission.id)
                                 .where(Submission.status == Status.RUNNING.value)))
        for sid in running:
            transition(s, sid, Status.QUEUED, expected=Status.RUNNING, refund=True,
                       reason="resumed after the validator stopped mid-run")
        handed_back = list(s.scalars(select(Submission.id).where(
            Submission.status == Status.QUEUED.value, Submission.reason == SHUTDOWN_REASON)))
    resumed = sorted(set(running) | set(handed_back))
    for sid in resumed:
        log.info("resumed interrupted submission %s", sid)
    return resumed
