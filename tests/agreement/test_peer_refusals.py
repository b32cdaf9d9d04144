"""What a peer loop refuses: a page signed by another hotkey, an unsigned page, a page
altered after signing, a replayed page, an oversized page and a malformed page. Each is
logged and counted by reason, and writes no measurement and no 'reached' mark."""

from __future__ import annotations

import logging

import httpx
import pytest
from agreement_kit import NETUID, add_scored
from bittensor import http_auth
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from prism_challenge.agreement.fetch import PeerFetcher, PeerRefused
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.wire import MEASUREMENTS_PATH
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement


def relay(upstream: str, rewrite, *, sign_with=None) -> FastAPI:
    """A server in front of a real validator that rewrites its answer: `rewrite(body,
    headers) -> (body, headers)`; `sign_with` re-signs the result with another wallet."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def measurements(request: Request) -> Response:
        asked = f"{MEASUREMENTS_PATH}?{request.url.query}"
        real = httpx.get(upstream + asked, timeout=10)
        headers = {k: v for k, v in real.headers.items() if k.lower().startswith("x-bittensor")}
        body, headers = rewrite(real.content, headers)
        if sign_with is not None:
            headers = http_auth.sign(sign_with, method="GET", path=asked, body=body)
        return Response(body, media_type="application/json", headers=headers)

    return app


FORGERIES = {
    "signed by another hotkey": (lambda b, h: (b, h), "mallory", "wrong_validator"),
    "unsigned": (lambda b, h: (b, {}), None, "signature"),
    "altered after signing": (lambda b, h: (b.replace(b'"bpb":1.0', b'"bpb":0.5'), h), None,
                              "signature"),
    "malformed but signed": (lambda b, h: (b.replace(b'"bpb":1.0', b'"bpb":"low"'), h), "a",
                             "malformed"),
    "an extra field, signed": (lambda b, h: (b.replace(b'"rows":', b'"x":1,"rows":'), h), "a",
                               "malformed"),
    "oversized": (lambda b, h: (b + b" " * 2_000_000, h), "a", "oversized"),
    "another netuid, signed": (lambda b, h: (b.replace(f'"netuid":{NETUID}'.encode(),
                                                       b'"netuid":8'), h), "a",
                               "wrong_validator"),
}


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_a_forged_page_is_refused_and_writes_nothing(case, nodes, wallets, live_server, caplog):
    rewrite, signer, reason = FORGERIES[case]
    a, b = nodes["a"], nodes["b"]
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    upstream = a.serve(live_server)
    forged = live_server(relay(upstream, rewrite, sign_with=None if signer is None
                               else wallets[signer]))
    with caplog.at_level(logging.WARNING, logger="prism.agreement"):
        stored, status = b.sync([Peer(b.hotkey, None, 1.0), Peer(a.hotkey, forged, 1.0)])
    assert stored == {a.hotkey: 0}
    assert dict(status.pages) == {(a.hotkey, reason): 1}
    assert f"refused a page of peer {a.hotkey} ({reason})" in caplog.text
    with b.store.session() as s:
        assert s.scalar(select(func.count()).select_from(PeerMeasurement)) == 0
        peer = s.get(AgreementPeer, a.hotkey)
        assert peer.last_ok_at is None and peer.last_error.startswith(f"refused ({reason})")


def test_the_genuine_page_through_the_same_relay_is_accepted(nodes, wallets, live_server):
    """The control: the relay passing the page through untouched changes nothing."""
    a, b = nodes["a"], nodes["b"]
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    relayed = live_server(relay(a.serve(live_server), lambda body, h: (body, h)))
    stored, status = b.sync([Peer(b.hotkey, None, 1.0), Peer(a.hotkey, relayed, 1.0)])
    assert stored == {a.hotkey: 1} and status.refused() == 0
    with b.store.session() as s:
        row = s.scalars(select(PeerMeasurement)).one()
        assert (row.validator, row.bpb, row.verified_at is not None) == (a.hotkey, 1.0, True)


def test_a_replayed_page_is_refused(nodes, wallets, live_server):
    """The same signed answer served twice: the second is a replay (and a stale one later)."""
    a = nodes["a"]
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    url = a.serve(live_server)
    saved = {}

    def once(body, headers):
        saved.setdefault("page", (body, headers))
        return saved["page"]

    replaying = live_server(relay(url, once))
    fetcher = PeerFetcher(own_hotkey=nodes["b"].hotkey, netuid=NETUID, timeout_s=5,
                          max_page_bytes=100_000, max_age_s=30)
    peer = Peer(a.hotkey, replaying, 1.0)
    try:
        assert len(fetcher.page(peer, None, 100).rows) == 1
        with pytest.raises(PeerRefused) as refused:
            fetcher.page(peer, None, 100)
        assert refused.value.reason == "signature" and "ReplayedRequest" in str(refused.value)
    finally:
        fetcher.close()


def test_an_endless_page_without_a_length_is_cut_off_at_the_limit(nodes, live_server):
    """A peer streaming a body with no Content-Length is read only up to the limit."""
    from fastapi.responses import StreamingResponse

    sent = {"bytes": 0}
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def endless() -> StreamingResponse:
        def chunks():
            for _ in range(10_000):  # 640 MB if anyone read it all
                sent["bytes"] += 65536
                yield b" " * 65536
        return StreamingResponse(chunks(), media_type="application/json")

    a, b = nodes["a"], nodes["b"]
    url = live_server(app)
    stored, status = b.sync([Peer(b.hotkey, None, 1.0), Peer(a.hotkey, url, 1.0)],
                            max_page_bytes=100_000)
    assert stored == {a.hotkey: 0}
    assert dict(status.pages) == {(a.hotkey, "oversized"): 1}
    assert sent["bytes"] < 50 * 2**20  # the reader stopped; the server was not drained
    with b.store.session() as s:
        assert s.scalar(select(func.count()).select_from(PeerMeasurement)) == 0
