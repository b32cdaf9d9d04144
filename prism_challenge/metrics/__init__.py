"""Prometheus metrics of a PRISM node, computed from the store at scrape time."""

from prism_challenge.metrics.collector import StoreCollector, families
from prism_challenge.metrics.routes import build, metrics_registry
from prism_challenge.metrics.snapshot import LastRun, StoreSnapshot, read_snapshot

__all__ = [
    "LastRun",
    "StoreCollector",
    "StoreSnapshot",
    "build",
    "families",
    "metrics_registry",
    "read_snapshot",
]
