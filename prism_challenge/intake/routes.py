"""HTTP routes of intake: `POST /v1/submissions` and `GET /v1/submissions/{id}`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from prism_challenge.api.body import read_body
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody
from prism_challenge.api.params import SubmissionId
from prism_challenge.bundle import MAX_WIRE_BYTES
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.intake.schemas import Receipt, SubmissionView
from prism_challenge.intake.service import Intake
from prism_challenge.intake.signing import HEADERS
from prism_challenge.intake.status import submission_view

_REFUSALS = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        401: "missing/malformed auth headers, signed for another validator, stale, bad "
             "signature",
        403: "hotkey not registered on the subnet",
        409: "nonce replayed, no or another commitment, or an exact copy of an earlier "
             "committed submission",
        413: "request body over intake.max_body_bytes",
        422: "the bundle breaks a rule (the rule id and file are in the body)",
        429: "per-hotkey rate limit, or an upload already waiting for its commitment",
        503: "this validator cannot check commitments now (chain unreachable)",
    }.items()
}

_BODY_DOC = {
    "requestBody": {
        "required": True,
        "description": (
            f"The bundle's canonical wire encoding (Bundle.to_wire(), at most {MAX_WIRE_BYTES} "
            f"bytes), signed with the headers {', '.join(HEADERS)}."
        ),
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    # Read by `intake.auth.authenticate`, not by FastAPI; listed so that the schema shows them.
    "parameters": [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"}}
        for name in HEADERS
    ],
}


def build(deps: ApiDeps) -> APIRouter:
    policy = IntakePolicy.from_settings(deps.settings)
    intake = Intake(deps.store, deps.metagraph, policy, deps.clock, hotkey=deps.hotkey,
                    subnet=deps.subnet, settle_s=deps.settings.gates.settle_s)
    router = APIRouter(prefix="/v1", tags=["submissions"])

    @router.post(
        "/submissions",
        status_code=201,
        response_model=Receipt,
        responses={200: {"model": Receipt, "description": "the same bundle again"}, **_REFUSALS},
        openapi_extra=_BODY_DOC,
    )
    async def create_submission(request: Request, response: Response) -> Receipt:
        """Accept a signed bundle (201), or return the earlier submission of it (200)."""
        body = await read_body(request, intake.policy.max_body_bytes)
        target = request.scope.get("root_path", "") + request.url.path
        if request.url.query:
            target += "?" + request.url.query
        receipt = await run_in_threadpool(intake.submit, request.headers, body, target)
        if receipt.idempotent:
            response.status_code = 200
        return receipt

    @router.get(
        "/submissions/{submission_id}",
        response_model=SubmissionView,
        responses={404: {"model": ErrorBody}},
    )
    def get_submission(submission_id: SubmissionId) -> SubmissionView:
        """Status, reason, attempts and (once scored) the score of one submission."""
        with deps.store.session() as session:
            view = submission_view(session, submission_id)
        if view is None:
            raise ApiError(404, "NOT_FOUND", f"no submission with id {submission_id}")
        return view

    return router
