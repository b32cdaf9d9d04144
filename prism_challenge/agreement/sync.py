"""One round of the peer loop: fetch every peer's new measurements and store them.

Each page is written in one transaction after it was verified in full, so a refused page
writes nothing. The electorate (stakes, and when each peer last answered with a good page)
is stored beside the measurements, so the weights plan can be computed from the store alone
by the epoch loop and by `GET /v1/weights` alike.

When a peer measured (and passed the replay of) a run is what that peer's clock said, so it
is stored bounded by this validator's clock: never later than when the row arrived. A peer
whose clock runs ahead (or that postdates) cannot hold its measurement back from settling
past `settle_s` after it arrived; an honest row keeps its time, so every validator counts it
at the same moment. A row stored again with the same values keeps the time stored first,
so a page fetched again, or one that re-dates an old measurement, moves nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from prism_challenge.agreement.fetch import PeerFetcher, PeerRefused, PeerUnreachable
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.wire import MeasurementsPage
from prism_challenge.storage import Store
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement

log = logging.getLogger("prism.agreement")

MAX_PAGES_PER_ROUND = 50  # a peer with more catches up over the following rounds


@dataclass
class PeerSync:
    """The loop's memory between rounds: each peer's cursor, so a round fetches only what
    changed since the last one (lost on restart: the first round starts from the beginning,
    and storing a row again changes nothing)."""

    store: Store
    fetcher: PeerFetcher
    status: AgreementStatus
    page_size: int
    cursors: dict[str, str | None] = field(default_factory=dict)

    def round(self, electorate: list[Peer], *, now: float | None = None) -> dict[str, int]:
        """Fetch from every peer (electorate[0] is this node); returns rows stored per peer."""
        own, peers = electorate[0], electorate[1:]
        with self.store.session() as s:
            _mark(s, own, ok_at=time.time() if now is None else now, error=None)
            _retire(s, {p.hotkey for p in electorate})
        stored: dict[str, int] = {}
        for peer in peers:
            stored[peer.hotkey] = self._peer(peer)
        return stored

    def _peer(self, peer: Peer) -> int:
        total = 0
        for _ in range(MAX_PAGES_PER_ROUND):
            after = self.cursors.get(peer.hotkey)
            try:
                page = self.fetcher.page(peer, after, self.page_size)
            except PeerUnreachable as exc:
                self.status.page(peer.hotkey, "unreachable")
                log.info("agreement: peer %s unreachable: %s", peer.hotkey, exc)
                self._note(peer, f"unreachable: {exc}")
                return total
            except PeerRefused as exc:
                self.status.page(peer.hotkey, exc.reason)
                log.warning("agreement: refused a page of peer %s (%s): %s; nothing stored",
                            peer.hotkey, exc.reason, exc)
                self._note(peer, f"refused ({exc.reason}): {exc}")
                return total
            with self.store.session() as s:
                total += store_page(s, page)
                _mark(s, peer, ok_at=time.time(), error=None)
            self.status.page(peer.hotkey, "ok", rows=len(page.rows))
            if page.next is not None:
                self.cursors[peer.hotkey] = page.next
            if not page.more:
                return total
        return total

    def _note(self, peer: Peer, error: str) -> None:
        with self.store.session() as s:
            _mark(s, peer, ok_at=None, error=error[:500])


def store_page(session: Session, page: MeasurementsPage, *, now: float | None = None) -> int:
    """Upsert the page's rows (one per validator and digest: the latest page wins; an old
    page cannot come back, its signature is fresh for `signature_max_age_s` and used once),
    their times bounded by this validator's clock (`now`); returns the rows written."""
    now = time.time() if now is None else now

    def bounded(claimed: float) -> float:
        return min(claimed, now)

    written = 0
    for row in page.rows:
        old = session.scalar(select(PeerMeasurement).where(
            PeerMeasurement.validator == page.validator, PeerMeasurement.digest == row.digest))
        if old is None:
            old = PeerMeasurement(validator=page.validator, digest=row.digest)
            session.add(old)
        same = old.measured_at is not None and (
            old.miner_hotkey, old.bpb, old.heldout_delta, old.eligible, old.corpus,
            old.scoring_version) == (row.miner_hotkey, row.bpb, row.heldout_delta,
                                     row.eligible, row.corpus, row.scoring_version)
        old.measured_at = old.measured_at if same else bounded(row.measured_at)
        old.verified_at = None if not row.verified else (
            old.verified_at if same and old.verified_at is not None
            else bounded(row.verified_at if row.verified_at is not None else now))
        old.miner_hotkey = row.miner_hotkey
        old.block = row.block
        old.bpb = row.bpb
        old.heldout_delta = row.heldout_delta
        old.eligible = row.eligible
        old.corpus = row.corpus
        old.scoring_version = row.scoring_version
        old.fetched_at = now
        written += 1
    session.flush()
    return written


def _retire(session: Session, permitted: set[str]) -> None:
    """A validator that left the electorate (lost its permit, deregistered) no longer counts
    in the permitted stake the quorum is measured against: its stake is set to 0."""
    for row in session.scalars(select(AgreementPeer).where(
            AgreementPeer.validator.not_in(sorted(permitted)), AgreementPeer.stake != 0)):
        row.stake = 0.0
        row.updated_at = time.time()


def _mark(session: Session, peer: Peer, *, ok_at: float | None, error: str | None) -> None:
    row = session.get(AgreementPeer, peer.hotkey)
    if row is None:
        row = AgreementPeer(validator=peer.hotkey)
        session.add(row)
    row.url = peer.url
    row.stake = peer.stake
    if ok_at is not None:
        row.last_ok_at = ok_at
    row.last_error = error
    row.updated_at = time.time()
