"""Peers that answer pages promptly but drip bundles cost a round about one timeout
together, not one each: the bundles of runs known only from peers are asked of every peer
at once, a bundle is asked of a second peer once the first has not given it within a
quarter of a timeout, and what they served is read and stored afterwards by the round's
own thread, each bundle once however many peers served it (real servers on 127.0.0.1,
real wallets, real stores)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
from agreement_kit import LONG_AGO, add_scored, make_wallet, signed_page
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from fixture_bundles import bundle as fixture_bundle
from sqlalchemy import select

from prism_challenge.agreement.bundles import BUNDLES_PATH, BundleFetcher
from prism_challenge.agreement.fetch import RoundBudget
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow
from prism_challenge.api import ApiDeps
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import PeerMeasurement, Submission
from prism_challenge.validator.app import create_app

DRIPPING = 6  # permitted validators serving pages at once and bundles a byte at a time
TIMEOUT_S = 3.0  # the honest peer answers within it even on a loaded machine
HONEST_DELAY_S = 1.5  # twice ASK_ANOTHER_AFTER x TIMEOUT_S: every peer is asked, either order
DRIP_FOR_S = 20.0  # how long a dripping answer would go on


@pytest.fixture(scope="module")
def dripping_wallets(tmp_path_factory):
    root = tmp_path_factory.mktemp("dripping-wallets")
    return [make_wallet(root, f"dripper{i}") for i in range(DRIPPING)]


def pages_now_bundles_never(wallet, miner: str, digest: str, asked: Counter,
                            stop: threading.Event) -> FastAPI:
    """A validator that signs a genuine page measuring run `digest` at once, and answers a
    request for any bundle 200, then one byte every 0.2 s for DRIP_FOR_S: each byte well
    inside any read timeout, the bundle never complete in time."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        row = MeasurementRow(miner_hotkey=miner, digest=digest, bpb=0.99, heldout_delta=0.5,
                             eligible=True, verified=False, measured_at=LONG_AGO,
                             corpus="demo", scoring_version=SCORING_VERSION)
        return signed_page(wallet, request, [row], next="1:1", more=False)

    async def drip():
        end = time.monotonic() + DRIP_FOR_S
        while time.monotonic() < end and not stop.is_set():
            yield b" "
            await asyncio.sleep(0.2)

    @app.get(BUNDLES_PATH + "/{digest}")
    def bundle(digest: str) -> StreamingResponse:
        asked[digest] += 1
        return StreamingResponse(drip(), media_type="application/octet-stream")

    return app


def test_many_peers_dripping_bundles_cost_a_round_about_one_timeout_and_the_honest_one_gives_it(
        nodes, wallets, live_server, dripping_wallets, tmp_path):
    """Y's upload missed b. Six permitted validators serve their pages (each measuring Y) at
    once and drip bundles; they are listed, and their rows stored, before a, which holds Y
    and serves it in 1.5 s. One real round of b's peer loop stores every page and Y's
    bundle from a in about one timeout, not six."""
    a, b = nodes["a"], nodes["b"]
    m2 = wallets["miner2"].hotkey.ss58_address
    ledger = LocalLedger(tmp_path / "ledger.db", a.metagraph)
    y = Bundle(fixture_bundle("tiny"))
    committed = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    add_scored(a.store, name="Y", miner=m2, block=committed.block, bpb=0.99, bundle=y)
    app = create_app(ApiDeps(settings=a.settings, store=a.store, metagraph=a.metagraph,
                             hotkey=a.hotkey, signer=a.wallet))

    @app.middleware("http")
    async def slow_bundles(request, call_next):  # an honest peer on a slow link
        if request.url.path.startswith(BUNDLES_PATH):
            await asyncio.sleep(HONEST_DELAY_S)
        return await call_next(request)

    a.url = live_server(app)
    a.sync([Peer(a.hotkey, None, 1.0), Peer(b.hotkey, None, 1.0)])  # a learns b's permit
    asked: Counter = Counter()
    stop = threading.Event()
    dripping = [Peer(w.hotkey.ss58_address,
                     live_server(pages_now_bundles_never(w, m2, y.digest, asked, stop)), 1.0)
                for w in dripping_wallets]
    fetcher = BundleFetcher(b.store, ledger, b.metagraph, b.wallet,
                            policy=IntakePolicy.from_settings(b.settings), settle_s=0.0,
                            timeout_s=TIMEOUT_S)
    try:
        started = time.monotonic()
        stored, status = b.sync([Peer(b.hotkey, None, 1.0), *dripping, Peer(a.hotkey, a.url,
                                                                            1.0)],
                                bundles=fetcher, timeout_s=TIMEOUT_S)
        took = time.monotonic() - started
    finally:
        stop.set()
        fetcher.close()
    print(f"round with {DRIPPING} peers dripping bundles: {took:.2f} s")  # shown with -s
    # before: one peer after another, each bundle request ran its whole timeout (~18 s)
    assert took < DRIPPING * TIMEOUT_S / 2, (
        f"the round took {took:.1f} s with {DRIPPING} peers dripping bundles at "
        f"timeout_s={TIMEOUT_S}")
    assert stored == {p.hotkey: 1 for p in dripping} | {a.hotkey: 1}
    assert status.pages[(a.hotkey, "ok")] == 1
    # a served past a quarter of a timeout (bundles.ASK_ANOTHER_AFTER), so every dripping
    # peer was asked, once, whichever was asked first
    assert dict(asked) == {y.digest: DRIPPING}
    assert fetcher.fetched == 1
    with b.store.session() as s:
        measured = s.scalars(select(PeerMeasurement.validator).where(
            PeerMeasurement.digest == y.digest).order_by(PeerMeasurement.id)).all()
        row = s.scalars(select(Submission).where(Submission.digest == y.digest)).one()
    assert measured == [p.hotkey for p in dripping] + [a.hotkey]  # a asked last, before
    assert (row.hotkey, row.status, row.block, row.bundle) == (
        m2, "received", committed.block, y.to_wire())


def serving(wire: bytes, delay_s: float, asked: list[str], name: str) -> FastAPI:
    """A peer that answers any bundle request with `wire` after `delay_s` (`name` is noted
    in `asked` when a request arrives: the peer may be given up on before it answers)."""
    app = FastAPI()

    @app.get(BUNDLES_PATH + "/{digest}")
    def bundle(digest: str) -> Response:
        asked.append(name)
        time.sleep(delay_s)
        return Response(wire, media_type="application/octet-stream")

    return app


def measured_by(node, peers: list[Peer], digest: str, miner: str, block: int) -> None:
    """Rows of `node`: each of `peers` measured run `digest` of `miner`, in their order."""
    with node.store.session() as s:
        for peer in peers:
            s.add(PeerMeasurement(validator=peer.hotkey, digest=digest, miner_hotkey=miner,
                                  block=block, bpb=0.99, heldout_delta=0.5, eligible=True,
                                  measured_at=LONG_AGO, corpus="demo",
                                  scoring_version=SCORING_VERSION, fetched_at=LONG_AGO))


def test_a_bundle_several_peers_serve_is_stored_once_and_other_bytes_are_not_taken_for_it(
        nodes, wallets, live_server, tmp_path):
    """Y's upload missed d. A peer listed first answers at once with another bundle (its
    bytes are not Y's digest: ignored, the others asked); three holders of Y each take
    longer than a quarter of a timeout, so all three are asked (the first to serve it
    ends the others' requests): Y is stored once, as the miner's, and counted once."""
    d = nodes["b"]
    m2 = wallets["miner2"].hotkey.ss58_address
    ledger = LocalLedger(tmp_path / "ledger.db", d.metagraph)
    files = fixture_bundle("tiny")
    y = Bundle(files)
    other = Bundle(files | {"training.py": files["training.py"] + b"\n# another run\n"})
    committed = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    served: list[str] = []
    peers = [Peer("substitutor", live_server(serving(other.to_wire(), 0.0, served, "other")),
                  1.0)] + [
        Peer(f"holder-{i}", live_server(serving(y.to_wire(), 1.5, served, f"holder-{i}")), 1.0)
        for i in range(3)]
    measured_by(d, peers, y.digest, m2, committed.block)  # the substitutor first
    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=TIMEOUT_S)
    try:
        assert fetcher.missing()[(y.digest, m2)] == [p.hotkey for p in peers]
        started = time.monotonic()
        stored = fetcher.round(peers)
        took = time.monotonic() - started
    finally:
        fetcher.close()
    print(f"bundle round, three holders and a substitutor: {took:.2f} s")  # shown with -s
    assert sorted(served) == ["holder-0", "holder-1", "holder-2", "other"]
    assert (stored, fetcher.fetched) == (1, 1)
    assert took < 2 * TIMEOUT_S, f"the bundle round took {took:.1f} s"
    with d.store.session() as s:
        rows = s.scalars(select(Submission).where(Submission.digest.in_(
            [y.digest, other.digest]))).all()
    assert [(r.digest, r.hotkey, r.status, r.bundle) for r in rows] == [
        (y.digest, m2, "received", y.to_wire())]


def test_a_bundle_one_peer_gave_is_no_longer_waited_for_from_a_peer_dripping_it(
        nodes, wallets, live_server, tmp_path):
    """Y's upload missed d. The dripper measured Y (so it is asked first) and drips it; the
    holder is asked too after a quarter of a timeout and serves Y half a second later. The
    dripper's request is given up then: the round ends with the holder's answer, not at
    the end of the dripper's request, and the dripper's share of the round is not spent
    (it was not slow to answer anything still needed)."""
    d, dripper = nodes["b"], wallets["liar"]
    m2 = wallets["miner2"].hotkey.ss58_address
    ledger = LocalLedger(tmp_path / "ledger.db", d.metagraph)
    y = Bundle(fixture_bundle("tiny"))
    committed = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    asked: Counter = Counter()
    stop = threading.Event()
    served: list[str] = []
    timeout_s = 4.0
    peers = [Peer(dripper.hotkey.ss58_address, live_server(
                pages_now_bundles_never(dripper, m2, y.digest, asked, stop)), 1.0),
             Peer("holder", live_server(serving(y.to_wire(), 0.5, served, "holder")), 1.0)]
    measured_by(d, peers, y.digest, m2, committed.block)  # the dripper first
    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=timeout_s)
    budget = RoundBudget(3 * timeout_s)
    try:
        started = time.monotonic()
        stored = fetcher.round(peers, budget=budget)
        took = time.monotonic() - started
    finally:
        stop.set()
        fetcher.close()
    print(f"bundle round, a dripper and a holder: {took:.2f} s")  # shown with -s
    assert dict(asked) == {y.digest: 1} and served == ["holder"]
    assert (stored, fetcher.fetched) == (1, 1)
    # the holder was asked at 1 s and served by about 1.5 s; before, the round waited for
    # the dripper's request to run out at 4 s and spent the dripper's share
    assert took < timeout_s - 1.0, f"the bundle round took {took:.1f} s"
    assert not budget.spent(dripper.hotkey.ss58_address)
    assert budget.left[dripper.hotkey.ss58_address] > 3 * timeout_s - (timeout_s - 1.0)
