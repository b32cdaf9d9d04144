"""Fetching one page of a peer's measurements, and refusing anything that is not its own.

A page is accepted only when, in order: the peer answered 200, body included, within
`timeout_s` of the request's start; the body is at most `max_page_bytes` (read
incrementally, never more than that plus one chunk);
the `btauth/1` response signature verifies for *this* request target and body, is fresh,
and was made by the peer's hotkey as the metagraph names it; the JSON is a well-formed,
bounded `MeasurementsPage` of that validator on this netuid, with no more rows than were
asked for. Anything else raises
`PeerRefused` with the reason (a metrics label) and a sentence for the log.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import httpx
from bittensor import http_auth
from pydantic import ValidationError

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import Signed, nonce_of, signed_headers
from prism_challenge.agreement.wire import MeasurementsPage, target


class PeerUnreachable(Exception):
    """The peer did not answer (connection, timeout, 5xx): not its fault, not counted
    against it."""


T = TypeVar("T")
P = TypeVar("P")


class PeerTooSlow(PeerUnreachable):
    """The peer's answer was not complete by its deadline (the request's `timeout_s`, or
    what is left of the peer's share of the round): it is not asked again that round."""


class NotNeeded(Exception):
    """The answer was no longer needed before it was complete (another peer gave the
    same bytes): the request was given up, not the peer's fault, nothing charged to it but
    the time it took."""


class PeerRefused(Exception):
    """The peer answered with something this node will not store."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


# A peer's share of one round of the peer loop, in requests' timeouts: all its requests in
# that round (its pages, the pages it relays, its proofs, the bundles asked of it) end by
# then, so a peer that answers slowly holds the round that long at most.
PEER_ROUND_TIMEOUTS = 3
# Peers asked at once in a round (each by a thread of its own, one request at a time);
# past this many, the others are asked as threads come free.
PEER_CONCURRENCY = 64


class RoundBudget:
    """Each peer's share of one round: `seconds` of wall time for everything asked of it.

    The peer loop asks its peers at once, for their pages and then for bundles, and stores
    nothing before every one is done; so without a bound one peer that answers a byte at a
    time (each within the read timeout) would hold the whole round, and with it every
    other peer's rows and the quorum. A phase of the round takes a `turn` of a peer, whose
    value is the deadline its requests must finish by; the time the turn took is charged to
    that peer. A peer whose request ran out of time has `spent` its share; `share` runs a
    phase in a turn, or not at all once the share is spent. Each peer's turns run in one
    thread at a time (its thread of each phase, one phase after the other), so threads
    asking different peers at once touch different entries only."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.left: dict[str, float] = {}

    def spent(self, hotkey: str) -> bool:
        return self.left.get(hotkey, self.seconds) <= 0

    def exhaust(self, hotkey: str) -> None:
        self.left[hotkey] = 0.0

    @contextmanager
    def turn(self, hotkey: str) -> Iterator[float]:
        start = self.clock()
        try:
            yield start + self.left.get(hotkey, self.seconds)
        finally:
            self.left[hotkey] = self.left.get(hotkey, self.seconds) - (self.clock() - start)

    def share(self, hotkey: str, work: Callable[[float], T], spent: T) -> T:
        """`work(deadline)` in a turn of the peer; `spent` without running it when the
        peer's share of the round is used up."""
        if self.spent(hotkey):
            return spent
        with self.turn(hotkey) as deadline:
            return work(deadline)


def ask_at_once(peers: Sequence[P], ask: Callable[[P], T]) -> list[T]:
    """`ask(peer)` for every peer at once, each in a thread of its own (`PEER_CONCURRENCY`
    at a time, the others as threads come free); the answers in the order of `peers`, once
    every one is done. `ask` only fetches (what it reads it may check, but it writes
    nothing): the caller stores the answers afterwards in that order, so the store ends the
    same whichever peer answered first, and slow peers cost the round about one of their
    shares (`RoundBudget`) together, not one each."""
    with ThreadPoolExecutor(max_workers=max(1, min(PEER_CONCURRENCY, len(peers))),
                            thread_name_prefix="prism-peer") as pool:
        return list(pool.map(ask, peers))


def within(deadline: float, work: Callable[[], T], where: str, *,
           changed: threading.Condition | None = None,
           needed: Callable[[], bool] | None = None) -> T:
    """`work()` (one request to a peer), waited for until `deadline` (`time.monotonic()`)
    and no longer: raises PeerTooSlow then. It runs in a thread of its own, so a read that
    blocks past the deadline does not hold the caller; that thread ends by itself soon
    after (`read_within` stops at the first chunk past the deadline, and no wait for the
    peer was given more than the time left when the request began).

    `needed` (read under `changed`, which whoever makes it false notifies): the wait also
    ends, raising NotNeeded, once the answer is no longer needed (another peer gave it);
    `work` should then stop reading too (`read_within`'s `needed`)."""
    if deadline <= time.monotonic():
        raise PeerTooSlow(f"{where}: no time left this round")
    changed = changed or threading.Condition()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller, or dropped once it gave up
            box["error"] = exc
        finally:
            with changed:
                box["done"] = True
                changed.notify_all()

    def over() -> bool:
        return "done" in box or (needed is not None and not needed())

    threading.Thread(target=run, name="prism-peer-request", daemon=True).start()
    with changed:
        changed.wait_for(over, timeout=max(0.0, deadline - time.monotonic()))
        if "done" not in box:
            if needed is not None and not needed():
                raise NotNeeded(f"{where}: no longer needed")
            raise PeerTooSlow(f"{where}: no complete answer by its deadline")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def read_within(response: httpx.Response, *, deadline: float, max_bytes: int,
                oversized: Callable[[], Exception], where: str,
                needed: Callable[[], bool] | None = None) -> bytes:
    """The body, read chunk by chunk: PeerTooSlow once `deadline` has passed, however
    steadily the bytes come, `oversized()` past `max_bytes`, and NotNeeded once `needed()`
    is false (the request is then closed, so a peer dripping it stops being read)."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise PeerTooSlow(f"{where}: no complete answer by its deadline ({size} "
                              "bytes had arrived)")
        if needed is not None and not needed():
            raise NotNeeded(f"{where}: no longer needed ({size} bytes had arrived)")
        size += len(chunk)
        if size > max_bytes:
            raise oversized()
        chunks.append(chunk)
    return b"".join(chunks)


def time_left(deadline: float, where: str) -> float:
    """Seconds to `deadline`, the read timeout of a request that must end by then."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise PeerTooSlow(f"{where}: no time left this round")
    return left


class PeerFetcher:
    """Pages and other answers of peers: each request ends `timeout_s` after it began at
    the latest (connection, headers and body together), or earlier at the `deadline` the
    caller gives (the end of the peer's share of the round)."""

    def __init__(self, *, own_hotkey: str, netuid: int, timeout_s: float, max_page_bytes: int,
                 max_age_s: float, client: httpx.Client | None = None) -> None:
        self.own_hotkey = own_hotkey
        self.netuid = netuid
        self.max_page_bytes = max_page_bytes
        self.max_age_s = max_age_s
        self.timeout_s = timeout_s
        self.client = client or httpx.Client(timeout=timeout_s, follow_redirects=False)
        # Replays of a page inside its freshness window are refused, per fetcher.
        self.nonces = http_auth.InMemoryNonceStore(retention=2 * max_age_s + 5)

    def close(self) -> None:
        self.client.close()

    def page(self, peer: Peer, after: str | None, limit: int) -> MeasurementsPage:
        return self.fetch(peer, after, limit)[0]

    def _deadline(self, deadline: float | None) -> float:
        end = time.monotonic() + self.timeout_s
        return end if deadline is None else min(end, deadline)

    def _get(self, peer: Peer, path: str, deadline: float | None,
             read: Callable[[httpx.Response, float], bytes]) -> tuple[bytes, dict]:
        """GET `path` of the peer, whole by the deadline: (body, headers)."""
        if peer.url is None:
            raise PeerUnreachable(f"{peer.hotkey} serves no address")
        end = self._deadline(deadline)
        where = f"{peer.url}{path}"

        def request() -> tuple[bytes, dict]:
            try:
                with self.client.stream("GET", peer.url.rstrip("/") + path,
                                        timeout=time_left(end, where)) as response:
                    if response.status_code >= 500 or response.status_code == 404:
                        # 404: a validator that does not serve this (an older PRISM,
                        # agreement.serve off): absent, not misbehaving
                        raise PeerUnreachable(f"{peer.url} answered {response.status_code}")
                    if response.status_code != 200:
                        raise PeerRefused("status", f"{peer.url} answered "
                                          f"{response.status_code} to {path}")
                    return read(response, end), dict(response.headers)
            except httpx.HTTPError as exc:
                raise PeerUnreachable(f"{peer.url}: {type(exc).__name__}: {exc}") from None

        return within(end, request, where)

    def fetch(self, peer: Peer, after: str | None, limit: int, *,
              deadline: float | None = None) -> tuple[MeasurementsPage, Signed]:
        """The page and the page as signed (what this node may relay); `deadline`
        (`time.monotonic()`) cuts the request short of `timeout_s`."""
        asked = target(after, limit)
        body, headers = self._get(peer, asked, deadline,
                                  lambda response, end: self._read_bounded(response, peer, end))
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
        if nonce_of(signed_headers(headers)) is None:
            raise PeerRefused("signature", f"{peer.url}: the page's nonce header is not a "
                              "plain decimal integer")
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
        if len(page.rows) > limit:
            raise PeerRefused("too_many_rows", f"{peer.url}: a page of {len(page.rows)} rows, "
                              f"{limit} asked")
        return page, Signed(asked, signed_headers(headers), body)

    def get_json(self, peer: Peer, path: str, *, max_bytes: int,
                 deadline: float | None = None) -> object:
        """A bounded unsigned JSON answer of a peer (relayed pages, proofs: each part
        carries its own signature). Raises PeerUnreachable / PeerRefused."""
        def oversized() -> PeerRefused:
            return PeerRefused("oversized", f"{peer.url}{path}: more than {max_bytes} bytes")

        body, _ = self._get(peer, path, deadline, lambda response, end: read_within(
            response, deadline=end, max_bytes=max_bytes, oversized=oversized,
            where=f"{peer.url}{path}"))
        try:
            return json.loads(body)
        except ValueError:
            raise PeerRefused("malformed", f"{peer.url}{path}: not JSON") from None

    def _read_bounded(self, response: httpx.Response, peer: Peer, deadline: float) -> bytes:
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_page_bytes:
            raise PeerRefused("oversized", f"{peer.url}: a page of {declared} bytes (the "
                              f"limit is agreement.max_page_bytes={self.max_page_bytes})")

        def oversized() -> PeerRefused:
            return PeerRefused("oversized", f"{peer.url}: a page of more than "
                               f"{self.max_page_bytes} bytes (agreement.max_page_bytes)")

        return read_within(response, deadline=deadline, max_bytes=self.max_page_bytes,
                           oversized=oversized, where=str(peer.url))
