"""Reading a request body with a hard size limit, before any of it is trusted or parsed.

uvicorn accepts bodies of any size; a refusal from Content-Length costs nothing, and a
chunked or lying body is cut off as soon as it passes the limit rather than buffered whole.
"""

from __future__ import annotations

from fastapi import Request

from prism_challenge.api.errors import ApiError


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "BODY_SIZE", f"the request body is over the limit of {limit} bytes")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
