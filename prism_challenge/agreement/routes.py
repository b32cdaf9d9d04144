"""`GET /v1/measurements`: this validator's own measurements, a page at a time, signed.

The body is `MeasurementsPage` JSON; the `X-Bittensor-*` response headers are the
validator hotkey's `btauth/1` signature over the request target and the exact body bytes
(agreement/wire.py), which is what a peer checks before it stores anything.
"""

from __future__ import annotations

from typing import Annotated

from bittensor import http_auth
from bittensor.signing import resolve_signer
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from prism_challenge.agreement.own import next_cursor, own_rows
from prism_challenge.agreement.wire import (
    CURSOR_MAX_CHARS,
    CURSOR_PATTERN,
    MAX_PAGE_ROWS,
    MEASUREMENTS_PATH,
    MeasurementsPage,
    parse_cursor,
)
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody

AfterQuery = Annotated[str | None, Query(
    max_length=CURSOR_MAX_CHARS, pattern=CURSOR_PATTERN,
    description="the `next` cursor of the previous page; absent: from the start")]
LimitQuery = Annotated[int, Query(
    ge=1, le=MAX_PAGE_ROWS,
    description="rows wanted (the validator may return fewer: agreement.page_size)")]


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["agreement"])

    @router.get("/measurements", response_model=MeasurementsPage, responses={
        404: {"model": ErrorBody, "description": "this validator does not serve measurements"}})
    def measurements(request: Request, after: AfterQuery = None,
                     limit: LimitQuery = 100) -> Response:
        if deps.signer is None or not deps.settings.agreement.serve:
            raise ApiError(404, "MEASUREMENTS_OFF", "this validator does not serve its "
                           "measurements (agreement.serve is false, or it has no hotkey)")
        limit = min(limit, deps.settings.agreement.page_size)
        with deps.store.session() as session:
            rows = own_rows(session, after=parse_cursor(after), limit=limit + 1,
                            now=deps.clock())
        page = MeasurementsPage(validator=resolve_signer(deps.signer, role="hotkey").ss58_address,
                                netuid=deps.settings.chain.netuid,
                                rows=[r.row for r in rows[:limit]],
                                next=next_cursor(rows[:limit], after), more=len(rows) > limit)
        body = page.model_dump_json().encode()
        query = request.scope.get("query_string", b"").decode("latin-1")
        signed = f"{MEASUREMENTS_PATH}?{query}" if query else MEASUREMENTS_PATH
        headers = http_auth.sign(deps.signer, method="GET", path=signed, body=body)
        return Response(body, media_type="application/json", headers=headers)

    return router
