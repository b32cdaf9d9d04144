"""Is a string an SS58 address (a hotkey as the chain writes it)? Pure Python, so commands
that only read can check a `--hotkey` without the bittensor extra.

SS58: base58 of prefix (1 or 2 bytes) + 32-byte public key + 2 checksum bytes, the checksum
being the first two bytes of blake2b-512("SS58PRE" + prefix + key).
"""

from __future__ import annotations

import hashlib

_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_INDEX = {c: i for i, c in enumerate(_ALPHABET)}


def _b58decode(text: str) -> bytes | None:
    n = 0
    for c in text:
        if c not in _INDEX:
            return None
        n = n * 58 + _INDEX[c]
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * (len(text) - len(text.lstrip("1"))) + raw


def is_ss58(address: str) -> bool:
    """True for a well-formed SS58 address of a 32-byte key (any network prefix)."""
    if not 40 <= len(address) <= 60:
        return False
    raw = _b58decode(address)
    if raw is None or len(raw) not in (35, 36):
        return False
    body, checksum = raw[:-2], raw[-2:]
    return hashlib.blake2b(b"SS58PRE" + body, digest_size=64).digest()[:2] == checksum


def hotkey_problem(address: str) -> str | None:
    """None for an SS58 address, else a one-line reason with the next step."""
    if is_ss58(address):
        return None
    return (f"{address!r} is not a hotkey: an SS58 address is 48 base58 characters "
            "(5F3sa2TJ...); print yours with `btcli wallet list`")
