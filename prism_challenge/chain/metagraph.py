"""Who is on the subnet: the one question intake and weights ask the chain.

`MetagraphView` is the interface; `StaticMetagraph` answers from a list (local mode and
tests), `LiveMetagraph` from `bittensor.Metagraph` views read through `ChainClient`
(online), refreshed on a block schedule.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import bittensor

from prism_challenge.chain.status import ChainStatus
from prism_challenge.chain.subtensor import ChainClient, ChainUnavailable

log = logging.getLogger("prism.chain")


@runtime_checkable
class MetagraphView(Protocol):
    def uid_of(self, hotkey: str) -> int | None:
        """The uid registered to `hotkey`, or None when it is not on the subnet."""

    def is_registered(self, hotkey: str) -> bool: ...

    @property
    def n(self) -> int:
        """Number of uids on the subnet (the length of a weight vector)."""

    @property
    def block(self) -> int | None: ...

    @property
    def stale(self) -> bool:
        """True while the chain is unreachable and an older view is in use."""


def registered_among(metagraph: MetagraphView | None, hotkeys: Iterable[str]
                     ) -> set[str] | None:
    """The registered ones among `hotkeys`; None when nothing is known (no metagraph given,
    or none read from the chain yet), so a caller filters nothing rather than everyone."""
    if metagraph is None:
        return None
    try:
        return {hk for hk in hotkeys if metagraph.is_registered(hk)}
    except ChainUnavailable:
        return None


class MetagraphFileError(ValueError):
    """A local metagraph file that cannot be used; the message says why."""


@dataclass(frozen=True)
class StaticMetagraph:
    """A fixed hotkey -> uid table; `allow_any` accepts unknown hotkeys (local mode);
    `owner`: the subnet owner's hotkey, when the table says (None: not known)."""

    hotkeys: tuple[str, ...]
    current_block: int | None = None
    allow_any: bool = False
    owner: str | None = None

    @classmethod
    def of(
        cls, hotkeys: Sequence[str], *, block: int | None = None, allow_any: bool = False,
        owner: str | None = None,
    ) -> StaticMetagraph:
        if len(set(hotkeys)) != len(hotkeys):
            raise MetagraphFileError("a hotkey appears twice in the metagraph")
        return cls(tuple(hotkeys), block, allow_any, owner)

    @classmethod
    def from_file(cls, path: Path, *, allow_any: bool = False) -> StaticMetagraph:
        """Read {"hotkeys": [...], "block": N, "owner_hotkey": "5..."} (block and owner
        optional); uid i is hotkeys[i]."""
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise MetagraphFileError(f"{path}: metagraph file not found") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MetagraphFileError(f"{path}: not valid JSON: {exc}") from None
        hotkeys = doc.get("hotkeys") if isinstance(doc, dict) else None
        if not isinstance(hotkeys, list) or not all(isinstance(h, str) for h in hotkeys):
            raise MetagraphFileError(f"{path}: 'hotkeys' must be a list of strings")
        block = doc.get("block")
        if block is not None and not isinstance(block, int):
            raise MetagraphFileError(f"{path}: 'block' must be an integer")
        owner = doc.get("owner_hotkey")
        if owner is not None and not isinstance(owner, str):
            raise MetagraphFileError(f"{path}: 'owner_hotkey' must be a string")
        return cls.of(hotkeys, block=block, allow_any=allow_any, owner=owner)

    def uid_of(self, hotkey: str) -> int | None:
        try:
            return self.hotkeys.index(hotkey)
        except ValueError:
            return None

    def is_registered(self, hotkey: str) -> bool:
        return self.allow_any or hotkey in self.hotkeys

    @property
    def owner_hotkey(self) -> str | None:
        return self.owner

    @property
    def n(self) -> int:
        return len(self.hotkeys)

    @property
    def block(self) -> int | None:
        return self.current_block

    @property
    def stale(self) -> bool:
        return False


class LiveMetagraph:
    """The subnet as last read from the chain (online mode).

    `refresh` checks the head block and re-reads the metagraph once `refresh_blocks` have
    passed. When the chain cannot be reached the last good view stays in use, marked
    `stale`: intake keeps checking registration against it and the validator keeps
    evaluating, but weights wait for a fresh view. Before any view was read, asking whether
    a hotkey is registered raises `ChainUnavailable` (intake answers 503) rather than
    guessing.
    """

    def __init__(self, client: ChainClient, *, refresh_blocks: int = 5,
                 status: ChainStatus | None = None) -> None:
        self._client = client
        self.refresh_blocks = refresh_blocks
        self._status = status
        self._lock = threading.Lock()
        self._graph: bittensor.Metagraph | None = None
        self._index: dict[str, int] = {}
        self.stale = True

    def refresh(self, *, force: bool = False) -> bool:
        """Bring the view up to date if due; False when the chain could not be read."""
        try:
            graph = self._graph
            due = graph is None or self._client.block() >= graph.block + self.refresh_blocks
            if force or due:
                graph = self._client.metagraph()
                with self._lock:
                    self._graph = graph
                    self._index = {n.hotkey: n.uid for n in graph.neurons}
            self.stale = False
        except ChainUnavailable as exc:
            if not self.stale:
                log.warning("chain unreachable, keeping the metagraph of block %s: %s",
                            self.block, exc)
            self.stale = True
        if self._status is not None:
            self._status.saw_metagraph(self.block, stale=self.stale)
        return not self.stale

    def _view(self) -> bittensor.Metagraph:
        if self._graph is None:
            raise ChainUnavailable(
                f"no metagraph of netuid {self._client.netuid} has been read from "
                f"{self._client.network} yet")
        return self._graph

    def uid_of(self, hotkey: str) -> int | None:
        """None also before any view was read (a plan then burns; weights wait anyway)."""
        return self._index.get(hotkey)

    def is_registered(self, hotkey: str) -> bool:
        self._view()  # intake must not refuse a miner as unregistered on no information
        return hotkey in self._index

    def neuron(self, hotkey: str) -> bittensor.MetagraphNeuron | None:
        return self._view().by_hotkey(hotkey)

    @property
    def neurons(self) -> list[bittensor.MetagraphNeuron]:
        return list(self._view().neurons)

    @property
    def owner_hotkey(self) -> str:
        """The subnet owner's hotkey (the chain lets it set weights without a permit)."""
        return str(self._view().owner_hotkey)

    @property
    def n(self) -> int:
        return len(self._graph.neurons) if self._graph is not None else 0

    @property
    def block(self) -> int | None:
        return None if self._graph is None else int(self._graph.block)
