"""The chain as PRISM sees it: the metagraph (who is registered) and weight setting."""

from prism_challenge.chain.metagraph import (
    BittensorMetagraph,
    MetagraphFileError,
    MetagraphView,
    StaticMetagraph,
)

__all__ = ["BittensorMetagraph", "MetagraphFileError", "MetagraphView", "StaticMetagraph"]
