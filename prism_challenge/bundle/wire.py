"""The canonical encoding of a bundle: the digest input and the HTTP request body in one.

    b"PRISM-BUNDLE/1\n", then per file in sorted name order:
        u16 big-endian name length, ASCII name, u32 big-endian data length, data

The digest is sha256 of exactly these bytes (docs/submissions.md: sorted names; name, length
and bytes of each file). Decoding is strict: unsorted or repeated names, unknown names,
truncation or trailing bytes are refused, so every accepted body is the one canonical
encoding of its files and sha256(body) is the bundle's digest.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from prism_challenge.bundle.errors import BundleError
from prism_challenge.bundle.rules import MAX_WIRE_BYTES, check_name, check_size

MAGIC = b"PRISM-BUNDLE/1\n"
_NAME_LEN = struct.Struct(">H")
_DATA_LEN = struct.Struct(">I")


def encode(files: Mapping[str, bytes]) -> bytes:
    parts = [MAGIC]
    for name in sorted(files):
        raw_name = name.encode("ascii")
        data = files[name]
        parts += [_NAME_LEN.pack(len(raw_name)), raw_name, _DATA_LEN.pack(len(data)), data]
    return b"".join(parts)


def digest_of(wire: bytes) -> str:
    return hashlib.sha256(wire).hexdigest()


def _malformed(message: str) -> BundleError:
    return BundleError("BUNDLE_WIRE", f"malformed bundle encoding: {message}")


def _take(wire: bytes, offset: int, count: int, what: str) -> tuple[bytes, int]:
    end = offset + count
    if end > len(wire):
        raise _malformed(f"truncated inside {what} at byte {offset}")
    return wire[offset:end], end


def decode(wire: bytes) -> dict[str, bytes]:
    """Split the canonical encoding into its files (file-level rules are checked elsewhere)."""
    if len(wire) > MAX_WIRE_BYTES:
        raise BundleError(
            "BUNDLE_SIZE", f"the bundle is {len(wire)} bytes; at most {MAX_WIRE_BYTES} are allowed"
        )
    if not wire.startswith(MAGIC):
        raise _malformed(f"it does not start with {MAGIC!r} (build it with Bundle.to_wire())")
    files: dict[str, bytes] = {}
    offset = len(MAGIC)
    previous = ""
    while offset < len(wire):
        raw, offset = _take(wire, offset, _NAME_LEN.size, "a name length")
        raw_name, offset = _take(wire, offset, _NAME_LEN.unpack(raw)[0], "a file name")
        try:
            name = raw_name.decode("ascii")
        except UnicodeDecodeError:
            raise _malformed("a file name is not ASCII") from None
        check_name(name)
        if name <= previous:
            raise _malformed(f"{name} is repeated or out of sorted order")
        previous = name
        raw, offset = _take(wire, offset, _DATA_LEN.size, f"the length of {name}")
        size = _DATA_LEN.unpack(raw)[0]
        check_size(name, size)
        files[name], offset = _take(wire, offset, size, f"the bytes of {name}")
    return files
