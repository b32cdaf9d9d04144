"""The wire between the challenge (outside) and a harness (inside): framed JSON + raw bytes.

A frame is a 4-byte big-endian header length, a JSON header, then `header["payload"]`
raw bytes (token rows as little-endian int32, losses and logits as little-endian float32).
Small, explicit, and parseable without pickle on either side.

The receiving side bounds what it reads: the header is at most `MAX_HEADER` bytes, and the
payload at most what `max_payload` allows for that header (a number, or a function of the
header, so that each message kind has its own limit). A frame over a limit is refused
before its payload is read, so no message can grow the reader's memory past a fixed bound.
Whatever the peer sends, `recv` answers with a frame, a `ProtocolError` (not a valid frame,
or over a limit), or a `ConnectionError` (the peer closed before a whole frame arrived).
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable

MAX_HEADER = 1 << 16
MAX_PAYLOAD = 1 << 30
SNAPSHOT_CHUNK = 1 << 24  # one frame of a replay snapshot's bytes at most: 16 MiB

PayloadLimit = int | Callable[[dict], int]


class ProtocolError(RuntimeError):
    """The peer sent something that is not a valid frame, or a frame over a limit."""


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    """The next `n` bytes, in the buffer they were received into: no copy is made and freed.
    In the training sandbox a freed copy of a step's rows (targets included) could be found
    by the model's forward in recycled memory (an uninitialised allocation) before the step
    is scored; the buffer returned lives as long as its caller holds it."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return buf


def parse_json(raw: bytes, what: str):
    """`raw` as JSON, or a `ProtocolError`: the decoder's own refusals (bad syntax or
    encoding, an integer past Python's digit limit, nesting past the recursion limit) are
    all the peer's fault."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError too
        raise ProtocolError(f"{what} is not JSON: {str(exc)[:200]}") from None


def send(sock: socket.socket, header: dict, payload: bytes | memoryview = b"") -> None:
    if len(payload):
        header = {**header, "payload": len(payload)}
    raw = json.dumps(header, separators=(",", ":")).encode()
    if len(raw) > MAX_HEADER:
        raise ProtocolError(f"header of {len(raw)} bytes is over the limit of {MAX_HEADER}")
    sock.sendall(struct.pack(">I", len(raw)) + raw)
    if len(payload):
        sock.sendall(payload)


def recv(sock: socket.socket, max_payload: PayloadLimit = MAX_PAYLOAD
         ) -> tuple[dict, bytes | bytearray]:
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes is too large")
    header = parse_json(_recv_exact(sock, size), "header")
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    n = header.get("payload", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ProtocolError("bad payload length")
    limit = max_payload(header) if callable(max_payload) else max_payload
    if n > min(limit, MAX_PAYLOAD):
        op = repr(header.get("op", "message"))[:40]
        raise ProtocolError(f"a {op} payload of {n} bytes is over its limit of "
                            f"{min(limit, MAX_PAYLOAD)}")
    return header, _recv_exact(sock, n) if n else b""
