"""A liar cannot hide an equivocation in a page whose rows are not stored (real wallets, a
real server on 127.0.0.1, real SQLite stores): a page past the liar's new rows of the round,
or one whose new rows are past its bound on rows stored here, is still checked against what
the liar signed before and within itself, and the proof it holds is kept."""

from __future__ import annotations

import hashlib
import itertools
import time

import pytest
from agreement_kit import NETUID, digest_of, settings, signed_page
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from prism_challenge.agreement.equivocation import check_proof, excluded
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Equivocation, PeerMeasurement

PAGE_SIZE = 40  # agreement.page_size of b: 5 pages (200 new rows) of one validator a round


def serving(wallet, pages: list[list[MeasurementRow]]) -> FastAPI:
    """Serves `pages` in order whatever cursor it is asked after (`after=k:..` gets page
    k), signed by `wallet`; the list may be replaced between rounds."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request, after: str | None = None) -> Response:
        k = 0 if after is None else int(after.partition(":")[0])
        rows = pages[k] if k < len(pages) else []
        return signed_page(wallet, request, rows, next=f"{k + 1}:0",
                           more=k + 1 < len(pages))

    return app


@pytest.mark.parametrize("hidden", ["past_round_cap", "one_page_past_round_cap",
                                    "relayed_past_round_cap", "past_row_bound"])
def test_a_conflict_hidden_in_a_page_not_stored_is_proven(nodes, wallets, live_server,
                                                          hidden):
    """b stored Y verified at 0.98 from the liar. Then the liar serves b 200 junk rows (the
    most b takes of it in a round) and, in the page after them, Y unverified at 1.05 (or a
    new run Z twice, verified at 0.98 and unverified at 1.05; or a relays b the liar's page
    of Y at 1.05 among 39 junk rows, which a stored); or, with b holding as many of its
    rows as it may (1), Y at 1.05 among 39 junk rows. Before: that page waited for the
    next round (which the liar fills with new junk again), was passed over (relayed), or
    was refused whole at the bound, unchecked: no proof, the liar counted. Now b keeps the
    proof and excludes it, and Y stays as first signed."""
    liar, a, b = wallets["liar"], nodes["a"], nodes["b"]
    b.settings = settings(page_size=PAGE_SIZE)
    numbers = itertools.count()
    miner = wallets["miner2"].hotkey.ss58_address
    y = MeasurementRow(miner_hotkey=miner, digest=digest_of("Y"), block=2, bpb=0.98,
                       heldout_delta=0.5, eligible=True, verified=True, measured_at=100.0,
                       verified_at=101.0, corpus="demo", scoring_version=SCORING_VERSION)
    revised = {"bpb": 1.05, "verified": False, "verified_at": None}

    def junk(n: int) -> list[MeasurementRow]:
        return [y.model_copy(update={
            "digest": hashlib.sha256(b"junk %d" % next(numbers)).hexdigest()})
            for _ in range(n)]

    pages: list[list[MeasurementRow]] = [[y]]
    url = live_server(serving(liar, pages))
    electorate = [Peer(b.hotkey, None, 1.0), Peer(liar.hotkey.ss58_address, url, 1.0)]
    bound = 1 if hidden == "past_row_bound" else None
    b.sync(electorate, max_rows_per_peer=bound)
    proven = digest_of("Y")
    if hidden == "past_row_bound":
        pages[:] = [[y.model_copy(update=revised)] + junk(PAGE_SIZE - 1)]
    elif hidden == "past_round_cap":
        pages[:] = [junk(PAGE_SIZE) for _ in range(5)] + [
            [y.model_copy(update=revised)] + junk(PAGE_SIZE - 1)]
    elif hidden == "relayed_past_round_cap":
        pages[:] = [[y.model_copy(update=revised)] + junk(PAGE_SIZE - 1)]
        a.sync([Peer(a.hotkey, None, 1.0), electorate[1]])  # a holds that page, relays it
        a.serve(live_server)
        electorate.append(Peer(a.hotkey, a.url, 1.0))
        pages[:] = [junk(PAGE_SIZE) for _ in range(5)]
    else:
        z = y.model_copy(update={"digest": digest_of("Z")})
        proven = z.digest
        pages[:] = [junk(PAGE_SIZE) for _ in range(5)] + [
            [z, z.model_copy(update=revised)] + junk(PAGE_SIZE - 2)]
    _, status = b.sync(electorate, max_rows_per_peer=bound)

    hotkey = liar.hotkey.ss58_address
    assert status.equivocations == {hotkey: 1}
    with b.store.session() as s:
        assert excluded(s) == {hotkey}
        (proof,) = s.scalars(select(Equivocation)).all()
        mine = s.scalars(select(PeerMeasurement).where(
            PeerMeasurement.digest == digest_of("Y"))).one()
        assert (mine.bpb, mine.verified_at) == (0.98, 101.0)  # as first signed
        # the rows of the page not taken are not stored: 1 (Y), plus the 200 taken
        assert s.scalar(select(func.count()).select_from(PeerMeasurement)) == (
            1 if hidden == "past_row_bound" else 1 + 5 * PAGE_SIZE)
    pages_of_proof = proof.proof["pages"]
    assert proof.digest == proven
    assert (pages_of_proof[0] == pages_of_proof[1]) == (hidden == "one_page_past_round_cap")
    checked = check_proof(proof.proof, netuid=NETUID, own_hotkey=b.hotkey,
                          now_ns=time.time_ns(), skew_s=60, max_bytes=1_000_000)
    assert checked[:2] == (hotkey, proven)
