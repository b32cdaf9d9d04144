"""Who is on the subnet: the one question intake and weights ask the chain.

`MetagraphView` is the interface; `StaticMetagraph` answers from a list (local mode and
tests), `BittensorMetagraph` from a synced `bittensor.Metagraph` (online).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable


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


class MetagraphFileError(ValueError):
    """A local metagraph file that cannot be used; the message says why."""


@dataclass(frozen=True)
class StaticMetagraph:
    """A fixed hotkey -> uid table; `allow_any` accepts unknown hotkeys (local mode)."""

    hotkeys: tuple[str, ...]
    current_block: int | None = None
    allow_any: bool = False

    @classmethod
    def of(
        cls, hotkeys: Sequence[str], *, block: int | None = None, allow_any: bool = False
    ) -> StaticMetagraph:
        if len(set(hotkeys)) != len(hotkeys):
            raise MetagraphFileError("a hotkey appears twice in the metagraph")
        return cls(tuple(hotkeys), block, allow_any)

    @classmethod
    def from_file(cls, path: Path, *, allow_any: bool = False) -> StaticMetagraph:
        """Read {"hotkeys": [...], "block": N}; uid i is hotkeys[i]."""
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
        return cls.of(hotkeys, block=block, allow_any=allow_any)

    def uid_of(self, hotkey: str) -> int | None:
        try:
            return self.hotkeys.index(hotkey)
        except ValueError:
            return None

    def is_registered(self, hotkey: str) -> bool:
        return self.allow_any or hotkey in self.hotkeys

    @property
    def n(self) -> int:
        return len(self.hotkeys)

    @property
    def block(self) -> int | None:
        return self.current_block


class BittensorMetagraph:
    """The live subnet as a synced `bittensor.Metagraph` sees it (online mode)."""

    def __init__(self, netuid: int, network: str) -> None:
        import bittensor

        self._metagraph = bittensor.Metagraph(netuid=netuid, network=network, lite=True, sync=True)
        self._refresh_index()

    def _refresh_index(self) -> None:
        self._index = {hk: uid for uid, hk in enumerate(self._metagraph.hotkeys)}

    def sync(self) -> None:
        self._metagraph.sync(lite=True)
        self._refresh_index()

    def uid_of(self, hotkey: str) -> int | None:
        return self._index.get(hotkey)

    def is_registered(self, hotkey: str) -> bool:
        return hotkey in self._index

    @property
    def n(self) -> int:
        return len(self._index)

    @property
    def block(self) -> int | None:
        return int(self._metagraph.block)
