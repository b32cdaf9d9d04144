"""The chain as this node last saw it: metagraph freshness and weight-setting outcomes.

One `ChainStatus` per node, written by the metagraph refresh and the weight setter, read
by `/metrics` (it is a prometheus collector). These facts live in the process, not in the
store: they describe this process's connection to the chain.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class ChainStatus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.block: int | None = None
        self.stale: bool | None = None  # None: this node has no chain view (local mode)
        self.weights: Counter[str] = Counter()
        self.last_set_block: int | None = None
        self.last_set_at: float | None = None
        self.dropped = 0  # commits whose reveal the chain dropped

    def saw_metagraph(self, block: int | None, *, stale: bool) -> None:
        with self._lock:
            self.block, self.stale = block, stale

    def weights_attempt(self, outcome: str, *, block: int | None = None) -> None:
        """Count one epoch's outcome (set, committed, not_yet, stale, failed, ...)."""
        with self._lock:
            self.weights[outcome] += 1
            if outcome in ("set", "committed"):
                self.last_set_block, self.last_set_at = block, time.time()

    def weights_dropped(self) -> None:
        """A commit was not applied at its reveal (the chain refused it without an error)."""
        with self._lock:
            self.dropped += 1

    def collect(self):
        with self._lock:
            block, stale = self.block, self.stale
            counts = sorted(self.weights.items())
            last_block, last_at = self.last_set_block, self.last_set_at
            dropped = self.dropped
        if stale is not None:
            yield GaugeMetricFamily("prism_chain_metagraph_stale",
                                    "1 while the chain is unreachable and the last good "
                                    "metagraph is in use", value=int(stale))
        if block is not None:
            yield GaugeMetricFamily("prism_chain_metagraph_block",
                                    "Block of the metagraph this node uses", value=block)
        family = CounterMetricFamily("prism_weights_attempts",
                                     "Weight-setting attempts by outcome", labels=["outcome"])
        for outcome, n in counts:
            family.add_metric([outcome], n)
        yield family
        yield CounterMetricFamily("prism_weights_dropped_at_reveal",
                                  "Commits the chain did not apply at their reveal",
                                  value=dropped)
        if last_block is not None:
            yield GaugeMetricFamily("prism_weights_last_set_block",
                                    "Block at which this node last set weights",
                                    value=last_block)
        if last_at is not None:
            yield GaugeMetricFamily("prism_weights_last_set_timestamp_seconds",
                                    "When this node last set weights", value=last_at)
