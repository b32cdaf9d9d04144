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
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from prism_challenge.agreement.equivocation import (
    check_proof,
    conflicting,
    conflicting_pages,
    record,
    same_run,
)
from prism_challenge.agreement.fetch import (
    PEER_ROUND_TIMEOUTS,
    PeerFetcher,
    PeerRefused,
    PeerTooSlow,
    PeerUnreachable,
    RoundBudget,
    ask_at_once,
)
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import PageInvalid, Signed, check
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.wire import (
    EQUIVOCATIONS_PATH,
    EQUIVOCATIONS_QUERY,
    RELAY_LIMIT,
    RELAY_PATH,
    MeasurementRow,
    MeasurementsPage,
)
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage import Store
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement, SignedPage

log = logging.getLogger("prism.agreement")

MAX_PAGES_PER_ROUND = 50  # a peer with more catches up over the following rounds
# New rows (runs not stored yet for that validator) taken of one validator in one round,
# own pages and relayed ones together, in pages of `page_size`: what is past it waits for
# the next round, so a validator signing rows of runs that do not exist adds at most about
# this many a round, and an honest one catching up takes a few rounds more.
NEW_ROW_PAGES_PER_ROUND = 5
MAX_PROOFS = 100  # proofs taken from one peer per round
# What one peer's answers (its pages and the pages it relays) may hold in a round, in
# `max_page_bytes`: they wait in memory until every peer is done, so a peer serving full
# pages fast is not asked for more once it sent this much; the rest comes next round.
HELD_PAGES_PER_PEER = 16
# Rows of one validator's measurements (of this scoring version) stored here in all, its
# own pages and relayed ones together: the per-round cap above bounds how fast a validator
# signing rows of runs that do not exist fills this store, this bounds how much. Rows are
# one per run (digest) a validator measured, and a validator measures the runs of the
# whole subnet: 100,000 is about a year of 270 new runs a day (the intake's own bound is
# 5 uploads an hour per hotkey, about 30,000 a day over 256 uids, for a few days). Of a
# page that would take its validator past it, the new rows that fit are stored and the rest
# are not; its rows already stored are still updated and its cursor moves past it, so a
# validator at the bound only stops adding runs here (logged once a round, `row_bound`).
MAX_ROWS_PER_PEER = 100_000
# Bytes of one validator's signed pages kept here (to be relayed, and to prove an
# equivocation against), per row it may have stored (`max_rows_per_peer`): a page is kept
# while one stored row comes from it, so without a bound on bytes a validator could pin a
# whole page (up to `max_page_bytes`) with every row. An honest row is well under 1 kB (its
# stream parts at most `scoring.dethrone_windows`); a page that would take its validator
# past the bound is refused (`page_bytes`), and only checked for equivocation.
SIGNED_BYTES_PER_ROW = 4096


@dataclass
class _Answers:
    """What one peer answered in a round, fetched in a thread of the round's pool and
    stored by the round's own thread afterwards."""

    pages: list[tuple[MeasurementsPage, Signed]] = field(default_factory=list)
    # how its paging ended before its last page: its share of the round was used, a
    # request failed or was refused, or it serves another scoring version (which)
    share_used: bool = False
    held_bytes: int = 0  # the bodies of its pages and relayed pages held for storing
    failure: PeerUnreachable | PeerRefused | None = None
    other_version: str | None = None
    relayed: list[tuple[list[Signed], int]] = field(default_factory=list)  # (pages, next)
    relay_refused: str | None = None  # the status label of a refused relay answer
    proofs: object = None  # its proofs answer (JSON as it came), None without one


@dataclass
class PeerSync:
    """The loop's memory between rounds: each peer's cursors (its own pages, the pages it
    relays), so a round fetches only what changed since the last one (lost on restart: the
    first round starts from the beginning, and storing a page again changes nothing)."""

    store: Store
    fetcher: PeerFetcher
    status: AgreementStatus
    page_size: int
    netuid: int = 0
    relay: bool = False
    ban_s: float = 7 * 86400.0
    skew_s: float = 60.0
    max_page_bytes: int = 1_000_000
    bundles: object | None = None  # a BundleFetcher (agreement/bundles.py), or None
    cursors: dict[str, str | None] = field(default_factory=dict)
    relay_cursors: dict[str, int] = field(default_factory=dict)
    new_rows: Counter[str] = field(default_factory=Counter)  # per validator, this round
    max_rows_per_peer: int = MAX_ROWS_PER_PEER
    # new rows of each validator not stored this round, its rows being at the bound
    past_bound: Counter[str] = field(default_factory=Counter)
    # the most stream parts a row may carry: this validator's `scoring.dethrone_windows`
    # (every validator of one scoring version cuts the stream into that many stretches)
    max_stream_parts: int = 32
    # sha256 of the relayed pages checked this round: a copy relayed again (by the same
    # peer or another) changes nothing and is passed over, so a peer relaying one old page
    # many times costs one check of it a round
    relayed_seen: set[str] = field(default_factory=set)

    def round(self, electorate: list[Peer], *, now: float | None = None) -> dict[str, int]:
        """Fetch from every peer (electorate[0] is this node); returns rows stored per peer
        (their own pages; relayed ones are counted in the status).

        The peers are asked at once, each in a thread of its own (`fetch.ask_at_once`, 64 at
        a time), and each has `PEER_ROUND_TIMEOUTS` x the fetcher's timeout of the round for
        all that is asked of it (`RoundBudget`): what it has not answered by then waits for
        the next round. So however many peers answer slowly, the round lasts about that
        share, and a few slow ones cannot leave the honest peers' rows stale. Nothing is
        stored by those threads: once every peer is done, this thread stores the answers
        in the electorate's order (own pages, then relayed pages, then proofs), so the
        store ends the same whatever order the answers arrived in. The bundles of runs
        known only from peers are asked for after that in the same way, in what is left of
        each peer's share (`BundleFetcher.round`)."""
        own, peers = electorate[0], electorate[1:]
        with self.store.session() as s:
            _mark(s, own, ok_at=time.time() if now is None else now, error=None)
            _retire(s, {p.hotkey for p in electorate})
        budget = RoundBudget(PEER_ROUND_TIMEOUTS * self.fetcher.timeout_s)
        self.new_rows.clear()
        self.past_bound.clear()
        self.relayed_seen.clear()
        answers = ask_at_once(peers, lambda peer: self._ask(peer, budget))
        stored = {peer.hotkey: self._store_pages(peer, got)
                  for peer, got in zip(peers, answers, strict=True)}
        if self.relay:
            permitted = {p.hotkey for p in electorate if p.stake > 0} - {own.hotkey}
            for peer, got in zip(peers, answers, strict=True):
                self._store_relayed(peer, got, permitted)
            for peer, got in zip(peers, answers, strict=True):
                self._store_proofs(peer, got, permitted)
        self._log_past_bound(peers, answers)
        if self.bundles is not None:
            self.bundles.round(peers, budget=budget)
        return stored

    def _ask(self, peer: Peer, budget: RoundBudget) -> _Answers:
        """Everything asked of `peer` this round, in its share of the round (a thread of the
        round's pool: it reads the store, and writes nothing)."""
        got = _Answers()
        budget.share(peer.hotkey, lambda end: self._fetch_pages(peer, got, budget, end), None)
        if self.relay:
            budget.share(peer.hotkey, lambda end: self._fetch_relayed(peer, got, budget, end),
                         None)
            budget.share(peer.hotkey, lambda end: self._fetch_proofs(peer, got, budget, end),
                         None)
        return got

    def _fetch_pages(self, peer: Peer, got: _Answers, budget: RoundBudget,
                     deadline: float) -> None:
        """The peer's pages after its cursor, until it has no more, one is refused, or the
        page that would pass its new rows of the round (`_takes` decides again when they
        are stored: this only stops fetching past it). New rows past its rows in all
        (`max_rows_per_peer`) do not count: they will not be stored, and the pages after
        them are read on (they may update rows stored), up to a page with nothing to store
        (all its rows new, none fitting): its cursor moves past that page, the next ones
        are read next round, so a validator at the bound costs a page a round when it
        sends only new runs."""
        after, new, seen = self.cursors.get(peer.hotkey), 0, set()
        with self.store.session() as s:
            stored = _stored(s, peer.hotkey)
        for _ in range(MAX_PAGES_PER_ROUND):
            if time.monotonic() >= deadline or self._holds_enough(got):
                got.share_used = True
                return
            try:
                page, signed = self.fetcher.fetch(peer, after, self.page_size,
                                                  deadline=deadline)
            except PeerUnreachable as exc:
                if isinstance(exc, PeerTooSlow):
                    budget.exhaust(peer.hotkey)
                got.failure = exc
                return
            except PeerRefused as exc:
                got.failure = exc
                return
            if page.scoring_version != SCORING_VERSION:
                got.other_version = page.scoring_version or "unknown"
                return
            flaw = page_flaw(page, max_stream_parts=self.max_stream_parts)
            if flaw is not None:
                got.failure = PeerRefused(flaw[0], f"{peer.url}: {flaw[1]}")
                return
            got.pages.append((page, signed))
            got.held_bytes += len(signed.body)
            digests = {row.digest for row in page.rows} - seen
            with self.store.session() as s:
                fresh = len(digests - _held(s, page.validator, digests))
            seen |= digests
            fits = min(fresh, max(0, self.max_rows_per_peer - stored - new))
            if fits and new and new + fits > self._max_new_rows:
                return
            if fresh and not fits and fresh == len(digests):
                return  # nothing of it is stored: its next pages are read next round
            new += fits
            if page.next is not None:
                after = page.next
            if not page.more:
                return

    def _store_pages(self, peer: Peer, got: _Answers) -> int:
        """Store the peer's pages in the order it served them, move its cursor past each
        one stored, and note how its paging ended; returns the rows written. Its new rows
        past its bound on rows stored here are not stored (`_room`; counted for the
        round's log), the rest of the page is. A page past the peer's new rows of this
        round is not stored (its cursor stays there, the page comes again next round), nor
        are those after it; each is still checked for equivocation (`page_proofs`)."""
        total, taken = 0, True
        for n, (page, signed) in enumerate(got.pages):
            proofs: list[tuple[str, str]] = []
            with self.store.session() as s:
                fits, skip = self._room(s, page)
                kept = self._keeps(s, page.validator, signed)
                taken = kept and self._takes(page.validator, fits)
                if taken:
                    total += store_page(s, page, signed=signed, ban_s=self.ban_s,
                                        proofs=proofs, skip=skip)
                else:
                    for later, later_signed in got.pages[n:]:
                        page_proofs(s, later, later_signed, ban_s=self.ban_s, proofs=proofs)
                _mark(s, peer, ok_at=time.time(), error=None)
            self._proven(proofs, "served")
            if not kept:
                self._refuse_bytes(peer, page.validator, signed, note=True)
                break
            if not taken:
                log.info("agreement: peer %s has more new rows than one round takes (%d); "
                         "the rest is fetched next round", peer.hotkey, self._max_new_rows)
                break
            self.past_bound[page.validator] += len(skip)
            self.status.page(peer.hotkey, "row_bound" if skip else "ok", rows=len(page.rows))
            if page.next is not None:
                self.cursors[peer.hotkey] = page.next
        if taken:
            self._ended(peer, got)
        return total

    def _ended(self, peer: Peer, got: _Answers) -> None:
        """Note how the peer's paging ended once its pages were stored."""
        exc = got.failure
        if got.share_used:
            log.info("agreement: peer %s used its share of this round (its time, or the "
                     "bytes one round holds); its next pages are fetched next round",
                     peer.hotkey)
        elif isinstance(exc, PeerUnreachable):
            self.status.page(peer.hotkey, "unreachable")
            log.info("agreement: peer %s unreachable: %s", peer.hotkey, exc)
            self._note(peer, f"unreachable: {exc}")
        elif isinstance(exc, PeerRefused):
            self.status.page(peer.hotkey, exc.reason)
            log.warning("agreement: refused a page of peer %s (%s): %s; nothing stored",
                        peer.hotkey, exc.reason, exc)
            self._note(peer, f"refused ({exc.reason}): {exc}")
        elif got.other_version is not None:
            # Another version's measurements never rank here: the peer is not reached, and
            # it is read again from the start once it runs this version (its rows are then
            # served re-keyed, with change times its old cursor is past).
            self.cursors.pop(peer.hotkey, None)
            self.status.page(peer.hotkey, "other_version")
            self._note(peer, f"serves scoring version {got.other_version}, this validator "
                       f"{SCORING_VERSION}: not counted until both run the same")

    def _fetch_relayed(self, peer: Peer, got: _Answers, budget: RoundBudget,
                       deadline: float) -> None:
        """The signed pages `peer` holds of other validators, as it serves them (each is
        checked against its author's signature when it is stored)."""
        after = self.relay_cursors.get(peer.hotkey, 0)
        for _ in range(MAX_PAGES_PER_ROUND):
            if time.monotonic() >= deadline or self._holds_enough(got):
                return  # the peer's share of this round is used: the rest next round
            try:
                data = self.fetcher.get_json(
                    peer, f"{RELAY_PATH}?after={after}&limit={RELAY_LIMIT}",
                    max_bytes=2 * self.max_page_bytes + 65536, deadline=deadline)
                pages, nxt = _relay_answer(data, self.max_page_bytes)
            except PeerTooSlow:
                budget.exhaust(peer.hotkey)
                return
            except PeerUnreachable:
                return
            except (PeerRefused, PageInvalid) as exc:
                got.relay_refused = f"relay_{exc.reason}"
                return
            got.relayed.append((pages, nxt))
            got.held_bytes += sum(len(signed.body) for signed in pages)
            if nxt <= after or not pages:
                return
            after = nxt

    def _store_relayed(self, peer: Peer, got: _Answers, permitted: set[str]) -> None:
        for pages, nxt in got.relayed:
            for signed in pages:
                if signed.sha256 not in self.relayed_seen:
                    self.relayed_seen.add(signed.sha256)
                    self._one_relayed(peer, signed, permitted)
            if pages and nxt > self.relay_cursors.get(peer.hotkey, 0):
                self.relay_cursors[peer.hotkey] = nxt
        if got.relay_refused is not None:
            self.status.page(peer.hotkey, got.relay_refused)

    def _one_relayed(self, peer: Peer, signed: Signed, permitted: set[str]) -> None:
        try:
            page = check(signed, netuid=self.netuid, own_hotkey=self.fetcher.own_hotkey,
                         now_ns=time.time_ns(), skew_s=self.skew_s)
        except PageInvalid as exc:
            self.status.page(peer.hotkey, f"relay_{exc.reason}")
            return
        if page.validator not in permitted or page.scoring_version != SCORING_VERSION:
            return  # this node itself, a validator it does not count, or another version
        flaw = page_flaw(page, max_stream_parts=self.max_stream_parts)
        if flaw is not None:
            self.status.page(peer.hotkey, f"relay_{flaw[0]}")
            log.warning("agreement: refused a page of %s relayed by %s (%s): %s; nothing "
                        "stored", page.validator, peer.hotkey, flaw[0], flaw[1])
            return
        proofs: list[tuple[str, str]] = []
        with self.store.session() as s:
            fits, skip = self._room(s, page)
            kept = self._keeps(s, page.validator, signed)
            taken = kept and self._takes(page.validator, fits)
            if taken:
                rows = store_page(s, page, signed=signed, ban_s=self.ban_s, proofs=proofs,
                                  skip=skip)
                _heard(s, page.validator, signed)
            else:  # past its new rows this round; its own pages bring them later
                page_proofs(s, page, signed, ban_s=self.ban_s, proofs=proofs)
        self._proven(proofs, f"relayed by {peer.hotkey}")
        if not kept:
            self._refuse_bytes(peer, page.validator, signed, note=False)
        if taken:
            self.past_bound[page.validator] += len(skip)
            self.status.page(page.validator, "row_bound" if skip else "relayed", rows=rows)

    def _fetch_proofs(self, peer: Peer, got: _Answers, budget: RoundBudget,
                      deadline: float) -> None:
        """The peer's proofs of equivocation, as it serves them, one-page proofs included
        (asked for: this node checks them; `EQUIVOCATIONS_QUERY`)."""
        try:
            got.proofs = self.fetcher.get_json(peer,
                                               f"{EQUIVOCATIONS_PATH}?{EQUIVOCATIONS_QUERY}",
                                               max_bytes=4 * self.max_page_bytes + 65536,
                                               deadline=deadline)
        except PeerTooSlow:
            budget.exhaust(peer.hotkey)
        except (PeerUnreachable, PeerRefused):
            pass

    def _store_proofs(self, peer: Peer, got: _Answers, permitted: set[str]) -> None:
        """The peer's proofs of equivocation, each checked again before it is stored."""
        data = got.proofs
        if data is None:
            return
        if not isinstance(data, dict) or not isinstance(data.get("proofs"), list):
            self.status.page(peer.hotkey, "proof_malformed")
            return
        for item in data["proofs"][:MAX_PROOFS]:
            try:
                validator, digest, a, b = check_proof(
                    item, netuid=self.netuid, own_hotkey=self.fetcher.own_hotkey,
                    now_ns=time.time_ns(), skew_s=self.skew_s,
                    max_bytes=self.max_page_bytes)
            except PageInvalid as exc:
                self.status.page(peer.hotkey, f"proof_{exc.reason}")
                continue
            if validator not in permitted:
                continue
            with self.store.session() as s:
                new = record(s, validator, digest, a, b, ban_s=self.ban_s, now=time.time())
            if new:
                self._proven([(validator, digest)], f"proof served by {peer.hotkey}")

    def _holds_enough(self, got: _Answers) -> bool:
        return got.held_bytes >= HELD_PAGES_PER_PEER * self.max_page_bytes

    @property
    def _max_new_rows(self) -> int:
        return NEW_ROW_PAGES_PER_ROUND * self.page_size

    def _takes(self, validator: str, new: int) -> bool:
        """Whether `new` rows of a page fit in what its validator may add this round (the
        first page with new rows always does); counted when they do."""
        before = self.new_rows[validator]
        if new and before and before + new > self._max_new_rows:
            return False
        self.new_rows[validator] = before + new
        return True

    def _room(self, session: Session, page: MeasurementsPage) -> tuple[int, set[str]]:
        """(new rows of the page that fit, digests of those that do not): its rows of runs
        not stored for its validator under this scoring version, in the page's order,
        fit while they keep that validator within `max_rows_per_peer` rows stored here;
        the rest are not stored (rows it already holds are updated whatever its count)."""
        digests = [row.digest for row in page.rows if row.scoring_version == SCORING_VERSION]
        held = _held(session, page.validator, set(digests), SCORING_VERSION)
        new = [d for d in dict.fromkeys(digests) if d not in held]
        if not new:
            return 0, set()
        room = max(0, self.max_rows_per_peer - _stored(session, page.validator))
        return min(room, len(new)), set(new[room:])

    @property
    def max_signed_bytes(self) -> int:
        """The bytes of one validator's signed pages kept here (`SIGNED_BYTES_PER_ROW` per
        row it may have stored)."""
        return self.max_rows_per_peer * SIGNED_BYTES_PER_ROW

    def _keeps(self, session: Session, validator: str, signed: Signed) -> bool:
        """Whether `signed` may be kept: it is kept already, or it fits in what its
        validator's signed pages may take here (`max_signed_bytes`)."""
        if session.scalar(select(SignedPage.id).where(
                SignedPage.validator == validator,
                SignedPage.sha256 == signed.sha256)) is not None:
            return True
        size = session.scalar(select(func.sum(func.length(SignedPage.body))).where(
            SignedPage.validator == validator)) or 0
        return size + len(signed.body) <= self.max_signed_bytes

    def _refuse_bytes(self, peer: Peer, validator: str, signed: Signed, *, note: bool) -> None:
        """A page of `validator` not stored: its signed pages kept here would pass their
        bound (it was checked for equivocation); counted against the peer that sent it."""
        reason = (f"a page of {validator} of {len(signed.body)} bytes would take its signed "
                  f"pages kept here past {self.max_signed_bytes} bytes ({SIGNED_BYTES_PER_ROW} "
                  "per row of agreement.max_rows_per_peer); nothing stored")
        self.status.page(peer.hotkey, "page_bytes" if note else "relay_page_bytes")
        log.warning("agreement: refused a page sent by %s (page_bytes): %s", peer.hotkey,
                    reason)
        if note:
            self._note(peer, f"refused (page_bytes): {reason}")

    def _bound_reason(self, validator: str) -> str:
        n = self.past_bound[validator]
        rows = "1 new row of it was" if n == 1 else f"{n} new rows of it were"
        return (f"{rows} not stored this round: "
                f"its rows stored here reached {self.max_rows_per_peer}, the most one "
                "validator may have (the setting agreement.max_rows_per_peer); its rows "
                "stored are still updated and its pages read on")

    def _log_past_bound(self, peers: list[Peer], answers: list[_Answers]) -> None:
        """One line a round for each validator with new rows past the bound, also noted as
        the `last_error` of a peer whose paging ended well."""
        for validator in sorted(self.past_bound):
            if self.past_bound[validator]:
                log.warning("agreement: validator %s is at its row bound here (row_bound): %s",
                            validator, self._bound_reason(validator))
        for peer, got in zip(peers, answers, strict=True):
            if self.past_bound[peer.hotkey] and got.failure is None and (
                    got.other_version is None):
                self._note(peer, f"row_bound: {self._bound_reason(peer.hotkey)}")

    def _proven(self, proofs: list[tuple[str, str]], how: str) -> None:
        for validator, digest in proofs:
            self.status.equivocation(validator)
            log.warning("agreement: validator %s equivocated on run %s (%s): its "
                        "measurements are excluded for %g s", validator, digest[:16], how,
                        self.ban_s)

    def _note(self, peer: Peer, error: str) -> None:
        with self.store.session() as s:
            _mark(s, peer, ok_at=None, error=error[:500])


def _held(session: Session, validator: str, digests: set[str],
          version: str | None = None) -> set[str]:
    """Which of `digests` are stored for `validator` (of scoring `version` only, when
    given)."""
    query = select(PeerMeasurement.digest).where(
        PeerMeasurement.validator == validator, PeerMeasurement.digest.in_(sorted(digests)))
    if version is not None:
        query = query.where(PeerMeasurement.scoring_version == version)
    return set(session.scalars(query))


def _stored(session: Session, validator: str) -> int:
    """Rows of `validator` of this scoring version stored here."""
    return session.scalar(select(func.count()).select_from(PeerMeasurement).where(
        PeerMeasurement.validator == validator,
        PeerMeasurement.scoring_version == SCORING_VERSION)) or 0


def page_flaw(page: MeasurementsPage, *, max_stream_parts: int) -> tuple[str, str] | None:
    """(reason, sentence) when a page of this scoring version holds rows this validator
    would never store, else None: a row of another scoring version than the page's
    (`row_version`), a row with more stream parts than this validator cuts the stream into
    (`stream_parts`), or a second row of a digest that agrees with the first
    (`repeated_row`: an honest page holds one row a run). Such rows would only make the
    page bigger, and a page is kept while one row comes from it. A second row that
    conflicts with the first is no flaw: the page is then a proof of equivocation, stored
    as such (`store_page`)."""
    first: dict[str, MeasurementRow] = {}
    for row in page.rows:
        if row.scoring_version != page.scoring_version:
            return "row_version", (f"a row of scoring version {row.scoring_version} in a "
                                   f"page of {page.scoring_version}")
        if row.stream_parts is not None and len(row.stream_parts) > max_stream_parts:
            return "stream_parts", (f"a row of {len(row.stream_parts)} stream parts, more "
                                    f"than the {max_stream_parts} of scoring.dethrone_windows")
        was = first.setdefault(row.digest, row)
        if was is not row and not (conflicting(was, row) or conflicting(row, was)):
            return "repeated_row", (f"a second row of run {row.digest[:16]} that agrees "
                                    "with the first")
    return None


def _relay_answer(data: object, max_bytes: int) -> tuple[list[Signed], int]:
    if not (isinstance(data, dict) and isinstance(data.get("pages"), list)
            and isinstance(data.get("next"), int) and len(data["pages"]) <= RELAY_LIMIT):
        raise PageInvalid("malformed", "a relay answer is {pages: [...], next: <id>}")
    return [Signed.from_json(p, max_bytes=max_bytes) for p in data["pages"]], data["next"]


def store_page(session: Session, page: MeasurementsPage, *, now: float | None = None,
               signed: Signed | None = None, ban_s: float = 7 * 86400.0,
               proofs: list[tuple[str, str]] | None = None,
               skip: set[str] | frozenset[str] = frozenset()) -> int:
    """Upsert the page's rows (one per validator and digest: the latest page wins; an old
    page cannot come back: fetched, its signature is fresh for `signature_max_age_s` and
    used once; relayed, a page signed before the stored one changes nothing), their times
    bounded by this validator's clock (`now`); returns the rows written.

    With `signed` (the page as its author signed it) the page is kept to be relayed, and a
    row that conflicts with the signed row stored for that validator and digest is not
    written, whatever miner or corpus either names: the two pages are a proof of
    equivocation, stored (and appended to `proofs`). Every row stored thus agrees with all
    this validator stored of that run before it: the row cannot step back by passing
    through another miner, corpus or scoring version in between. So a page's second row
    for a digest is skipped (the first is the one a proof against a later page reads);
    when it conflicts with the first (an honest page holds one row per digest), the page
    alone is a proof of equivocation, stored as that page twice (`check_proof` then reads
    its first and second rows of the digest). A row of another scoring version than this
    validator's is skipped too (an honest page serves its own version only, and only pages
    of this version are stored), and so are the rows of the digests in `skip` (new runs
    past the validator's bound on rows stored here), once checked like the others."""
    now = time.time() if now is None else now

    def bounded(claimed: float) -> float:
        return min(claimed, now)

    kept = None if signed is None else _keep(session, page.validator, signed, now)
    written = 0
    for row, old, proven in _checked_rows(session, page, signed, ban_s=ban_s, now=now,
                                          proofs=proofs):
        if proven or row.digest in skip:
            continue
        if (signed is not None and old is not None and old.page_id is not None
                and old.signed_ns is not None and signed.signed_ns < old.signed_ns):
            continue  # an older page of this validator, relayed late: changes nothing
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
        old.stream_parts = row.stream_parts
        old.fetched_at = now
        if kept is not None:
            old.page_id, old.signed_ns = kept.id, signed.signed_ns
        # the times as signed, with the values above: what that page says of the run
        # (`_agrees` checks a later page against them); unknown without a signed page
        old.signed_measured_at = row.measured_at if kept is not None else None
        old.signed_verified_at = row.verified_at if kept is not None else None
        written += 1
    session.flush()
    if kept is not None:  # pages no stored row comes from any more are not relayed
        session.execute(delete(SignedPage).where(
            SignedPage.validator == page.validator,
            ~SignedPage.id.in_(select(PeerMeasurement.page_id).where(
                PeerMeasurement.validator == page.validator,
                PeerMeasurement.page_id.is_not(None)))))
    return written


def page_proofs(session: Session, page: MeasurementsPage, signed: Signed, *,
                ban_s: float = 7 * 86400.0, now: float | None = None,
                proofs: list[tuple[str, str]] | None = None) -> None:
    """Check a signed page whose rows are not stored (past its validator's new rows of the
    round) for equivocation as `store_page` would, storing the proofs it holds and nothing
    else: a liar cannot hide two conflicting rows by putting them in a page that is not
    taken. It costs what storing the page would (a page already fetched or relayed)."""
    for _ in _checked_rows(session, page, signed, ban_s=ban_s,
                           now=time.time() if now is None else now, proofs=proofs):
        pass


def _checked_rows(session: Session, page: MeasurementsPage, signed: Signed | None, *,
                  ban_s: float, now: float, proofs: list[tuple[str, str]] | None
                  ) -> Iterator[tuple[MeasurementRow, PeerMeasurement | None, bool]]:
    """The page's first row of each digest under this scoring version, with the row stored
    for its validator and digest (None if none) and whether the two are a proof of
    equivocation (then stored), with `signed`: the signed row stored before, taken in
    signing order, conflicts with it. A later row of a digest in the page is not given; it
    is a proof (the page twice) when it conflicts with the first."""
    earlier: dict[int, MeasurementsPage] = {}
    seen: dict[str, MeasurementRow] = {}
    stored = {m.digest: m for m in session.scalars(select(PeerMeasurement).where(
        PeerMeasurement.validator == page.validator,
        PeerMeasurement.digest.in_(sorted({row.digest for row in page.rows}))))}
    for row in page.rows:
        if row.scoring_version != SCORING_VERSION:
            continue
        if row.digest in seen:
            if signed is not None and conflicting_pages((signed, seen[row.digest]),
                                                        (signed, row)):
                _proven_by(session, page.validator, row.digest, signed, signed, ban_s=ban_s,
                           now=now, proofs=proofs)
            continue
        seen[row.digest] = row
        old = stored.get(row.digest)
        before = None
        if (signed is not None and old is not None and old.page_id is not None
                and not _agrees(old, row, signed.signed_ns)):
            before = _signed_row(session, old.page_id, row.digest, earlier)
        proven = before is not None and same_run(before[1], row) and conflicting_pages(
            before, (signed, row))
        if proven:
            first, second = sorted((before[0], signed), key=lambda x: x.signed_ns)
            _proven_by(session, page.validator, row.digest, first, second, ban_s=ban_s,
                       now=now, proofs=proofs)
        yield row, old, proven


def _proven_by(session: Session, validator: str, digest: str, first: Signed, second: Signed,
               *, ban_s: float, now: float, proofs: list[tuple[str, str]] | None) -> None:
    """Store the proof (`record`), noted in `proofs` when it is new here."""
    if record(session, validator, digest, first, second, ban_s=ban_s,
              now=now) and proofs is not None:
        proofs.append((validator, digest))


def _keep(session: Session, validator: str, signed: Signed, now: float) -> SignedPage:
    row = session.scalar(select(SignedPage).where(SignedPage.validator == validator,
                                                  SignedPage.sha256 == signed.sha256))
    if row is None:
        row = SignedPage(validator=validator, signed_ns=signed.signed_ns, sha256=signed.sha256,
                         target=signed.target, headers=signed.headers, body=signed.body,
                         received_at=now)
        session.add(row)
        session.flush()
    return row


def _agrees(old: PeerMeasurement, row: MeasurementRow, signed_ns: int) -> bool:
    """Whether `row` (in a page signed at `signed_ns`) is known, from the stored row alone,
    not to conflict with the signed row it was stored from: its values and signed times
    are kept with it, so only a row that may be a proof costs a parse of the stored page.
    False when unknown (a row stored before the signed times were kept)."""
    if old.signed_measured_at is None or old.signed_ns is None:
        return False
    was = MeasurementRow.model_construct(  # the values as signed, checked when stored
        bpb=old.bpb, heldout_delta=old.heldout_delta, measured_at=old.signed_measured_at,
        stream_parts=old.stream_parts, eligible=old.eligible,
        verified=old.verified_at is not None, verified_at=old.signed_verified_at,
        scoring_version=old.scoring_version)
    if not same_run(was, row):
        return True
    if old.signed_ns == signed_ns:
        return not (conflicting(was, row) or conflicting(row, was))
    return not (conflicting(was, row) if old.signed_ns < signed_ns else conflicting(row, was))


def _signed_row(session: Session, page_id: int, digest: str,
                cache: dict[int, MeasurementsPage]) -> tuple[Signed, MeasurementRow] | None:
    stored = session.get(SignedPage, page_id)
    if stored is None:
        return None
    if page_id not in cache:
        cache[page_id] = MeasurementsPage.model_validate_json(stored.body)
    for row in cache[page_id].rows:
        if row.digest == digest:
            return Signed(stored.target, dict(stored.headers), stored.body), row
    return None


def _heard(session: Session, validator: str, signed: Signed) -> None:
    """A relayed page of `validator` signed recently counts as hearing from it (bounded by
    this node's clock): it stays in the electorate of a validator it does not answer."""
    row = session.get(AgreementPeer, validator)
    if row is None:
        return
    at = min(time.time(), signed.signed_ns / 1e9)
    if row.last_ok_at is None or at > row.last_ok_at:
        row.last_ok_at = at


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
