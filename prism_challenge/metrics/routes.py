"""`GET /metrics`: Prometheus text exposition of this app's own registry.

The registry is made per `build` call (one per app): the global default registry would mix
the stores of every app a process (or a test session) creates.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector
from prometheus_client.exposition import generate_latest

from prism_challenge.api.deps import ApiDeps
from prism_challenge.metrics.collector import StoreCollector


def metrics_registry(deps: ApiDeps) -> CollectorRegistry:
    """A fresh registry with the store collector and this process's CPU/memory/fds."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(deps.store, deps.settings.scoring))
    registry.register(deps.http_counts)
    registry.register(deps.chain_status)
    if deps.slots is not None:
        registry.register(deps.slots)
    if deps.agreement is not None:
        registry.register(deps.agreement)
    ProcessCollector(registry=registry)
    return registry


def build(deps: ApiDeps) -> APIRouter:
    router = APIRouter(tags=["metrics"])
    if not deps.settings.dashboard.metrics_enabled:
        return router
    registry = metrics_registry(deps)

    @router.get("/metrics", response_class=Response)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
