"""Fetching one page of a peer's measurements, and refusing anything that is not its own.

A page is accepted only when, in order: the peer answered 200 within the timeout; the body
is at most `max_page_bytes` (read incrementally, never more than that plus one chunk);
the `btauth/1` response signature verifies for *this* request target and body, is fresh,
and was made by the peer's hotkey as the metagraph names it; the JSON is a well-formed,
bounded `MeasurementsPage` of that validator on this netuid. Anything else raises
`PeerRefused` with the reason (a metrics label) and a sentence for the log.
"""

from __future__ import annotations

import json
import time

import httpx
from bittensor import http_auth
from pydantic import ValidationError

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import Signed, signed_headers
from prism_challenge.agreement.wire import MeasurementsPage, target


class PeerUnreachable(Exception):
    """The peer did not answer (connection, timeout, 5xx): not its fault, not counted
    against it."""


class PeerRefused(Exception):
    """The peer answered with something this node will not store."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class PeerFetcher:
    def __init__(self, *, own_hotkey: str, netuid: int, timeout_s: float, max_page_bytes: int,
                 max_age_s: float, client: httpx.Client | None = None) -> None:
        self.own_hotkey = own_hotkey
        self.netuid = netuid
        self.max_page_bytes = max_page_bytes
        self.max_age_s = max_age_s
        self.client = client or httpx.Client(timeout=timeout_s, follow_redirects=False)
        # Replays of a page inside its freshness window are refused, per fetcher.
        self.nonces = http_auth.InMemoryNonceStore(retention=2 * max_age_s + 5)

    def close(self) -> None:
        self.client.close()

    def page(self, peer: Peer, after: str | None, limit: int) -> MeasurementsPage:
        return self.fetch(peer, after, limit)[0]

    def fetch(self, peer: Peer, after: str | None, limit: int
              ) -> tuple[MeasurementsPage, Signed]:
        """The page and the page as signed (what this node may relay)."""
        if peer.url is None:
            raise PeerUnreachable(f"{peer.hotkey} serves no address")
        asked = target(after, limit)
        try:
            with self.client.stream("GET", peer.url.rstrip("/") + asked) as response:
                if response.status_code >= 500 or response.status_code == 404:
                    # 404: a validator that does not serve measurements (an older PRISM,
                    # agreement.serve off): absent, not misbehaving
                    raise PeerUnreachable(f"{peer.url} answered {response.status_code}")
                if response.status_code != 200:
                    raise PeerRefused("status", f"{peer.url} answered {response.status_code} "
                                      f"to {asked}")
                body = self._read_bounded(response, peer)
                headers = dict(response.headers)
        except httpx.HTTPError as exc:
            raise PeerUnreachable(f"{peer.url}: {type(exc).__name__}: {exc}") from None
        try:
            caller = http_auth.verify(
                headers, body, method="GET", path=asked, self_hotkey_ss58=self.own_hotkey,
                max_age=self.max_age_s, allowed_skew=self.max_age_s, require_receiver=False,
                nonce_store=self.nonces, now_ns=time.time_ns())
        except http_auth.AuthError as exc:
            raise PeerRefused("signature", f"{peer.url}: the page's signature was refused: "
                              f"{type(exc).__name__}: {exc}") from None
        except UnicodeEncodeError:
            raise PeerRefused("signature", f"{peer.url}: unreadable signature headers") from None
        if caller.hotkey_ss58 != peer.hotkey:
            raise PeerRefused("wrong_validator", f"{peer.url}: the page is signed by "
                              f"{caller.hotkey_ss58}, not by {peer.hotkey}")
        try:
            page = MeasurementsPage.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise PeerRefused("malformed", f"{peer.url}: not a measurements page "
                              f"({where}: {first.get('msg')})") from None
        if page.validator != peer.hotkey or page.netuid != self.netuid:
            raise PeerRefused("wrong_validator", f"{peer.url}: a page of {page.validator} on "
                              f"netuid {page.netuid}, not of {peer.hotkey} on {self.netuid}")
        return page, Signed(asked, signed_headers(headers), body)

    def get_json(self, peer: Peer, path: str, *, max_bytes: int) -> object:
        """A bounded unsigned JSON answer of a peer (relayed pages, proofs: each part
        carries its own signature). Raises PeerUnreachable / PeerRefused."""
        if peer.url is None:
            raise PeerUnreachable(f"{peer.hotkey} serves no address")
        try:
            with self.client.stream("GET", peer.url.rstrip("/") + path) as response:
                if response.status_code >= 500 or response.status_code == 404:
                    raise PeerUnreachable(f"{peer.url} answered {response.status_code}")
                if response.status_code != 200:
                    raise PeerRefused("status", f"{peer.url} answered "
                                      f"{response.status_code} to {path}")
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise PeerRefused("oversized", f"{peer.url}{path}: more than "
                                          f"{max_bytes} bytes")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise PeerUnreachable(f"{peer.url}: {type(exc).__name__}: {exc}") from None
        try:
            return json.loads(b"".join(chunks))
        except ValueError:
            raise PeerRefused("malformed", f"{peer.url}{path}: not JSON") from None

    def _read_bounded(self, response: httpx.Response, peer: Peer) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_page_bytes:
            raise PeerRefused("oversized", f"{peer.url}: a page of {declared} bytes (the "
                              f"limit is agreement.max_page_bytes={self.max_page_bytes})")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_page_bytes:
                raise PeerRefused("oversized", f"{peer.url}: a page of more than "
                                  f"{self.max_page_bytes} bytes (agreement.max_page_bytes)")
            chunks.append(chunk)
        return b"".join(chunks)
