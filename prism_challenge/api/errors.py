"""Every API refusal has one shape, `{"detail": <sentence>, "rule": <SHORT_ID>}`.

Routers raise `ApiError`; `install_error_handlers` also reshapes FastAPI's own errors (404,
405, request validation) and unexpected exceptions into that shape, so a client can always
read `rule` without guessing which layer answered.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

log = logging.getLogger(__name__)

_HTTP_RULES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BODY_SIZE"}


class ErrorBody(BaseModel):
    """The body of every refusal (for the OpenAPI docs)."""

    detail: str
    rule: str


# Documented on every operation: any 4xx is this shape (FastAPI's own 422 schema is replaced,
# because `on_invalid_request` answers in this shape too). Routes add the specific codes.
REFUSALS_DOC = {
    "4XX": {"model": ErrorBody, "description": "a refusal: `detail` says why, `rule` which check"}
}


class ApiError(Exception):
    """A refusal with its HTTP status, stable rule id, and a sentence for the caller."""

    def __init__(
        self, status: int, rule: str, detail: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.rule = rule
        self.detail = detail
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = ErrorBody(detail=self.detail, rule=self.rule).model_dump()
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    async def on_http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        rule = _HTTP_RULES.get(exc.status_code, f"HTTP_{exc.status_code}")
        return ApiError(exc.status_code, rule, str(exc.detail), headers=exc.headers).response()

    async def on_invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(part) for part in first.get("loc", ()))
        return ApiError(422, "REQUEST", f"{where}: {first.get('msg')}").response()

    async def on_unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in the API", exc_info=exc)
        return ApiError(500, "INTERNAL", "internal error; the operator has the log").response()

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_invalid_request)
    app.add_exception_handler(Exception, on_unexpected)
