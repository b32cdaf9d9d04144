"""Build the node's metagraph view from settings (local file / any hotkey / online)."""

from __future__ import annotations

from prism_challenge.chain.metagraph import BittensorMetagraph, MetagraphView, StaticMetagraph
from prism_challenge.config.settings import Settings


def make_metagraph(settings: Settings) -> MetagraphView:
    chain = settings.chain
    if chain.mode == "online":
        return BittensorMetagraph(chain.netuid, chain.network)
    if chain.metagraph_file is not None:
        return StaticMetagraph.from_file(chain.metagraph_file, allow_any=chain.allow_any_hotkey)
    return StaticMetagraph.of([], allow_any=chain.allow_any_hotkey)
