"""The validator's HTTP API: one FastAPI app, one router per stage (docs/submissions.md).

Each stage owns its routes in its own package as `build(deps) -> APIRouter`; adding a stage's
API is one line in `ROUTERS`.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, FastAPI

from prism_challenge import __version__
from prism_challenge.agreement import leaderboard_routes
from prism_challenge.agreement import routes as agreement_routes
from prism_challenge.api import health, http_counts
from prism_challenge.api.deps import ApiDeps
from prism_challenge.api.errors import REFUSALS_DOC, install_error_handlers
from prism_challenge.dashboard import curve_api
from prism_challenge.dashboard import routes as dashboard_routes
from prism_challenge.intake import routes as intake_routes
from prism_challenge.metrics import routes as metrics_routes
from prism_challenge.registry import routes as registry_routes
from prism_challenge.weights import routes as weights_routes

ROUTERS: tuple[Callable[[ApiDeps], APIRouter], ...] = (
    health.build,
    intake_routes.build,
    registry_routes.build,
    leaderboard_routes.build,
    weights_routes.build,
    agreement_routes.build,
    dashboard_routes.build,
    curve_api.build,
    metrics_routes.build,
)


def create_app(deps: ApiDeps) -> FastAPI:
    app = FastAPI(
        title="PRISM validator",
        version=__version__,
        description="Signed submissions, their status, and the node's public state.",
        responses=REFUSALS_DOC,
        # Swagger and ReDoc load their scripts from a CDN (blank offline); the dashboard
        # serves /docs from the OpenAPI document instead.
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    http_counts.install(app, deps.http_counts)
    for build in ROUTERS:
        app.include_router(build(deps))
    app.state.deps = deps
    return app
