"""A validator that signs pages conflicting on every row costs one proof, not one per row:
each validator keeps one proof per equivocator while it is in force (the one ending last),
and serves only proofs in force, within a bound (real servers on 127.0.0.1, real stores)."""

from __future__ import annotations

import hashlib
import json
import time

import httpx
from agreement_kit import NETUID, settings
from bittensor import http_auth
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import select

from prism_challenge.agreement.equivocation import banned_until, check_proof, excluded
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow, MeasurementsPage
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Equivocation

ROWS = 20
PARTS = [1.2345678901234567] * 1024  # ~20 KB a row: a page of ~0.4 MB


def shifting_liar(wallet, miner: str, bpb: list[float], signed_ns: list[int]) -> FastAPI:
    """Serves ROWS runs, each at `bpb[0]`: the test changes it between fetches, so every
    row of the new page conflicts with the page fetched before."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        rows = [MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(b"%d" % i).hexdigest(),
                               bpb=bpb[0], heldout_delta=0.0, eligible=True, verified=False,
                               measured_at=100.0, corpus="demo",
                               scoring_version=SCORING_VERSION, stream_parts=PARTS)
                for i in range(ROWS)]
        body = MeasurementsPage(validator=wallet.hotkey.ss58_address, netuid=NETUID,
                                scoring_version=SCORING_VERSION,
                                rows=rows).model_dump_json().encode()
        asked = f"{MEASUREMENTS_PATH}?{request.url.query}"
        signed_ns.append(time.time_ns())
        headers = http_auth.sign(wallet, method="GET", path=asked, body=body,
                                 nonce_ns=signed_ns[-1])
        return Response(body, media_type="application/json", headers=headers)

    return app


def proofs_of(node) -> list[tuple[str, int, float, int]]:
    """(validator, later signature, until, encoded bytes) of every proof stored."""
    with node.store.session() as s:
        return [(e.validator, e.signed_ns, e.until, len(json.dumps(e.proof)))
                for e in s.scalars(select(Equivocation))]


def test_pages_conflicting_on_every_row_store_and_serve_one_proof_in_force(
        nodes, wallets, live_server):
    b, c, liar = nodes["b"], nodes["c"], nodes["liar"]
    # rows of 1024 stream parts: validators cutting the stream into that many stretches
    b.settings = settings(dethrone_windows=1024)
    c.settings = settings(dethrone_windows=1024)
    bpb, signed_ns = [1.0], []
    url = live_server(shifting_liar(liar.wallet, wallets["miner1"].hotkey.ss58_address, bpb,
                                    signed_ns))
    offset = [0.0]
    b.serve(live_server, clock=lambda: time.time() + offset[0])
    electorate = [Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, url, 1.0)]
    ban_s = b.settings.agreement.equivocation_ban_s
    page_bytes = b.settings.agreement.max_page_bytes

    b.sync(electorate)  # the first page: ROWS runs at 1.0
    bpb[0] = 1.1
    _, status = b.sync(electorate)  # every row conflicts with the first page
    assert status.equivocations == {liar.hotkey: 1}
    (proof,) = proofs_of(b)  # before: one proof per conflicting row (20, ~21 MB)
    assert proof[:3] == (liar.hotkey, signed_ns[1], banned_until(signed_ns[1], ban_s))
    assert proof[3] < 3 * page_bytes
    bpb[0] = 1.2
    b.sync(electorate)  # conflicts again, signed later: takes the place of the one held
    (proof,) = proofs_of(b)
    assert proof[:3] == (liar.hotkey, signed_ns[2], banned_until(signed_ns[2], ban_s))
    with b.store.session() as s:
        assert excluded(s) == {liar.hotkey}

    served = httpx.get(f"{b.url}/v1/equivocations", timeout=30)
    assert len(served.content) < 3 * page_bytes  # before: every proof, ~21 MB
    body = served.json()
    assert [p["until"] for p in body["in_force"]] == [proof[2]]
    validator, _, first, second = check_proof(
        body["proofs"][0], netuid=NETUID, own_hotkey=b.hotkey, now_ns=time.time_ns(),
        skew_s=60, max_bytes=page_bytes)
    assert (validator, first.signed_ns, second.signed_ns) == (liar.hotkey, signed_ns[0],
                                                             signed_ns[2])

    # c takes the proof from b and holds the same one: the exclusion ends at one moment
    c.sync([Peer(c.hotkey, None, 1.0), Peer(b.hotkey, b.url, 1.0), Peer(liar.hotkey, None,
                                                                        1.0)])
    assert [p[:3] for p in proofs_of(c)] == [proof[:3]]

    offset[0] = proof[2] - time.time() + 1  # past the exclusion: nothing in force to serve
    assert httpx.get(f"{b.url}/v1/equivocations", timeout=30).json() == {
        "proofs": [], "in_force": []}
