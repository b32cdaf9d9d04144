"""A liar cannot frame an honest validator as an equivocator with its own two real pages.

`http_auth.verify` reads the nonce header with `int()`, which also reads `+123`, ` 123` and
`1_23`, and the signature covers the integer: re-sending an honest page under such a header
still verifies. A red team did it (real nodes on 127.0.0.1): it fetched honest a's page
before and after a's replay of run Y passed, re-sent the later one with its nonce written
`+<nonce>`, which the proof check read as time -1 (signed first), and served the pair as
"Y verified, then unverified": b and c accepted it, excluded a for a week, and Y lost its
stake majority (b's weights moved from miner2/Y to miner1/X). A page whose nonce header is
not written the one way a node writes it is refused, in a proof, relayed or fetched.
"""

from __future__ import annotations

import time

import httpx
import pytest
from agreement_kit import LONG_AGO, NETUID, add_scored, digest_of, signed_page
from fastapi import FastAPI, Request

from prism_challenge.agreement.equivocation import excluded, proof
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import (
    NONCE_HEADER,
    PageInvalid,
    Signed,
    check,
    signed_headers,
)
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow, target
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Verification
from prism_challenge.weights.plan import load_plan


def _grab(node) -> Signed:
    """A page of an honest validator's public route, kept exactly as signed."""
    asked = target(None, 100)
    r = httpx.get(node.url + asked, timeout=10)
    return Signed(asked, signed_headers(dict(r.headers)), r.content)


def _rewritten(page: Signed, nonce: str) -> Signed:
    return Signed(page.target, {**page.headers, NONCE_HEADER: nonce}, page.body)


def _leader(node):
    with node.store.session() as s:
        plan = load_plan(s, node.metagraph, node.settings, hotkey=node.hotkey)
        return plan.leader.hotkey if plan.leader else None


def test_a_page_is_refused_unless_its_nonce_is_written_plainly(nodes, live_server):
    a, b = nodes["a"], nodes["b"]
    add_scored(a.store, name="X", miner=a.hotkey, block=1, bpb=1.0)
    a.serve(live_server)
    page = _grab(a)
    nonce = page.headers[NONCE_HEADER]
    kwargs = dict(netuid=NETUID, own_hotkey=b.hotkey, now_ns=time.time_ns(), skew_s=60)
    assert check(page, **kwargs).validator == a.hotkey and page.signed_ns == int(nonce)
    for written in ("+" + nonce, " " + nonce, nonce + " ", nonce[:3] + "_" + nonce[3:],
                    "0" + nonce):
        with pytest.raises(PageInvalid, match="not a plain decimal integer") as refused:
            check(_rewritten(page, written), **kwargs)
        assert refused.value.reason == "signature"
        assert _rewritten(page, written).signed_ns == -1


def test_a_liar_cannot_frame_an_honest_validator_with_its_own_pages(nodes, wallets,
                                                                    live_server):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c, liar = (nodes[n] for n in ("a", "b", "c", "liar"))
    ids = {}
    for n in (a, b, c):
        add_scored(n.store, name="X", miner=m1, block=1, bpb=1.000)
        ids[n.name] = add_scored(n.store, name="Y", miner=m2, block=2, bpb=0.990,
                                 verified=False)
        n.serve(live_server)
    before = _grab(a)  # Y not verified yet
    for n in (a, b, c):  # Y's contender replay passes everywhere
        with n.store.session() as s:
            s.add(Verification(submission_id=ids[n.name], status="passed", attempts=1,
                               created_at=LONG_AGO + 5, updated_at=LONG_AGO + 6))
    after = _grab(a)  # Y verified
    forged = proof(a.hotkey, digest_of("Y"), before,
                   _rewritten(after, "+" + after.headers[NONCE_HEADER]))
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request):  # the liar measured X honestly and withholds Y (allowed)
        row = MeasurementRow(miner_hotkey=m1, digest=digest_of("X"), bpb=1.0,
                             heldout_delta=0.5, eligible=True, verified=True,
                             measured_at=LONG_AGO, verified_at=LONG_AGO + 1, corpus="demo",
                             scoring_version=SCORING_VERSION)
        return signed_page(liar.wallet, request, [row], next="1:1", more=False)

    @app.get("/v1/equivocations")
    def equivocations(one_page: bool = False):
        return {"proofs": [forged], "in_force": []}

    liar_url = live_server(app)
    for n in (b, c, a):
        others = [o for o in (a, b, c) if o is not n]
        n.sync([Peer(n.hotkey, None, 1.0)] + [Peer(o.hotkey, o.url, 1.0) for o in others]
               + [Peer(liar.hotkey, liar_url, 1.0)])
    for n in (a, b, c):
        with n.store.session() as s:
            assert excluded(s) == set(), n.name  # was {a} on b and c
        assert _leader(n) == m2, n.name  # was miner1/X on b


def test_a_fetched_page_whose_nonce_is_not_written_plainly_is_the_peer_s_fault(
        nodes, wallets, live_server):
    """A validator serving its own pages with `+<nonce>` would leave pages whose time no
    proof could read (-1): refused at the fetch, nothing of it stored."""
    b, liar = nodes["b"], nodes["liar"]
    m1 = wallets["miner1"].hotkey.ss58_address
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request):
        row = MeasurementRow(miner_hotkey=m1, digest=digest_of("X"), bpb=1.0,
                             heldout_delta=0.5, eligible=True, verified=True,
                             measured_at=LONG_AGO, verified_at=LONG_AGO + 1, corpus="demo",
                             scoring_version=SCORING_VERSION)
        served = signed_page(liar.wallet, request, [row], next="1:1", more=False)
        served.headers["X-Bittensor-Nonce"] = "+" + served.headers["X-Bittensor-Nonce"]
        return served

    stored, status = b.sync([Peer(b.hotkey, None, 1.0),
                             Peer(liar.hotkey, live_server(app), 1.0)])
    assert stored == {liar.hotkey: 0}
    assert dict(status.pages) == {(liar.hotkey, "signature"): 1}
