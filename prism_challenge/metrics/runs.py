"""Run records by exit reason and the latest run, folded incrementally across scrapes.

A run record is a multi-megabyte JSON document in production (one entry per batch), and
reading a field out of it makes the database parse all of it. Run records are append-only,
so each collector (one per app, not per process) reads the fields of every record once and
keeps the tally; a scrape reads only the ids, and the fields of records it has not seen.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.storage.tables import RunRecord

CHUNK = 500  # ids per IN (...) query


@dataclass(frozen=True)
class LastRun:
    submission_id: int
    attempt: int
    exit_reason: str
    created_at: float
    startup_s: float
    train_s: float
    eval_s: float

    @property
    def duration_s(self) -> float:
        return self.startup_s + self.train_s + self.eval_s


@dataclass(frozen=True)
class RunSummary:
    by_exit: dict[str, int]
    last: LastRun | None


def _fields():
    rec = RunRecord.record
    return (
        RunRecord.id,
        RunRecord.submission_id,
        RunRecord.attempt,
        rec["exit_reason"].as_string(),
        RunRecord.created_at,
        rec["startup_s"].as_float(),
        rec["train_s"].as_float(),
        rec["eval_s"].as_float(),
    )


class RunTally:
    """What the run records say so far; `update` brings it up to date with the store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # concurrent scrapes run on the server's thread pool
        self._seen: set[int] = set()
        self._by_exit: Counter[str] = Counter()
        self._last: tuple[float, int, LastRun] | None = None

    def update(self, session: Session) -> RunSummary:
        ids = set(session.scalars(select(RunRecord.id)))
        with self._lock:
            if self._seen - ids:  # a record was deleted: start over rather than drift
                self._seen.clear()
                self._by_exit.clear()
                self._last = None
            new = sorted(ids - self._seen)
            for start in range(0, len(new), CHUNK):
                rows = session.execute(
                    select(*_fields()).where(RunRecord.id.in_(new[start : start + CHUNK]))
                ).all()
                for rid, sid, attempt, reason, created, startup, train, ev in rows:
                    self._fold(rid, LastRun(sid, attempt, str(reason or "unknown"), created,
                                            float(startup or 0.0), float(train or 0.0),
                                            float(ev or 0.0)))
            last = None if self._last is None else self._last[2]
            return RunSummary(by_exit=dict(self._by_exit), last=last)

    def _fold(self, rid: int, run: LastRun) -> None:
        self._seen.add(rid)
        self._by_exit[run.exit_reason] += 1
        if self._last is None or (run.created_at, rid) > self._last[:2]:
            self._last = (run.created_at, rid, run)
