"""Signed requests (DESIGN §3): the canonical message, its headers, signing and verifying.

A miner's hotkey signs (sr25519) one line per bound value, under a domain tag so that the
signature cannot be replayed as any other kind of Bittensor-signed message:

    prism-submission/1
    netuid:<netuid>
    hotkey:<ss58>
    nonce:<nonce>
    timestamp:<unix seconds>
    body-sha256:<hex>

Shared by the miner's client (signs) and the validator's intake (verifies), so both build
the message with the same function.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

DOMAIN = "prism-submission/1"
HOTKEY_HEADER = "X-Prism-Hotkey"
NETUID_HEADER = "X-Prism-Netuid"
NONCE_HEADER = "X-Prism-Nonce"
TIMESTAMP_HEADER = "X-Prism-Timestamp"
SIGNATURE_HEADER = "X-Prism-Signature"
HEADERS = (HOTKEY_HEADER, NETUID_HEADER, NONCE_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)

_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_UINT = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"(0x)?[0-9a-fA-F]{128}")


class Signer(Protocol):
    """What signs: a bittensor wallet's hotkey or a substrate-interface Keypair."""

    ss58_address: str

    def sign(self, data: bytes) -> bytes: ...


class MalformedHeaders(ValueError):
    """The signing headers are missing or unusable; the message names the header."""


@dataclass(frozen=True)
class SignedHeaders:
    hotkey: str
    netuid: int
    nonce: str
    timestamp: int
    signature: str  # hex as sent; its shape is judged when verifying (a 401, like a bad one)

    def message(self, body: bytes) -> bytes:
        return canonical_message(
            netuid=self.netuid,
            hotkey=self.hotkey,
            nonce=self.nonce,
            timestamp=self.timestamp,
            body_sha256=hashlib.sha256(body).hexdigest(),
        )

    def as_http(self) -> dict[str, str]:
        return {
            HOTKEY_HEADER: self.hotkey,
            NETUID_HEADER: str(self.netuid),
            NONCE_HEADER: self.nonce,
            TIMESTAMP_HEADER: str(self.timestamp),
            SIGNATURE_HEADER: self.signature,
        }

    @classmethod
    def parse(cls, headers: Mapping[str, str]) -> SignedHeaders:
        """Read the five headers (case-insensitive mapping); shape only, no crypto."""
        values = {}
        for name in HEADERS:
            value = headers.get(name)
            if value is None or not value.strip():
                raise MalformedHeaders(f"the {name} header is missing")
            values[name] = value.strip()
        if not _UINT.fullmatch(values[NETUID_HEADER]):
            raise MalformedHeaders(f"{NETUID_HEADER} must be a non-negative integer")
        if not _UINT.fullmatch(values[TIMESTAMP_HEADER]):
            raise MalformedHeaders(f"{TIMESTAMP_HEADER} must be whole unix seconds")
        if not _NONCE.fullmatch(values[NONCE_HEADER]):
            raise MalformedHeaders(f"{NONCE_HEADER} must be 16-128 characters of [A-Za-z0-9_-]")
        hotkey = values[HOTKEY_HEADER]
        if len(hotkey) > 64 or not is_ss58(hotkey):
            raise MalformedHeaders(f"{HOTKEY_HEADER} is not a valid ss58 address")
        return cls(
            hotkey=hotkey,
            netuid=int(values[NETUID_HEADER]),
            nonce=values[NONCE_HEADER],
            timestamp=int(values[TIMESTAMP_HEADER]),
            signature=values[SIGNATURE_HEADER],
        )


def canonical_message(
    *, netuid: int, hotkey: str, nonce: str, timestamp: int, body_sha256: str
) -> bytes:
    lines = [
        DOMAIN,
        f"netuid:{netuid}",
        f"hotkey:{hotkey}",
        f"nonce:{nonce}",
        f"timestamp:{timestamp}",
        f"body-sha256:{body_sha256}",
    ]
    return "\n".join(lines).encode("utf-8")


def new_nonce() -> str:
    return secrets.token_hex(16)


def sign_request(
    signer: Signer, *, netuid: int, body: bytes, timestamp: float, nonce: str | None = None
) -> SignedHeaders:
    """Sign `body` for `netuid` as the signer's hotkey; returns the headers to send."""
    unsigned = SignedHeaders(
        hotkey=signer.ss58_address,
        netuid=netuid,
        nonce=nonce or new_nonce(),
        timestamp=int(timestamp),
        signature="",
    )
    signature = bytes(signer.sign(unsigned.message(body)))
    return replace(unsigned, signature="0x" + signature.hex())


def is_ss58(address: str) -> bool:
    from substrateinterface.utils.ss58 import is_valid_ss58_address

    try:
        return bool(is_valid_ss58_address(address))
    except Exception:  # any decoding failure means "not an address"
        return False


def verify_signature(hotkey: str, message: bytes, signature: str) -> bool:
    """True only for a valid sr25519 signature (hex) of `message` by `hotkey`; never raises."""
    from substrateinterface import Keypair

    if not _SIGNATURE.fullmatch(signature):
        return False
    try:
        raw = bytes.fromhex(signature.removeprefix("0x"))
        return bool(Keypair(ss58_address=hotkey).verify(message, raw))
    except Exception:  # a malformed key or signature is simply not valid
        return False
