"""`GET /v1/weights`: the weights plan as JSON (this route never sets anything). Online it is
the vector the chain would store (`ApiDeps.as_sent`), the one the node's setter sends."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from fastapi import APIRouter

from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import ApiError, ErrorBody
from prism_challenge.api.params import CorpusQuery
from prism_challenge.weights.conform import WeightsImpossible
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
                plan = load_plan(
                    session, deps.metagraph, deps.settings, research_credit=credit, corpus=corpus,
                    hotkey=deps.hotkey, now=deps.clock(),
                )
            return plan if deps.as_sent is None else deps.as_sent(plan)
        except WeightsImpossible as exc:  # no vector the subnet accepts carries the plan
            raise ApiError(503, "WEIGHTS_IMPOSSIBLE", str(exc)) from None
        except ValueError as exc:  # a misconfigured burn uid or bad research credit
            raise ApiError(503, "WEIGHTS_CONFIG", str(exc)) from None

    return router
