"""`GET /v1/health`: is this node up, which subnet does it serve, can it reach its store."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy import text

from prism_challenge import __version__
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody


class Health(BaseModel):
    status: str
    version: str
    netuid: int
    mode: str
    block: int | None
    hotkey: str | None  # sign submissions for this receiver
    stale: bool  # the chain is unreachable and an older metagraph is in use


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["health"])

    @router.get("/health", response_model=Health,
                responses={503: {"model": ErrorBody, "description": "the store is unreachable"}})
    def health() -> Health:
        try:
            with deps.store.session() as session:
                session.execute(text("SELECT 1"))
        except Exception as exc:  # the store being down is exactly what health reports
            raise ApiError(503, "UNHEALTHY", f"the store cannot be reached: {exc}") from None
        return Health(
            status="ok",
            version=__version__,
            netuid=deps.settings.chain.netuid,
            mode=deps.settings.mode,
            block=deps.metagraph.block,
            hotkey=deps.hotkey,
            stale=deps.metagraph.stale,
        )

    return router
