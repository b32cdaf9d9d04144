"""Build the chain a process uses from settings: the local ledger, or the live subnet."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import bittensor

from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.metagraph import LiveMetagraph, MetagraphView, StaticMetagraph
from prism_challenge.chain.online import OnlineSubnet
from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subnet import Subnet
from prism_challenge.chain.subtensor import ChainClient
from prism_challenge.config.settings import Settings


@dataclass
class ChainAccess:
    """The metagraph, the subnet (commitments, addresses) and, online, the chain client."""

    metagraph: MetagraphView
    subnet: Subnet
    client: ChainClient | None = None
    status: ChainStatus = field(default_factory=ChainStatus)

    def refresh(self, *, force: bool = False) -> bool:
        """Re-read the metagraph when due (online); False when the chain is unreachable."""
        refresh = getattr(self.metagraph, "refresh", None)
        return True if refresh is None else refresh(force=force)

    def head(self) -> int | None:
        """The block a command is about to act at: the metagraph's online, the ledger's head
        locally (None when it could not be read)."""
        if self.client is None:
            return getattr(self.subnet, "block", None)
        return self.metagraph.block

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def local_metagraph(settings: Settings) -> StaticMetagraph:
    """Raises MetagraphFileError for an unusable chain.metagraph_file."""
    chain = settings.chain
    if chain.metagraph_file is not None:
        return StaticMetagraph.from_file(chain.metagraph_file, allow_any=chain.allow_any_hotkey)
    return StaticMetagraph.of([], allow_any=chain.allow_any_hotkey)


def connect(settings: Settings, *, substrate: bittensor.Substrate | None = None,
            status: ChainStatus | None = None, read_only: bool = False) -> ChainAccess:
    """Online: reads the metagraph once (a chain down at start-up leaves it empty and
    stale; intake answers 503 until it can be read). `substrate` is bittensor's test seam.
    `read_only` (commands that only show): a local ledger that does not exist is not
    created."""
    chain = settings.chain
    status = status or ChainStatus()
    if chain.mode == "online":
        client = ChainClient(chain.network, chain.netuid, timeout_s=chain.timeout_s,
                             period_blocks=chain.period_blocks, substrate=substrate)
        metagraph = LiveMetagraph(client, refresh_blocks=chain.refresh_blocks, status=status)
        metagraph.refresh(force=True)
        return ChainAccess(metagraph, OnlineSubnet(client, metagraph), client, status)
    metagraph = local_metagraph(settings)
    ledger = LocalLedger(Path(chain.local_ledger), metagraph, create=not read_only)
    return ChainAccess(metagraph, ledger, status=status)
