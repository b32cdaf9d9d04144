"""What every router is built from: passed explicitly, never module-level state."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client.registry import Collector

from prism_challenge.api.http_counts import HttpCounts
from prism_challenge.chain.metagraph import MetagraphView
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subnet import Subnet
from prism_challenge.config.settings import Settings
from prism_challenge.storage import Store

if TYPE_CHECKING:  # a type only: the toolkit imports no feature
    from prism_challenge.cluster.capacity import NodeUsage


@dataclass(frozen=True)
class ApiDeps:
    settings: Settings
    store: Store
    metagraph: MetagraphView
    # Injected so that tests can move time (freshness, rate-limit windows) without sleeping.
    clock: Callable[[], float] = time.time
    # This app's request tally (one per ApiDeps, so per app), exposed at /metrics.
    http_counts: HttpCounts = field(default_factory=HttpCounts)
    # This validator's hotkey (ss58): submissions must be signed for it. None: no intake.
    hotkey: str | None = None
    # Where commitments are read (the chain online, the local ledger in local mode).
    subnet: Subnet | None = None
    # The chain as this node last saw it (metagraph freshness, weight setting), at /metrics.
    chain_status: ChainStatus = field(default_factory=ChainStatus)
    # The node's evaluation slots (in rotation or not), exposed at /metrics; None outside a node.
    slots: Collector | None = None
    # Per-node slots and utilisation of the Ray cluster (validator.executor: ray), for the
    # dashboard; None otherwise.
    cluster: Callable[[], list[NodeUsage]] | None = None
    # The validator's wallet (or keypair): its hotkey signs the measurements served
    # at /v1/measurements. None: measurements are not served.
    signer: Any | None = None
    # Peer fetching outcomes (agreement.status.AgreementStatus), exposed at /metrics.
    agreement: Collector | None = None
    # Online: turns a weights plan into the vector the chain would store (the subnet's max
    # weight limit and min allowed weights; `weights.conform.AsSent`), so /v1/weights shows
    # what is sent. None (local mode): the plan is shown as built.
    as_sent: Callable[[Any], Any] | None = None
