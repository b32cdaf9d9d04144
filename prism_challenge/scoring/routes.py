"""`GET /v1/leaderboard`: the standings as JSON, read from the store on every request."""

from __future__ import annotations

from fastapi import APIRouter

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.params import CorpusQuery
from prism_challenge.scoring.leaderboard import Leaderboard
from prism_challenge.scoring.queries import load_leaderboard


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["scoring"])

    @router.get("/leaderboard", response_model=Leaderboard)
    def leaderboard(corpus: CorpusQuery = None) -> Leaderboard:
        with deps.store.session() as session:
            return load_leaderboard(session, deps.settings.scoring, corpus=corpus)

    return router
