"""Run records as a page needs them, parsed once and outside the store's transaction.

A run record's JSON is bounded (its per-step columns live in a blob pages never read) but
pages reload themselves, so each app keeps the digest (the record and its learning curve)
of the records it showed last. Run records are append-only and never rewritten, so a
digest keyed by the row id stays true. `read` only fetches raw text inside the session (a
SQLite session holds the write lock); `digests` parses and validates after it closed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from prism_challenge.dashboard.curve import Curve, learning_curve
from prism_challenge.sandbox.record import RunRecord as RecordModel
from prism_challenge.storage.tables import RunRecord


@dataclass(frozen=True)
class RunDigest:
    attempt: int
    created_at: float
    record: RecordModel | None  # without its per-step columns; None when it could not be read
    batches: int
    curve: Curve | None
    error: str | None  # why the stored record could not be read (e.g. an unknown version)


@dataclass(frozen=True)
class StoredRun:
    id: int
    attempt: int
    created_at: float
    text: str | None  # the record's JSON, read only when no digest was cached
    cached: RunDigest | None


class RecordCache:
    """Digests of the `size` most recently shown run records, for one app."""

    def __init__(self, curve_points: int, size: int = 64) -> None:
        self.curve_points = curve_points
        self.size = size
        self._digests: OrderedDict[int, RunDigest] = OrderedDict()
        self._lock = threading.Lock()  # pages are served from a thread pool

    def read(self, session: Session, submission_id: int) -> list[StoredRun]:
        """Every attempt of the submission, first first; the text only of uncached ones."""
        rows = session.execute(
            select(RunRecord.id, RunRecord.attempt, RunRecord.created_at)
            .where(RunRecord.submission_id == submission_id)
            .order_by(RunRecord.attempt)
        ).all()
        with self._lock:
            cached = {rid: self._digests[rid] for rid, _, _ in rows if rid in self._digests}
        missing = [rid for rid, _, _ in rows if rid not in cached]
        texts = dict(
            session.execute(
                select(RunRecord.id, cast(RunRecord.record, Text)).where(RunRecord.id.in_(missing))
            ).all()
        ) if missing else {}
        return [
            StoredRun(rid, attempt, created, texts.get(rid), cached.get(rid))
            for rid, attempt, created in rows
        ]

    def digests(self, runs: list[StoredRun]) -> list[RunDigest]:
        out = []
        for run in runs:
            digest = run.cached if run.cached is not None else self._digest(run)
            with self._lock:
                self._digests[run.id] = digest
                self._digests.move_to_end(run.id)
                while len(self._digests) > self.size:
                    self._digests.popitem(last=False)
            out.append(digest)
        return out

    def _digest(self, run: StoredRun) -> RunDigest:
        try:
            record = RecordModel.model_validate_json(run.text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            error = f"unreadable run record ({where}: {first.get('msg')})"
            return RunDigest(run.attempt, run.created_at, None, 0, None, error)
        return RunDigest(
            attempt=run.attempt,
            created_at=run.created_at,
            record=record.model_copy(update={"steps": None}),
            batches=record.summary.count,
            curve=learning_curve(record, self.curve_points),
            error=None,
        )
