"""Peer fetching as this node saw it: pages taken and refused, by peer and outcome.

One `AgreementStatus` per node, written by the peer loop, read by `/metrics` (a prometheus
collector). Refusals are counted by reason so an operator sees a misbehaving peer.
"""

from __future__ import annotations

import threading
from collections import Counter

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class AgreementStatus:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pages: Counter[tuple[str, str]] = Counter()  # (peer, outcome)
        self.rows: Counter[str] = Counter()  # peer -> rows stored
        self.electorate: tuple[int, float] | None = None  # (validators, stake share held)
        self.equivocations: Counter[str] = Counter()  # validator -> proofs stored here

    def equivocation(self, validator: str) -> None:
        """A new proof that `validator` signed two different measurements of one run."""
        with self._lock:
            self.equivocations[validator] += 1

    def page(self, peer: str, outcome: str, *, rows: int = 0) -> None:
        """Count one page: `ok`, `unreachable`, `relayed` (a page of `peer` another
        validator relayed), or a refusal (`signature`, `malformed`, `oversized`,
        `wrong_validator`, `relay_*`, `proof_*` ...)."""
        with self._lock:
            self.pages[(peer, outcome)] += 1
            self.rows[peer] += rows

    def saw_electorate(self, validators: int, reachable_share: float) -> None:
        with self._lock:
            self.electorate = (validators, reachable_share)

    def refused(self, peer: str | None = None) -> int:
        """Pages refused (all peers, or one)."""
        with self._lock:
            return sum(n for (p, outcome), n in self.pages.items()
                       if outcome not in ("ok", "unreachable", "relayed")
                       and peer in (None, p))

    def collect(self):
        with self._lock:
            pages = sorted(self.pages.items())
            rows = sorted(self.rows.items())
            electorate = self.electorate
            proofs = sorted(self.equivocations.items())
        family = CounterMetricFamily("prism_agreement_pages",
                                     "Measurement pages fetched from peers, by outcome",
                                     labels=["peer", "outcome"])
        for (peer, outcome), n in pages:
            family.add_metric([peer, outcome], n)
        yield family
        stored = CounterMetricFamily("prism_agreement_rows",
                                     "Peer measurement rows stored", labels=["peer"])
        for peer, n in rows:
            stored.add_metric([peer], n)
        yield stored
        proven = CounterMetricFamily("prism_agreement_equivocations",
                                     "Proofs of equivocation stored (a validator's two "
                                     "conflicting signed measurements of one run)",
                                     labels=["validator"])
        for validator, n in proofs:
            proven.add_metric([validator], n)
        yield proven
        if electorate is not None:
            yield GaugeMetricFamily("prism_agreement_electorate_validators",
                                    "Validators (this one included) reached in the last "
                                    "peer_stale_s", value=electorate[0])
            yield GaugeMetricFamily("prism_agreement_electorate_stake_share",
                                    "Share of the permitted validators' stake reached",
                                    value=electorate[1])
