"""`GET /v1/weights`: the dry-run weights plan as JSON (this route never sets anything)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fastapi import APIRouter

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody
from prism_challenge.api.params import CorpusQuery
from prism_challenge.weights.plan import WeightPlan, load_plan
from prism_challenge.weights.research import registry_credit


def build(
    deps: ApiDeps, research_credit: Callable[[], Mapping[str, float]] | None = None
) -> APIRouter:
    """`research_credit` is called per request; default: the registry's credit when
    `weights.research_share > 0`, else none."""
    router = APIRouter(prefix="/v1", tags=["weights"])

    @router.get("/weights", response_model=WeightPlan,
                responses={503: {"model": ErrorBody, "description": "misconfigured weights"}})
    def weights(corpus: CorpusQuery = None) -> WeightPlan:
        try:
            credit = (
                research_credit()
                if research_credit is not None
                else registry_credit(deps.store, deps.settings)
            )
            with deps.store.session() as session:
                return load_plan(
                    session, deps.metagraph, deps.settings, research_credit=credit, corpus=corpus,
                    hotkey=deps.hotkey, now=deps.clock(),
                )
        except ValueError as exc:  # a misconfigured burn uid or bad research credit
            raise ApiError(503, "WEIGHTS_CONFIG", str(exc)) from None

    return router
