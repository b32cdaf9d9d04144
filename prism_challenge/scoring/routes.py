"""`GET /v1/leaderboard`: the standings as JSON, read from the store on every request."""

from __future__ import annotations

from fastapi import APIRouter

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.params import CorpusQuery
from prism_challenge.scoring.leaderboard import Leaderboard, build_leaderboard


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["scoring"])

    @router.get("/leaderboard", response_model=Leaderboard)
    def leaderboard(corpus: CorpusQuery = None) -> Leaderboard:
        """What ranks: with `agreement.enabled`, the shared-input aggregate of each run."""
        sc = deps.settings.scoring
        with deps.store.session() as session:
            entries = ranked_entries(session, deps.settings, deps.hotkey,
                                     now=deps.clock()).entries
        return build_leaderboard(entries, epsilon=sc.epsilon_bpb, margin=sc.dethrone_margin,
                                 corpus=corpus)

    return router
