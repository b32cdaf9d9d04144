"""A permitted validator signing rows of runs that do not exist: a page with more rows than
were asked is refused as its fault, and what one validator adds in a round is capped at
5 pages of new rows, while an honest peer's rows are stored in the same round (real
servers on 127.0.0.1, real stores)."""

from __future__ import annotations

import hashlib
import itertools
import logging
import time

import pytest
from agreement_kit import LONG_AGO, NETUID, add_scored, digest_of, settings, signed_page
from bittensor import http_auth
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import PageInvalid, Signed, check, signed_headers
from prism_challenge.agreement.wire import (
    MEASUREMENTS_PATH,
    MeasurementRow,
    MeasurementsPage,
    target,
)
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement

PAGE_SIZE = 40  # agreement.page_size of the validator fetching


def flooder(wallet, miner: str, rows_per_page: int | None) -> FastAPI:
    """Signs pages of rows of runs never seen before, `rows_per_page` of them (None: as
    many as asked), always saying more are waiting."""
    app = FastAPI()
    numbers = itertools.count()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request, limit: int = 100) -> Response:
        rows = [MeasurementRow(miner_hotkey=miner,
                               digest=hashlib.sha256(b"junk %d" % next(numbers)).hexdigest(),
                               bpb=0.5, heldout_delta=0.0, eligible=True, verified=True,
                               measured_at=time.time(), corpus="demo",
                               scoring_version=SCORING_VERSION)
                for _ in range(rows_per_page or limit)]
        return signed_page(wallet, request, rows, next=f"{next(numbers)}:1", more=True)

    return app


def rows_of(node, validator: str) -> int:
    with node.store.session() as s:
        return s.scalar(select(func.count()).select_from(PeerMeasurement).where(
            PeerMeasurement.validator == validator))


def setup(nodes, wallets, live_server, rows_per_page):
    a, b, liar = nodes["a"], nodes["b"], nodes["liar"]
    b.settings = settings(page_size=PAGE_SIZE)
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    a.serve(live_server)
    url = live_server(flooder(liar.wallet, wallets["miner2"].hotkey.ss58_address,
                              rows_per_page))
    return a, b, liar, [Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0),
                        Peer(a.hotkey, a.url, 1.0)]


def test_a_page_with_more_rows_than_asked_is_refused_as_the_peers_fault(
        nodes, wallets, live_server, caplog):
    a, b, liar, electorate = setup(nodes, wallets, live_server, rows_per_page=1000)
    with caplog.at_level(logging.INFO, logger="prism.agreement"):
        stored, status = b.sync(electorate)
    # before: pages of 1000 rows stored until the peer's share of the round ran out
    # (27,000 rows here)
    assert stored == {liar.hotkey: 0, a.hotkey: 1}
    assert status.pages[(liar.hotkey, "too_many_rows")] == 1
    assert status.refused(liar.hotkey) == 1 and status.refused(a.hotkey) == 0
    refusals = [r.getMessage() for r in caplog.records if liar.hotkey in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].startswith(
        f"agreement: refused a page of peer {liar.hotkey} (too_many_rows)")
    assert f"a page of 1000 rows, {PAGE_SIZE} asked" in refusals[0]
    assert rows_of(b, liar.hotkey) == 0 and rows_of(b, a.hotkey) == 1
    with b.store.session() as s:
        assert s.get(AgreementPeer, liar.hotkey).last_error.startswith(
            "refused (too_many_rows)")


def test_new_rows_of_one_validator_are_capped_per_round_and_honest_rows_still_stored(
        nodes, wallets, live_server):
    a, b, liar, electorate = setup(nodes, wallets, live_server, rows_per_page=None)
    cap = 5 * PAGE_SIZE  # NEW_ROW_PAGES_PER_ROUND pages of agreement.page_size
    a.settings = settings(page_size=PAGE_SIZE)
    a.sync([Peer(a.hotkey, None, 1.0), Peer(liar.hotkey, electorate[1].url, 1.0)])
    assert rows_of(a, liar.hotkey) == cap  # a holds (and relays) other junk of the liar
    stored, status = b.sync(electorate)
    # before: 50 pages of PAGE_SIZE new rows each, 2,000 rows stored in one round
    assert stored == {liar.hotkey: cap, a.hotkey: 1}
    # the junk a relays is past the liar's new rows of this round: not stored either
    assert rows_of(b, liar.hotkey) == cap and rows_of(b, a.hotkey) == 1
    assert status.refused() == 0  # not a refusal: the rest waits for the next round
    stored, _ = b.sync(electorate)
    assert stored[liar.hotkey] == cap and rows_of(b, liar.hotkey) == 2 * cap
    with b.store.session() as s:
        assert s.get(AgreementPeer, liar.hotkey).last_error is None  # it was reached


def test_what_one_validator_may_have_stored_here_is_bounded_in_all_with_a_logged_reason(
        nodes, wallets, live_server, caplog):
    """The per-round cap bounds how fast a liar adds rows, not how many: round after round
    it added 5 pages more (200, 400, 600 rows here after three rounds, without end). With
    a bound of 300 rows per validator, b takes 200, then the 100 that fit (of the page that
    reaches the bound, the rows that fit), then none: every new row past the bound, its own
    pages' and the 200 a relays, is not stored, logged once a round with how many, and a
    page with nothing to store ends its paging for the round (one page a round once at the
    bound); the honest peer's rows are stored every round."""
    a, b, liar, electorate = setup(nodes, wallets, live_server, rows_per_page=None)
    a.settings = settings(page_size=PAGE_SIZE)
    a.sync([Peer(a.hotkey, None, 1.0), Peer(liar.hotkey, electorate[1].url, 1.0)])
    assert rows_of(a, liar.hotkey) == 200  # junk of the liar a holds and relays
    bound = 300
    counts, outcomes = [], []
    for n in range(3):
        add_scored(a.store, name=f"honest {n}", miner=wallets["miner1"].hotkey.ss58_address,
                   block=2 + n, bpb=1.0)
        with caplog.at_level(logging.INFO, logger="prism.agreement"):
            caplog.clear()
            stored, status = b.sync(electorate, max_rows_per_peer=bound)
        counts.append(rows_of(b, liar.hotkey))
        outcomes.append((status.pages[(liar.hotkey, "ok")],
                         status.pages[(liar.hotkey, "row_bound")]))
        assert stored[a.hotkey] >= 1 and rows_of(b, a.hotkey) == 2 + n
        bounded = [r.getMessage() for r in caplog.records if "row_bound" in r.getMessage()]
        if n == 0:
            assert bounded == [] and status.refused(liar.hotkey) == 0
            continue
        # round 2: 20 of its third page, its fourth page (40) and the 200 a relays;
        # round 3: its first page (40) and the 200 a relays
        skipped = 260 if n == 1 else 240
        assert bounded == [f"agreement: validator {liar.hotkey} is at its row bound here "
                           f"(row_bound): {skipped} new rows of it were not stored this "
                           f"round: its rows stored here reached {bound}, the most one "
                           "validator may have (the setting agreement.max_rows_per_peer); "
                           "its rows stored are still updated and its pages read on"]
    # before: 200, 280, 280 (the page that would pass the bound refused whole)
    assert counts == [200, 300, 300]
    # (ok, row_bound) pages of the liar, its own and relayed: 5 relayed pages each round
    assert outcomes == [(5, 0), (2, 2 + 5), (0, 1 + 5)]
    with b.store.session() as s:
        assert s.get(AgreementPeer, liar.hotkey).last_error == (
            "row_bound: 240 new rows of it were not stored this round: its rows stored here "
            "reached 300, the most one validator may have (the setting "
            "agreement.max_rows_per_peer); its rows stored are still updated and its pages "
            "read on")


def test_a_relayed_page_with_more_rows_than_its_request_asked_is_refused(wallets):
    """Its author signed more rows than the request it answered asked for: no honest
    validator serves that, whoever relays it."""
    liar = wallets["liar"]
    rows = [MeasurementRow(miner_hotkey=wallets["miner1"].hotkey.ss58_address,
                           digest=hashlib.sha256(b"%d" % i).hexdigest(), bpb=1.0,
                           heldout_delta=0.0, eligible=True, verified=False,
                           measured_at=100.0, corpus="demo", scoring_version=SCORING_VERSION)
             for i in range(11)]
    body = MeasurementsPage(validator=liar.hotkey.ss58_address, netuid=NETUID,
                            scoring_version=SCORING_VERSION, rows=rows).model_dump_json().encode()
    for limit, ok in ((10, False), (11, True)):
        asked = target(None, limit)
        signed = Signed(asked, signed_headers(http_auth.sign(liar, method="GET", path=asked,
                                                             body=body)), body)
        if ok:
            assert len(check(signed, netuid=NETUID, own_hotkey="x", now_ns=time.time_ns(),
                             skew_s=60).rows) == 11
            continue
        with pytest.raises(PageInvalid) as refused:
            check(signed, netuid=NETUID, own_hotkey="x", now_ns=time.time_ns(), skew_s=60)
        assert refused.value.reason == "too_many_rows"


def test_what_one_peer_sends_in_a_round_is_held_up_to_a_bound(nodes, wallets, live_server):
    """A peer serving full pages of one run again and again, always saying more are
    waiting: its answers wait in memory until every peer is done, so it is asked no more
    once they hold `HELD_PAGES_PER_PEER` x `agreement.max_page_bytes`."""
    from prism_challenge.agreement.sync import HELD_PAGES_PER_PEER, MAX_PAGES_PER_ROUND

    b, liar = nodes["b"], nodes["liar"]
    max_page_bytes = 30_000
    # rows of 1024 stream parts: a validator cutting the stream into that many stretches
    b.settings = settings(max_page_bytes=max_page_bytes, relay=False, dethrone_windows=1024)
    wallet, miner = liar.wallet, wallets["miner2"].hotkey.ss58_address
    sizes: list[int] = []
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        row = MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(b"one").hexdigest(),
                             bpb=0.5, heldout_delta=0.0, eligible=True, verified=False,
                             measured_at=100.0, corpus="demo", scoring_version=SCORING_VERSION,
                             stream_parts=[0.123456789012345] * 1024)
        response = signed_page(wallet, request, [row], next="1:1", more=True)
        sizes.append(len(response.body))
        return response

    url = live_server(app)
    stored, _ = b.sync([Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0)],
                       timeout_s=30.0)
    held = HELD_PAGES_PER_PEER * max_page_bytes
    assert max_page_bytes / 2 < sizes[0] < max_page_bytes
    # before: all MAX_PAGES_PER_ROUND pages were fetched (and, now, would wait in memory)
    assert len(sizes) == -(-held // sizes[0]) < MAX_PAGES_PER_ROUND
    assert stored == {liar.hotkey: len(sizes)} and rows_of(b, liar.hotkey) == 1


def test_an_honest_validator_at_the_bound_is_read_on_and_its_later_rows_arrive(
        nodes, wallets, live_server, caplog):
    """a measured four runs, b may hold 3 of a's rows (pages of 2). The page that reaches
    the bound stores the row that fits, the one past it is not stored (logged), and b's
    cursor moves past the page; when a's replay of its first run passes later, that row
    comes again after the cursor and b stores it verified. Before: the page that would pass
    the bound was refused whole and its cursor stayed, so b fetched and refused the same
    page every round and never saw the verdict (2 rows, the first unverified, for good)."""
    from prism_challenge.agreement.own import next_cursor, own_rows
    from prism_challenge.storage.tables import Verification

    a, b = nodes["a"], nodes["b"]
    a.settings = b.settings = settings(page_size=2)
    miner = wallets["miner1"].hotkey.ss58_address
    first = add_scored(a.store, name="r1", miner=miner, block=1, bpb=1.0, verified=False)
    for n in (2, 3, 4):
        add_scored(a.store, name=f"r{n}", miner=miner, block=n, bpb=1.0)
    a.serve(live_server)
    electorate = [Peer(b.hotkey, None, 1.0), Peer(a.hotkey, a.url, 1.0)]

    def served_to_end() -> str:
        with a.store.session() as s:
            return next_cursor(own_rows(s), None)

    def held() -> dict[str, bool]:
        with b.store.session() as s:
            return {m.digest: m.verified_at is not None for m in s.scalars(
                select(PeerMeasurement).where(PeerMeasurement.validator == a.hotkey))}

    loop = b.loop(max_rows_per_peer=3)
    try:
        with caplog.at_level(logging.INFO, logger="prism.agreement"):
            assert loop.round(electorate) == {a.hotkey: 3}
        assert held() == {digest_of("r1"): False, digest_of("r2"): True,
                          digest_of("r3"): True}
        assert loop.cursors[a.hotkey] == served_to_end()
        assert [r.getMessage() for r in caplog.records if "row_bound" in r.getMessage()] == [
            f"agreement: validator {a.hotkey} is at its row bound here (row_bound): 1 new "
            "row of it was not stored this round: its rows stored here reached 3, the most "
            "one validator may have (the setting agreement.max_rows_per_peer); its rows "
            "stored are still updated and its pages read on"]
        assert loop.status.pages[(a.hotkey, "ok")] == 1
        assert loop.status.pages[(a.hotkey, "row_bound")] == 1
        with b.store.session() as s:
            assert s.get(AgreementPeer, a.hotkey).last_error.startswith("row_bound: 1 new")

        with a.store.session() as s:  # a's replay of r1 passes
            s.add(Verification(submission_id=first, status="passed", attempts=1,
                               created_at=LONG_AGO + 100, updated_at=LONG_AGO + 100))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="prism.agreement"):
            assert loop.round(electorate) == {a.hotkey: 1}
            assert loop.round(electorate) == {a.hotkey: 0}  # nothing new: nothing fetched
        assert held() == {digest_of("r1"): True, digest_of("r2"): True,
                          digest_of("r3"): True}
        assert loop.cursors[a.hotkey] == served_to_end()
        assert [r for r in caplog.records if "row_bound" in r.getMessage()] == []
        with b.store.session() as s:
            assert s.get(AgreementPeer, a.hotkey).last_error is None
    finally:
        loop.fetcher.close()
