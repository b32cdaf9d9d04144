"""The wire between the feeder (outside) and the harness (inside): framed JSON + raw bytes.

A frame is a 4-byte big-endian header length, a JSON header, then `header["payload"]`
raw bytes (token rows as little-endian int32). Small, explicit, and parseable without
pickle on either side.
"""

from __future__ import annotations

import json
import socket
import struct

MAX_HEADER = 1 << 16
MAX_PAYLOAD = 1 << 30


class ProtocolError(RuntimeError):
    """The peer sent something that is not a valid frame."""


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return bytes(buf)


def send(sock: socket.socket, header: dict, payload: bytes = b"") -> None:
    if payload:
        header = {**header, "payload": len(payload)}
    raw = json.dumps(header, separators=(",", ":")).encode()
    sock.sendall(struct.pack(">I", len(raw)) + raw + payload)


def recv(sock: socket.socket) -> tuple[dict, bytes]:
    (size,) = struct.unpack(">I", _recv_exact(sock, 4))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes is too large")
    try:
        header = json.loads(_recv_exact(sock, size))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    n = header.get("payload", 0)
    if not isinstance(n, int) or not 0 <= n <= MAX_PAYLOAD:
        raise ProtocolError("bad payload length")
    return header, _recv_exact(sock, n) if n else b""
