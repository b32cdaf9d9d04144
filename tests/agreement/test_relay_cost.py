"""Relayed pages cost an honest node work bounded by what is new in them, not by how often
a peer sends them: a copy of a page already checked this round is passed over, and a
relayed row is checked against the values and signed times kept with the stored row, the
stored page being read (parsed) only when the two may conflict, which is a proof. Before,
every row of every copy read and parsed the ~1 MB page its stored row came from: 50
answers of 50 copies of one old 18-row page cost 45,000 parses, a 650 s round. Real nodes
on 127.0.0.1, a real SQLite store; the work is counted in the store's own queries."""

from __future__ import annotations

import hashlib
import itertools
import time

import pytest
from agreement_kit import NETUID, add_scored, signed_page
from bittensor import http_auth
from fastapi import FastAPI, Request
from sqlalchemy import event, select

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.signed import Signed, signed_headers
from prism_challenge.agreement.wire import (
    MEASUREMENTS_PATH,
    RELAY_PATH,
    MeasurementRow,
    MeasurementsPage,
    target,
)
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Equivocation, PeerMeasurement

RUNS = 18
COPIES = 50  # per relay answer, the most one holds
ANSWERS = 2


def run(miner: str, n: int, bpb: float = 0.5) -> MeasurementRow:
    return MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(b"run %d" % n).hexdigest(),
                          bpb=bpb, heldout_delta=0.0, eligible=True, verified=False,
                          measured_at=1000.0, corpus="demo", scoring_version=SCORING_VERSION)


def stored_page_reads(node) -> list[int]:
    """A counter of the stored signed pages `node` reads one by one (to parse them)."""
    reads = [0]

    @event.listens_for(node.store.engine, "before_cursor_execute")
    def count(conn, cursor, statement, parameters, context, executemany):
        if "FROM signed_pages" in statement and "WHERE signed_pages.id = " in statement:
            reads[0] += 1
    return reads


@pytest.mark.parametrize("first_bpb", [0.5, 0.6])
def test_copies_of_an_old_page_relayed_cost_one_check_and_no_parse_without_a_conflict(
        first_bpb, nodes, wallets, live_server):
    """The liar's runs are stored here from pages of one run each; then it relays 2 x 50
    copies of an older page of its own holding all 18. With the same values nothing is
    parsed and the page is checked once; with run 0 at another bpb in the older page (a
    take-back) the one stored page of run 0 is parsed and the proof stored."""
    a, b, liar = nodes["a"], nodes["b"], nodes["liar"]
    miner = wallets["miner2"].hotkey.ss58_address
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    a.serve(live_server)
    asked = target(None, 200)
    rows = [run(miner, 0, first_bpb)] + [run(miner, n) for n in range(1, RUNS)]
    body = MeasurementsPage(validator=liar.hotkey, netuid=NETUID,
                            scoring_version=SCORING_VERSION, rows=rows
                            ).model_dump_json().encode()
    old = Signed(asked, signed_headers(http_auth.sign(liar.wallet, method="GET", path=asked,
                                                      body=body)), body).to_json()
    time.sleep(0.01)  # the pages served below are signed after it
    numbers = itertools.count()
    relaying = {"on": False, "served": 0}
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request, limit: int = 100):
        n = next(numbers)
        if n >= RUNS:
            return signed_page(liar.wallet, request, [], next=None, more=False)
        return signed_page(liar.wallet, request, [run(miner, n)], next=f"{n + 1}:1",
                           more=True)

    @app.get(RELAY_PATH)
    def relay(after: int = 0, limit: int = 50):
        if not relaying["on"] or relaying["served"] >= ANSWERS:
            return {"pages": [], "next": after}
        relaying["served"] += 1
        return {"pages": [old] * COPIES, "next": after + 1}

    url = live_server(app)
    electorate = [Peer(b.hotkey, None, 1.0), Peer(a.hotkey, a.url, 1.0),
                  Peer(liar.hotkey, url, 1.0)]
    loop = b.loop()
    try:
        loop.round(electorate)
        with b.store.session() as s:
            assert len(s.scalars(select(PeerMeasurement).where(
                PeerMeasurement.validator == liar.hotkey)).all()) == RUNS
        relaying["on"] = True
        reads = stored_page_reads(b)
        loop.round(electorate)
    finally:
        loop.fetcher.close()
    assert relaying["served"] == ANSWERS
    # the 100 copies are one page checked once (before: each copy checked, 100 'relayed')
    assert b.status.pages[(liar.hotkey, "relayed")] == 1
    with b.store.session() as s:
        proofs = s.scalars(select(Equivocation.digest)).all()
    if first_bpb == 0.5:
        assert reads[0] == 0 and proofs == []  # before: 100 copies x 18 rows = 1,800 parses
    else:
        assert reads[0] == 1 and proofs == [rows[0].digest]  # before: 1,800 too
