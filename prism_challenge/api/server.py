"""Serving an app with uvicorn on a background thread (the validator neuron and the tests).

The socket is bound before the thread starts, so port 0 gives a free port with no race, and
`start()` returns only once uvicorn accepts connections.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI


class ApiServer:
    """A uvicorn server for `app` on `host:port` (0 = any free port), run on a thread."""

    def __init__(
        self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *, log_level: str = "warning"
    ) -> None:
        # log_config=None: uvicorn logs through the root handlers (text or JSON lines).
        self._config = uvicorn.Config(app, log_level=log_level, log_config=None)
        self._server = uvicorn.Server(self._config)
        self._host, self._port = host, port
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the server is not started")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout_s: float = 10.0) -> str:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self._host, self._port))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._thread.is_alive():
            if self._server.started:
                return self.url
            time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"the API server did not start on {self._host}:{self._port}")

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> ApiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
