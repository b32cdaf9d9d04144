"""Start-up recovery: whatever a killed validator left half-done is resumed, never lost.

A submission found `running` at start-up was interrupted (the process died mid-run): it goes
back to the queue, or to `failed` once its attempts are spent. Scored submissions that the
research registry has not folded in yet are handed to it again (observe is idempotent).
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from prism_challenge.storage import Status, Store, transition
from prism_challenge.storage.tables import Submission

log = logging.getLogger("prism.validator")


def resume_interrupted(store: Store, max_attempts: int) -> list[int]:
    with store.session() as s:
        rows = list(s.scalars(select(Submission).where(Submission.status == Status.RUNNING.value)))
        resumed = []
        for row in rows:
            if row.attempts >= max_attempts:
                transition(s, row.id, Status.FAILED, expected=Status.RUNNING,
                           reason=f"interrupted {row.attempts} times; attempts exhausted")
            else:
                transition(s, row.id, Status.QUEUED, expected=Status.RUNNING,
                           reason=f"resumed after an interrupted attempt {row.attempts}")
                resumed.append(row.id)
    for sid in resumed:
        log.info("resumed interrupted submission %s", sid)
    return resumed
