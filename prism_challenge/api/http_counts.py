"""Counts of HTTP requests by method, route template and status, refusals included.

Accepted submissions are visible in the store; refused ones (401, 409, 429, ...) leave no
row, so this counter is the only place an operator can see a flood or a replay storm. One
`HttpCounts` per app, exposed through that app's metrics registry.
"""

from __future__ import annotations

import threading
from collections import Counter

from prometheus_client.core import CounterMetricFamily


class HttpCounts:
    """A thread-safe tally, and a prometheus collector of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, method: str, route: str, status: int) -> None:
        with self._lock:
            self._counts[(method, route, str(status))] += 1

    def collect(self):
        family = CounterMetricFamily("prism_http_requests", "HTTP requests answered",
                                     labels=["method", "route", "status"])
        with self._lock:
            items = sorted(self._counts.items())
        for labels, value in items:
            family.add_metric(list(labels), value)
        yield family


def install(app, counts: HttpCounts) -> None:
    """Count every request after routing, by the route's template (not the raw path)."""

    @app.middleware("http")
    async def _count(request, call_next):
        response = await call_next(request)
        route = request.scope.get("route")
        counts.add(request.method, getattr(route, "path", "unmatched"), response.status_code)
        return response
