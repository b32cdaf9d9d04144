"""A prometheus_client collector that turns a store snapshot into metric families per scrape.

Registered on a per-app `CollectorRegistry` (never the global default one), so several apps
in one process each expose their own store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError

from prism_challenge.config.settings import ScoringSettings
from prism_challenge.metrics.runs import RunTally
from prism_challenge.metrics.snapshot import StoreSnapshot, read_snapshot
from prism_challenge.storage import Store
from prism_challenge.storage.lifecycle import Status

log = logging.getLogger(__name__)


class StoreCollector(Collector):
    def __init__(self, store: Store, scoring: ScoringSettings) -> None:
        self.store = store
        self.scoring = scoring
        self.runs = RunTally()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("prism_store_up", "1 when the store answered this scrape")
        try:
            with self.store.session() as session:
                snap = read_snapshot(session, self.scoring, self.runs)
        except SQLAlchemyError as exc:  # a scrape reports the outage instead of failing
            log.warning("metrics: the store cannot be read: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families(snap)


def families(snap: StoreSnapshot) -> Iterator[Metric]:
    """The metric families of one snapshot (pure)."""
    subs = GaugeMetricFamily(
        "prism_submissions", "Submissions in the store by status", labels=["status"]
    )
    for status in Status:
        subs.add_metric([status.value], snap.submissions.get(status.value, 0))
    yield subs
    yield CounterMetricFamily(
        "prism_run_attempts", "Sandbox runs started (attempts over all submissions)",
        value=snap.attempts,
    )
    scored = CounterMetricFamily(
        "prism_scored", "Submissions scored, by corpus and eligibility",
        labels=["corpus", "eligible"],
    )
    for (corpus, eligible), n in sorted(snap.scored.items()):
        scored.add_metric([corpus, "true" if eligible else "false"], n)
    yield scored
    runs = CounterMetricFamily(
        "prism_runs", "Run records stored, by exit reason", labels=["exit_reason"]
    )
    for reason, n in sorted(snap.runs.by_exit.items()):
        runs.add_metric([reason], n)
    yield runs
    if snap.runs.last is not None:
        last = snap.runs.last
        yield GaugeMetricFamily(
            "prism_last_run_duration_seconds",
            "Startup + train + eval seconds of the most recent run record",
            value=last.duration_s,
        )
        phases = GaugeMetricFamily(
            "prism_last_run_phase_seconds", "Seconds per phase of the most recent run record",
            labels=["phase"],
        )
        for phase, seconds in (("startup", last.startup_s), ("train", last.train_s),
                               ("eval", last.eval_s)):
            phases.add_metric([phase], seconds)
        yield phases
        yield GaugeMetricFamily(
            "prism_last_run_timestamp_seconds", "When the most recent run record was stored",
            value=last.created_at,
        )
    leader = GaugeMetricFamily(
        "prism_leader_bpb", "The current leader's bpb, per corpus", labels=["corpus"]
    )
    for corpus, bpb in sorted(snap.leaders.items()):
        leader.add_metric([corpus], bpb)
    yield leader
    cycles = CounterMetricFamily(
        "prism_registry_cycles", "Research cycles run, by outcome (failed: the LLM was down, "
        "timed out or answered garbage)", labels=["outcome"],
    )
    for outcome, n in sorted(snap.research_cycles.items()):
        cycles.add_metric([outcome], n)
    yield cycles
