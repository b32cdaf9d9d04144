"""Prometheus metrics of a PRISM node, computed from the store at scrape time."""

from prism_challenge.metrics.collector import StoreCollector, families
from prism_challenge.metrics.routes import build, metrics_registry
from prism_challenge.metrics.runs import LastRun, RunSummary, RunTally
from prism_challenge.metrics.snapshot import StoreSnapshot, read_snapshot

__all__ = [
    "LastRun",
    "RunSummary",
    "RunTally",
    "StoreCollector",
    "StoreSnapshot",
    "build",
    "families",
    "metrics_registry",
    "read_snapshot",
]
