"""A lying validator cannot make an honest one keep megabytes of signed pages for a row.

A page is kept (to be relayed, and to prove an equivocation against) while one row stored
here comes from it. Rows that are never stored (a second copy of a run's row, a row of
another scoring version) or stream parts past `scoring.dethrone_windows` would only pad
the page: such a page is refused as the serving peer's fault. Past that, the bytes of one
validator's kept pages are bounded (`SIGNED_BYTES_PER_ROW` per row it may store). Real
nodes on 127.0.0.1, real SQLite stores."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from agreement_kit import add_scored, signed_page
from fastapi import FastAPI, Request
from sqlalchemy import func, select

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.sync import SIGNED_BYTES_PER_ROW
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement, SignedPage

PARTS = [0.5 + i * 1e-9 for i in range(32)]  # as many as scoring.dethrone_windows (32)


def run(miner: str, name: str, *, parts=PARTS, version=SCORING_VERSION) -> MeasurementRow:
    return MeasurementRow(miner_hotkey=miner, digest=hashlib.sha256(name.encode()).hexdigest(),
                          bpb=0.5, heldout_delta=0.0, eligible=True, verified=False,
                          measured_at=1000.0, corpus="demo", scoring_version=version,
                          stream_parts=parts)


def kept(node, validator: str) -> tuple[int, int, int]:
    """(rows stored, signed pages kept, their bytes) of `validator` on `node`."""
    with node.store.session() as s:
        rows = s.scalar(select(func.count()).select_from(PeerMeasurement)
                        .where(PeerMeasurement.validator == validator))
        pages, size = s.execute(select(func.count(), func.sum(func.length(SignedPage.body)))
                                .where(SignedPage.validator == validator)).one()
    return rows, pages, size or 0


def liar_serving(liar, pad) -> FastAPI:
    """Pages of one new run each (run 0, run 1, ...), padded by `pad(n, row)`."""
    app = FastAPI()
    numbers = itertools.count()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request, limit: int = 100):
        n = next(numbers)
        row = run(liar.miner, f"run {n}")
        return signed_page(liar.wallet, request, [row, *pad(n, row)][:limit],
                           next=f"{n + 1}:1", more=True)
    return app


PADDINGS = {
    # copies of the page's own row: a page's second row of a digest is never stored
    "repeated_row": lambda n, row: [row] * 40,
    # rows of another scoring version: never stored here
    "row_version": lambda n, row: [run(row.miner_hotkey, "pad", version="9.9.9")] * 40,
    # the run's row itself with more stream parts than the stream is cut into
    "stream_parts": lambda n, row: [run(row.miner_hotkey, f"long {n}", parts=PARTS * 32)],
}


@pytest.mark.parametrize("reason", sorted(PADDINGS))
def test_a_page_padded_with_rows_never_stored_is_refused_and_nothing_of_it_kept(
        reason, nodes, wallets, live_server):
    a, b, liar = nodes["a"], nodes["b"], nodes["liar"]
    liar.miner = wallets["miner2"].hotkey.ss58_address
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    a.serve(live_server)
    url = live_server(liar_serving(liar, PADDINGS[reason]))
    electorate = [Peer(b.hotkey, None, 1.0), Peer(a.hotkey, a.url, 1.0),
                  Peer(liar.hotkey, url, 1.0)]
    loop = b.loop()
    try:
        for _ in range(3):
            loop.round(electorate)
    finally:
        loop.fetcher.close()
    # nothing of the liar is stored (the old code kept one padded page per round, ~40
    # copies of a row for the one row stored from it); the honest peer's row is
    assert kept(b, liar.hotkey) == (0, 0, 0)
    assert kept(b, a.hotkey)[0] == 1
    assert b.status.pages[(liar.hotkey, reason)] == 3  # one refused page a round
    assert b.status.refused(liar.hotkey) == 3
    with b.store.session() as s:
        assert s.get(AgreementPeer, liar.hotkey).last_error.startswith(f"refused ({reason})")


def test_a_validator_s_kept_pages_stay_within_their_byte_bound(nodes, wallets, live_server):
    """Pages of one new run and the same 30 runs again each time: every page moves those 30
    rows to itself, so the one before is kept for its one new run alone. The bytes of the
    pages kept stay within max_rows_per_peer x SIGNED_BYTES_PER_ROW; the page past it is
    refused as `page_bytes` (still checked for equivocation)."""
    a, b, liar = nodes["a"], nodes["b"], nodes["liar"]
    liar.miner = wallets["miner2"].hotkey.ss58_address
    add_scored(a.store, name="X", miner=wallets["miner1"].hotkey.ss58_address, block=1,
               bpb=1.0)
    a.serve(live_server)
    fillers = [run(liar.miner, f"filler {k}") for k in range(30)]
    url = live_server(liar_serving(liar, lambda n, row: fillers))
    electorate = [Peer(b.hotkey, None, 1.0), Peer(a.hotkey, a.url, 1.0),
                  Peer(liar.hotkey, url, 1.0)]
    loop = b.loop(max_rows_per_peer=40)
    bound = 40 * SIGNED_BYTES_PER_ROW
    try:
        loop.round(electorate)
    finally:
        loop.fetcher.close()
    rows, pages, size = kept(b, liar.hotkey)
    assert 0 < size <= bound
    assert pages >= 2  # pages of ~30 kB each, kept for one row: the bound stops them
    assert b.status.pages[(liar.hotkey, "page_bytes")] == 1
    assert rows == 30 + pages  # the 60 runs and each kept page's own new run
    assert kept(b, a.hotkey)[0] == 1
