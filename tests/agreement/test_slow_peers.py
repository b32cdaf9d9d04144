"""A permitted peer that answers slowly holds the peer loop for its share of the round at
most: a request ends `agreement.timeout_s` after it began however steadily the bytes come,
and everything asked of one peer in a round ends within 3 timeouts; peers are asked at
once, so however many are slow a round lasts about that long and the honest peers are
still reached in it (real servers on 127.0.0.1, real stores)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections import Counter

from agreement_kit import LONG_AGO, NETUID, add_scored, electorate_of, signed_page
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from fixture_bundles import bundle as fixture_bundle
from sqlalchemy import select

from prism_challenge.agreement.bundles import BUNDLES_PATH, BundleFetcher
from prism_challenge.agreement.fetch import PeerFetcher
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import PeerSync
from prism_challenge.agreement.wire import (
    EQUIVOCATIONS_PATH,
    MEASUREMENTS_PATH,
    RELAY_PATH,
    MeasurementRow,
)
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement

DRIP_FOR_S = 10.0  # how long the dripping peer keeps one answer going
# the honest peer's answer must fit in it on a loaded 2-core host (at 1 s it once did not)
TIMEOUT_S = 3.0


def dripping(asked: Counter, stop: threading.Event) -> FastAPI:
    """Every agreement route answers 200 and then one byte every 0.2 s for DRIP_FOR_S:
    each byte well inside any read timeout, the answer never complete in time."""
    app = FastAPI()

    async def drip():
        end = time.monotonic() + DRIP_FOR_S
        while time.monotonic() < end and not stop.is_set():
            yield b" "
            await asyncio.sleep(0.2)

    for path in (MEASUREMENTS_PATH, RELAY_PATH, EQUIVOCATIONS_PATH, BUNDLES_PATH + "/{x}"):
        def route(request: Request, path: str = path) -> StreamingResponse:
            asked[path.removesuffix("/{x}")] += 1
            return StreamingResponse(drip(), media_type="application/json")
        app.get(path)(route)
    return app


def honest_a(nodes, wallets, live_server):
    """Validator a, serving its measurement of one run X."""
    add_scored(nodes["a"].store, name="X", miner=wallets["miner1"].hotkey.ss58_address,
               block=1, bpb=1.0)
    nodes["a"].serve(live_server)
    return nodes["a"]


def test_a_peer_dripping_its_answers_costs_one_timeout_and_the_next_peer_is_reached(
        nodes, wallets, live_server):
    a, b, liar = honest_a(nodes, wallets, live_server), nodes["b"], nodes["liar"]
    asked: Counter = Counter()
    stop = threading.Event()
    url = live_server(dripping(asked, stop))
    try:
        started = time.monotonic()
        stored, status = b.sync([Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0),
                                 Peer(a.hotkey, a.url, 1.0)], timeout_s=TIMEOUT_S)
        took = time.monotonic() - started
    finally:
        stop.set()
    # before: each of the three requests read on for DRIP_FOR_S (the round took ~30 s)
    assert took < DRIP_FOR_S - 2, f"the round took {took:.1f} s with timeout_s={TIMEOUT_S}"
    # the page request ran out of time; the peer was not asked for relay or proofs after
    assert dict(asked) == {MEASUREMENTS_PATH: 1}
    assert stored == {liar.hotkey: 0, a.hotkey: 1}
    assert status.pages[(liar.hotkey, "unreachable")] == 1
    assert status.pages[(a.hotkey, "ok")] == 1
    with b.store.session() as s:
        assert [r.validator for r in s.scalars(select(PeerMeasurement))] == [a.hotkey]
        mark = s.get(AgreementPeer, liar.hotkey)
        assert mark.last_ok_at is None
        assert "no complete answer by its deadline" in mark.last_error


def test_a_peer_dripping_a_bundle_is_left_at_the_timeout_and_the_next_holder_gives_it(
        nodes, wallets, live_server, tmp_path):
    """Y's upload missed d; the dripping peer measured Y first (so its thread starts
    first), a holds Y: the bundle comes from a within about one timeout."""
    a, d, liar = nodes["a"], nodes["b"], nodes["liar"]
    m2 = wallets["miner2"].hotkey.ss58_address
    ledger = LocalLedger(tmp_path / "ledger.db", a.metagraph)
    y = Bundle(fixture_bundle("tiny"))
    committed = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    add_scored(a.store, name="Y", miner=m2, block=committed.block, bpb=0.99, bundle=y)
    a.serve(live_server)
    a.sync(electorate_of(a, [d]))  # a learns d as a permitted validator
    with d.store.session() as s:
        s.add(PeerMeasurement(validator=liar.hotkey, digest=y.digest, miner_hotkey=m2,
                              block=committed.block, bpb=0.99, heldout_delta=0.5,
                              eligible=True, measured_at=LONG_AGO, corpus="demo",
                              scoring_version=SCORING_VERSION, fetched_at=LONG_AGO))
    d.sync(electorate_of(d, [a]))  # a's measurement of Y, stored after the liar's
    asked: Counter = Counter()
    stop = threading.Event()
    url = live_server(dripping(asked, stop))
    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=TIMEOUT_S)
    try:
        assert list(fetcher.missing()) == [(y.digest, m2)]
        assert fetcher.missing()[(y.digest, m2)] == [liar.hotkey, a.hotkey]
        started = time.monotonic()
        stored = fetcher.round([Peer(liar.hotkey, url, 1.0), Peer(a.hotkey, a.url, 1.0)])
        took = time.monotonic() - started
    finally:
        stop.set()
        fetcher.close()
    # before: the dripping answer was read for DRIP_FOR_S before a was asked
    assert took < DRIP_FOR_S - 2, f"the bundle round took {took:.1f} s with timeout_s={TIMEOUT_S}"
    assert (stored, fetcher.fetched) == (1, 1)
    # both are asked at once: the liar is asked once, or not at all when a's thread came
    # first and a gave Y within a quarter of a timeout
    assert dict(asked) in ({BUNDLES_PATH: 1}, {})


def slow_pager(wallet, miner: str, served: list[str], delay_s: float) -> FastAPI:
    """A validator that signs a genuine page of one new row per request, says more rows
    are waiting, and takes `delay_s` (under the timeout) to answer each."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        time.sleep(delay_s)
        after = request.query_params.get("after")
        served.append(after or "start")
        n = 0 if after is None else int(after.split(":")[0])  # the same row when re-asked
        row = MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(b"%d" % n).hexdigest(),
                             bpb=1.0, heldout_delta=0.0, eligible=True, verified=False,
                             measured_at=time.time(), corpus="demo",
                             scoring_version=SCORING_VERSION)
        return signed_page(wallet, request, [row], next=f"{n + 1}:1", more=True)

    return app


def test_a_peer_paging_slowly_is_cut_at_its_share_of_the_round_and_resumed_next_round(
        nodes, wallets, live_server):
    a, b, liar = honest_a(nodes, wallets, live_server), nodes["b"], nodes["liar"]
    served: list[str] = []
    # the honest peer answers within a timeout even on a loaded machine (0.5 s was not)
    timeout_s, delay_s = 2.0, 1.2
    url = live_server(slow_pager(liar.wallet, wallets["miner2"].hotkey.ss58_address, served,
                                 delay_s))
    electorate = [Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0),
                  Peer(a.hotkey, a.url, 1.0)]
    # one PeerSync across both rounds (its cursors), as the node's loop keeps it
    cfg = b.settings.agreement
    fetcher = PeerFetcher(own_hotkey=b.hotkey, netuid=NETUID, timeout_s=timeout_s,
                          max_page_bytes=cfg.max_page_bytes, max_age_s=cfg.signature_max_age_s)
    sync = PeerSync(b.store, fetcher, AgreementStatus(), cfg.page_size, netuid=NETUID,
                    relay=True, skew_s=cfg.signature_max_age_s)
    try:
        started = time.monotonic()
        first = sync.round(electorate)
        took = time.monotonic() - started
        after_first = len(served)
        second = sync.round(electorate)
    finally:
        fetcher.close()
    share = 3 * timeout_s  # a peer's share of a round: 3 timeouts (docs/validators.md §9)
    # before: every slow page was read in one round (50 pages, a minute at this delay)
    assert took < share + 3.0, f"the round took {took:.1f} s; the peer's share is {share} s"
    assert 1 <= after_first <= share / delay_s + 1
    # every page answered in time is stored (the last may have been cut at the deadline)
    assert first[liar.hotkey] in (after_first - 1, after_first)
    assert first[a.hotkey] == 1 and second[a.hotkey] == 0  # the honest peer, reached
    # the next round goes on from the cursor of the last page stored
    assert served[first[liar.hotkey]] == f"{first[liar.hotkey]}:1"
    assert second[liar.hotkey] >= 1
    with b.store.session() as s:
        held = s.scalars(select(PeerMeasurement.digest).where(
            PeerMeasurement.validator == liar.hotkey)).all()
    assert sorted(held) == sorted(hashlib.sha256(b"%d" % i).hexdigest()
                                  for i in range(first[liar.hotkey] + second[liar.hotkey]))


SLOW_PEERS = 6


def test_many_slow_peers_cost_a_round_about_one_timeout_and_the_honest_peer_is_reached(
        nodes, wallets, live_server):
    """Six permitted validators dripping every answer, listed before the one honest peer:
    they are asked at once, so the round lasts about one timeout, not six, and the honest
    peer's row is stored in that round."""
    a, b = honest_a(nodes, wallets, live_server), nodes["b"]
    asked: Counter = Counter()
    stop = threading.Event()
    slow = [Peer(f"slow-validator-{i}", live_server(dripping(asked, stop)), 1.0)
            for i in range(SLOW_PEERS)]
    timeout_s = 2.0  # the honest peer answers within it even on a loaded machine
    try:
        started = time.monotonic()
        stored, status = b.sync([Peer(b.hotkey, None, 1.0), *slow, Peer(a.hotkey, a.url, 1.0)],
                                timeout_s=timeout_s)
        took = time.monotonic() - started
    finally:
        stop.set()
    # before: one peer after another, each page request ran its whole timeout (~12 s)
    assert took < SLOW_PEERS * timeout_s / 2, (
        f"the round took {took:.1f} s with {SLOW_PEERS} slow peers at timeout_s={timeout_s}")
    assert dict(asked) == {MEASUREMENTS_PATH: SLOW_PEERS}  # each asked once, then left
    assert stored == {p.hotkey: 0 for p in slow} | {a.hotkey: 1}
    assert status.pages[(a.hotkey, "ok")] == 1
    with b.store.session() as s:
        assert [r.validator for r in s.scalars(select(PeerMeasurement))] == [a.hotkey]
        for peer in slow:
            assert "no complete answer by its deadline" in s.get(
                AgreementPeer, peer.hotkey).last_error


def late_page(wallet, miner: str, names: list[str], delay_s: float) -> FastAPI:
    """A validator that signs one genuine page of runs `names` after `delay_s`."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        time.sleep(delay_s)
        rows = [MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(n.encode()).hexdigest(),
                               bpb=1.0, heldout_delta=0.0, eligible=True, verified=False,
                               measured_at=LONG_AGO, corpus="demo",
                               scoring_version=SCORING_VERSION) for n in names]
        return signed_page(wallet, request, rows, next="1:1", more=False)

    return app


def test_answers_are_stored_in_the_electorates_order_whichever_arrives_first(
        nodes, wallets, live_server):
    """The peer listed first answers last: its rows are still stored first (the same ids,
    the same state, whatever order the answers arrive in)."""
    a, b, liar = honest_a(nodes, wallets, live_server), nodes["b"], nodes["liar"]
    url = live_server(late_page(liar.wallet, wallets["miner2"].hotkey.ss58_address,
                                ["P", "Q"], delay_s=1.0))
    stored, _ = b.sync([Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0),
                        Peer(a.hotkey, a.url, 1.0)], timeout_s=5.0)
    assert stored == {liar.hotkey: 2, a.hotkey: 1}
    with b.store.session() as s:
        order = [r.validator for r in s.scalars(select(PeerMeasurement)
                                                .order_by(PeerMeasurement.id))]
    assert order == [liar.hotkey, liar.hotkey, a.hotkey]
