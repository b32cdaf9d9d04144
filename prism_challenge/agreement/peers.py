"""Who measures besides this validator, where it serves, and how much stake it carries.

Online, the electorate is the metagraph's validators with a permit (stake: `total_stake`,
in the subnet's own units); a peer is one of them other than this node with a served axon.
In local mode (no chain) it is the validators in the local ledger, one unit of stake each.
"""

from __future__ import annotations

from dataclasses import dataclass

from prism_challenge.chain.factory import ChainAccess
from prism_challenge.chain.metagraph import LiveMetagraph


@dataclass(frozen=True)
class Peer:
    hotkey: str
    url: str | None  # where it serves /v1/measurements; None: nowhere known
    stake: float


def electorate(chain: ChainAccess, own_hotkey: str) -> list[Peer]:
    """Every validator whose measurements may count, this one first (its url is None).

    Raises `ChainUnavailable` online before any metagraph was read."""
    if isinstance(chain.metagraph, LiveMetagraph):
        permitted = [n for n in chain.metagraph.neurons
                     if n.validator_permit or n.hotkey == own_hotkey]
        stakes = {n.hotkey: n.total_stake.rao / 1e9 for n in permitted}
        urls = {n.hotkey: f"http://{n.axon}" for n in permitted if n.axon}
    else:
        endpoints = chain.subnet.validators()
        stakes = {e.hotkey: 1.0 for e in endpoints} | {own_hotkey: 1.0}
        urls = {e.hotkey: e.url for e in endpoints}
    own = Peer(own_hotkey, None, stakes.get(own_hotkey, 0.0))
    return [own] + [Peer(hk, urls.get(hk), stake) for hk, stake in sorted(stakes.items())
                    if hk != own_hotkey]
