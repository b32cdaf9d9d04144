"""What PRISM needs from a subnet besides the metagraph: commitments and validator addresses.

`Subnet` is the interface; `OnlineSubnet` (chain/online.py) answers from the chain and
`LocalLedger` (chain/ledger.py) from a file shared by the processes of one machine, so the
local and demo modes run the same commit -> discover -> upload -> verify path.

A miner commits `commitment_value(hotkey, digest)` before uploading a bundle. The value
binds the hotkey: copying another miner's commitment proves nothing, and the value does not
reveal the digest, so nobody can tell from the chain which bundle it names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol

import bittensor

COMMITMENT_TAG = "prism1:"


def commitment_value(hotkey: str, digest: str) -> str:
    """The text a miner commits for a bundle (71 ASCII bytes)."""
    bound = hashlib.sha256(f"prism-commitment/1\n{hotkey}\n{digest}".encode()).hexdigest()
    return COMMITMENT_TAG + bound


@dataclass(frozen=True)
class Commitment:
    """A hotkey's latest commitment: `block` is when it was made (precedence), `uid` the
    hotkey's uid then (the tie-break within a block; None when unknown)."""

    hotkey: str
    value: str
    block: int
    uid: int | None


@dataclass(frozen=True)
class Endpoint:
    """A validator that takes submissions: its hotkey (the signed requests' receiver)."""

    hotkey: str
    url: str


class Subnet(Protocol):
    def latest_commitment(self, hotkey: str) -> Commitment | None:
        """The hotkey's latest visible commitment, or None."""

    def commit(self, wallet: bittensor.Wallet, value: str) -> Commitment:
        """Publish `value` as the wallet hotkey's commitment; returns it with its block."""

    def validators(self) -> list[Endpoint]:
        """Validators with a permit and a published intake address."""

    def serve(self, wallet: bittensor.Wallet, host: str, port: int) -> str:
        """Publish this validator's intake address if it changed; says what happened."""
