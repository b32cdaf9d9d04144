"""`GET /v1/submissions/{id}/curve`: a submission's learning curve as JSON (docs/submissions.md).

The same curve the dashboard draws (latest attempt with scored batches), for scripts and
`prism submit` users; served whether or not the HTML dashboard is enabled.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import select

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody
from prism_challenge.api.params import SubmissionId
from prism_challenge.dashboard.records import RecordCache
from prism_challenge.storage.tables import Submission


class CurvePointOut(BaseModel):
    tokens: int
    bpb: float
    running_bpb: float | None


class CurveOut(BaseModel):
    submission_id: int
    attempt: int | None  # None until a run with scored batches is recorded
    exit_reason: str | None
    batches: int
    skipped: int  # buckets left out: no bytes or a non-finite loss
    uniform_bpb: float | None
    val_bpb_trained: float | None
    val_bpb_twin: float | None
    points: list[CurvePointOut]


def build(deps: ApiDeps) -> APIRouter:
    records = RecordCache(deps.settings.dashboard.curve_points)
    router = APIRouter(prefix="/v1", tags=["submissions"])

    @router.get(
        "/submissions/{submission_id}/curve",
        response_model=CurveOut,
        responses={404: {"model": ErrorBody}},
    )
    def curve(submission_id: SubmissionId) -> CurveOut:
        """bpb per batch and the running prequential bpb over the scored tokens consumed, at
        most `dashboard.curve_points` points (consecutive batches merged exactly)."""
        with deps.store.session() as session:
            exists = session.execute(
                select(Submission.id).where(Submission.id == submission_id)
            ).first()
            stored = records.read(session, submission_id) if exists else []
        if not exists:
            raise ApiError(404, "NOT_FOUND", f"no submission with id {submission_id}")
        runs = records.digests(stored)
        latest = next((r for r in reversed(runs) if r.curve is not None and r.batches), None)
        if latest is None:
            return CurveOut(submission_id=submission_id, attempt=None, exit_reason=None,
                            batches=0, skipped=0, uniform_bpb=None, val_bpb_trained=None,
                            val_bpb_twin=None, points=[])
        c = latest.curve
        return CurveOut(
            submission_id=submission_id,
            attempt=latest.attempt,
            exit_reason=latest.record.exit_reason,
            batches=c.batches,
            skipped=c.skipped,
            uniform_bpb=c.uniform_bpb,
            val_bpb_trained=c.val_bpb_trained,
            val_bpb_twin=c.val_bpb_twin,
            points=[CurvePointOut(tokens=p.tokens, bpb=p.bpb, running_bpb=p.running_bpb)
                    for p in c.points],
        )

    return router
