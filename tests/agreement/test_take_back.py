"""A validator cannot take back or revise a measurement it published by naming another
miner in between (real wallets, real servers on 127.0.0.1, real SQLite stores): the row it
first signed stands and the conflicting pages are a proof. An honest validator whose run
is taken over by an earlier committer moves its row to that miner with no proof."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from agreement_kit import NETUID, add_scored, digest_of, electorate_of, signed_page
from bittensor import http_auth
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import select

from prism_challenge.agreement.bundles import BundleFetcher
from prism_challenge.agreement.equivocation import check_proof, excluded
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.agreement.signed import PageInvalid, Signed, signed_headers
from prism_challenge.agreement.sync import store_page
from prism_challenge.agreement.wire import (
    MEASUREMENTS_PATH,
    MeasurementRow,
    MeasurementsPage,
    target,
)
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import (
    Equivocation,
    PeerMeasurement,
    Score,
    Submission,
    Verification,
)


def _measured_by(node, b, live_server, *, miner: str, bpb: float) -> list:
    """`node` scored and verified Y for `miner` and serves it; b has synced it once.
    Returns b's electorate (itself and `node`). Its clock runs a minute ahead, so a row
    `_serve_as` changes (a new committer moves its change time to now) is served at once,
    past the serving lag."""
    add_scored(node.store, name="Y", miner=miner, block=5, bpb=bpb)
    node.serve(live_server, clock=lambda: time.time() + 60)
    electorate = electorate_of(b, [node])
    b.sync(electorate)
    assert _row_of(b, node.hotkey, digest_of("Y")) == (miner, bpb, True)
    return electorate


def _serve_as(node, digest: str, *, miner: str, block: int = 5, bpb: float | None = None,
              verified: bool = True) -> None:
    """What `node` serves of the run `digest` from now on: its committer `miner` (committed
    at `block`), and (a liar's edit) another bpb or its replay verdict dropped."""
    with node.store.session() as s:
        sub = s.scalars(select(Submission).where(Submission.digest == digest)).one()
        sub.hotkey, sub.block = miner, block
        if bpb is not None:
            s.get(Score, sub.id).bpb = bpb
        if not verified:
            s.query(Verification).filter(Verification.submission_id == sub.id).delete()


def _row_of(node, validator: str, digest: str) -> tuple:
    with node.store.session() as s:
        row = s.scalars(select(PeerMeasurement).where(
            PeerMeasurement.validator == validator, PeerMeasurement.digest == digest)).one()
        return row.miner_hotkey, row.bpb, row.verified_at is not None


def test_a_verified_run_cannot_be_taken_back_through_another_miner(nodes, wallets,
                                                                    live_server):
    """Before: (1) Y verified at 0.98 under miner O, (2) Y under miner X, unverified,
    (3) Y under O again, unverified at 1.05: each compared only with the row of the same
    miner stored, all three stored, no proof, b holding O unverified at 1.05."""
    o, x = (wallets[n].hotkey.ss58_address for n in ("miner2", "miner1"))
    liar, b = nodes["liar"], nodes["b"]
    y = digest_of("Y")
    electorate = _measured_by(liar, b, live_server, miner=o, bpb=0.98)

    _serve_as(liar, y, miner=x, verified=False)  # the verdict dropped, under another miner
    _, status = b.sync(electorate)
    assert status.equivocations == {liar.hotkey: 1}
    _serve_as(liar, y, miner=o, bpb=1.05, verified=False)  # back to O, revised
    b.sync(electorate)

    assert _row_of(b, liar.hotkey, y) == (o, 0.98, True)  # what it signed first stands
    with b.store.session() as s:
        (proof,) = s.scalars(select(Equivocation)).all()
        assert (proof.validator, proof.digest) == (liar.hotkey, y)
        assert excluded(s) == {liar.hotkey}
        # the proof is one every peer accepts: pages of O verified and of X unverified
        checked = check_proof(proof.proof, netuid=NETUID, own_hotkey=b.hotkey,
                              now_ns=time.time_ns(), skew_s=60, max_bytes=1_000_000)
    assert checked[:2] == (liar.hotkey, y)


def test_an_honest_row_moves_to_the_earlier_committer_without_proof(nodes, wallets,
                                                                     live_server):
    """The honest take-over: a held Y for X (block 5); O committed it at block 2 and takes
    the run over with the same score and verdict, so b's row of a follows to O."""
    o, x = (wallets[n].hotkey.ss58_address for n in ("miner2", "miner1"))
    a, b = nodes["a"], nodes["b"]
    y = digest_of("Y")
    electorate = _measured_by(a, b, live_server, miner=x, bpb=0.99)
    _serve_as(a, y, miner=o, block=2)
    _, status = b.sync(electorate)

    assert _row_of(b, a.hotkey, y) == (o, 0.99, True)
    assert status.equivocations == {}
    with b.store.session() as s:
        assert s.scalars(select(Equivocation)).all() == [] and excluded(s) == set()


def _signed(wallet, rows: list[MeasurementRow], n: int) -> tuple[MeasurementsPage, Signed]:
    """A page of `rows` signed by `wallet` as its answer to the n-th request."""
    page = MeasurementsPage(validator=wallet.hotkey.ss58_address, netuid=NETUID,
                            scoring_version=SCORING_VERSION, rows=rows, next=f"{n}:1")
    body, asked = page.model_dump_json().encode(), target(f"{n}:0", 200)
    headers = http_auth.sign(wallet, method="GET", path=asked, body=body)
    time.sleep(0.002)  # each page signed at a later nanosecond
    return page, Signed(asked, signed_headers(headers), body)


def _verified_then_revised(wallets, digest: str) -> tuple[MeasurementRow, MeasurementRow]:
    """Run `digest` of miner2 verified at 0.98, and the same run revised: unverified, 1.05."""
    first = MeasurementRow(miner_hotkey=wallets["miner2"].hotkey.ss58_address, digest=digest,
                           block=2, bpb=0.98, heldout_delta=0.5, eligible=True,
                           verified=True, measured_at=100.0, verified_at=101.0,
                           corpus="demo", scoring_version=SCORING_VERSION)
    return first, first.model_copy(update={"bpb": 1.05, "verified": False,
                                           "verified_at": None})


@pytest.mark.parametrize("between, proven", [
    ({"corpus": "other"}, True),  # another corpus, the verdict dropped: a proof
    ({"scoring_version": "0.0.1"}, True),  # a row of another version: never stored
    (None, True),  # the revised row second in the page of the first one: that page a proof
], ids=["corpus", "version", "second_row"])
def test_a_row_cannot_be_revised_through_another_corpus_version_or_a_second_row(
        nodes, wallets, between, proven):
    """Before: a row of another corpus or scoring version in between, or a second row for
    the run in one page, replaced O verified at 0.98 with O unverified at 1.05, no proof
    (and later, the second row was skipped with no proof kept)."""
    liar, b = wallets["liar"], nodes["b"]
    y = digest_of("Y")
    first, revised = _verified_then_revised(wallets, y)
    if between is None:
        pages = [[first], [first, revised]]
    else:
        pages = [[first], [revised.model_copy(update=between)], [revised]]
    proofs: list = []
    with b.store.session() as s:
        for n, rows in enumerate(pages):
            page, signed = _signed(liar, rows, n)
            store_page(s, page, signed=signed, proofs=proofs)
        row = s.scalars(select(PeerMeasurement)).one()
        assert (row.bpb, row.verified_at, row.corpus) == (0.98, 101.0, "demo")
        assert proofs == ([(liar.hotkey.ss58_address, y)] if proven else [])


def test_a_page_with_two_conflicting_rows_of_one_run_is_a_proof_every_validator_accepts(
        nodes, wallets, live_server):
    """The liar serves b one page holding Y verified at 0.98 and Y unverified at 1.05. b
    stores the first row, keeps the page twice as a proof and excludes the liar; c, which
    never reached the liar, fetches b's proofs, checks the page again and excludes the liar
    too. Before: the second row was skipped, no proof kept, the liar counted everywhere.
    The proof is served to an asker that checks one-page proofs (`?one_page=true`) only: a
    validator older than them reads each copy's first row, finds no conflict and would
    count the proof against b (`proof_no_conflict`) every round; it asks plainly and gets
    none (before: the one-page proof to every asker)."""
    liar, b, c = wallets["liar"], nodes["b"], nodes["c"]
    y = digest_of("Y")
    first, revised = _verified_then_revised(wallets, y)
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request) -> Response:
        return signed_page(liar, request, [first, revised], next="1:1", more=False)

    url = live_server(app)
    _, status = b.sync([Peer(b.hotkey, None, 1.0), Peer(liar.hotkey.ss58_address, url, 1.0)])
    assert status.equivocations == {liar.hotkey.ss58_address: 1}
    assert _row_of(b, liar.hotkey.ss58_address, y) == (first.miner_hotkey, 0.98, True)
    with b.store.session() as s:
        (proof,) = s.scalars(select(Equivocation)).all()
        assert excluded(s) == {liar.hotkey.ss58_address}
        pages = proof.proof["pages"]
    assert proof.digest == y and pages[0] == pages[1]
    b.serve(live_server)
    _, status = c.sync(electorate_of(c, [b]) + [Peer(liar.hotkey.ss58_address, None, 1.0)])
    assert status.equivocations == {liar.hotkey.ss58_address: 1}
    with c.store.session() as s:
        assert excluded(s) == {liar.hotkey.ss58_address}
    assert httpx.get(f"{b.url}/v1/equivocations", timeout=10).json() == {
        "proofs": [], "in_force": []}
    answer = httpx.get(f"{b.url}/v1/equivocations?one_page=true", timeout=10).json()
    assert [p["validator"] for p in answer["in_force"]] == [liar.hotkey.ss58_address]
    (served,) = answer["proofs"]
    validator, digest, one, other = check_proof(
        served, netuid=NETUID, own_hotkey=c.hotkey, now_ns=time.time_ns(), skew_s=60,
        max_bytes=1_000_000)
    assert (validator, digest, one) == (liar.hotkey.ss58_address, y, other)
    # the dashboard's line points where the proof is served, one-page proofs included
    board = httpx.get(f"{b.url}/dashboard", timeout=10).text
    link = re.search(r"proof at (/v1/equivocations\S*)\)", board).group(1)
    assert httpx.get(f"{b.url}{link}", timeout=10).json()["proofs"] == [served]
    # the same page twice is no proof when it holds one row of the run, or two that agree
    for rows in ([first], [first, first.model_copy(update={"miner_hotkey": c.hotkey})]):
        single, signed = _signed(liar, rows, 9)
        with pytest.raises(PageInvalid, match="agree"):
            check_proof({"validator": liar.hotkey.ss58_address, "digest": y,
                         "pages": [signed.to_json(), signed.to_json()]}, netuid=NETUID,
                        own_hotkey=c.hotkey, now_ns=time.time_ns(), skew_s=60,
                        max_bytes=1_000_000)


def test_a_take_over_that_only_renames_the_miner_moves_no_credit(nodes, wallets, live_server,
                                                                 tmp_path):
    """X committed Y first and L copied the digest on chain later. The liar re-signs its
    row of Y under L, every value kept: the shape of an honest take-over, so it is stored
    and proves nothing. It steals no credit: b ranks Y as the miner it holds Y for (whose
    upload or fetch was checked against the chain commitment and its precedence), on the
    honest measurements, while the liar's row now counts for no run b holds (as if it had
    withheld it, which the quorum over the whole permitted stake already bounds); L's claim
    is not fetched (X committed first) and L ranks nothing. So such a row is not refused
    (an honest take-over cannot be told from it without the chain, and needs none)."""
    x, copier = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c, liar = (nodes[n] for n in ("a", "b", "c", "liar"))
    ledger = LocalLedger(tmp_path / "ledger.db", b.metagraph)
    y = digest_of("Y")
    first = ledger.commit(wallets["miner1"], commitment_value(x, y))
    later = ledger.commit(wallets["miner2"], commitment_value(copier, y))
    assert first.block < later.block
    for node, bpb in ((a, 1.0), (b, 1.0), (c, 1.0), (liar, 0.5)):
        add_scored(node.store, name="Y", miner=x, block=first.block, bpb=bpb)
        if node is not b:
            node.serve(live_server, clock=lambda: time.time() + 60)
    electorate = electorate_of(b, [a, c, liar])
    b.sync(electorate)
    assert _row_of(b, liar.hotkey, y) == (x, 0.5, True)

    _serve_as(liar, y, miner=copier, block=later.block)  # every value kept, L named
    _, status = b.sync(electorate)
    assert _row_of(b, liar.hotkey, y) == (copier, 0.5, True)
    assert status.equivocations == {}
    with b.store.session() as s:
        ranked = ranked_entries(s, b.settings, b.hotkey)
    assert [(e.digest, e.hotkey, e.bpb) for e in ranked.entries] == [(y, x, 1.0)]

    fetcher = BundleFetcher(b.store, ledger, b.metagraph, b.wallet,
                            policy=IntakePolicy.from_settings(b.settings), settle_s=0.0,
                            timeout_s=3.0)
    try:
        assert fetcher.missing() == {(y, copier): [liar.hotkey]}
        assert fetcher.round(electorate[1:]) == 0 and fetcher.fetched == 0
    finally:
        fetcher.close()
    with b.store.session() as s:
        held = s.scalars(select(Submission).where(Submission.digest == y)).all()
        assert [(sub.hotkey, sub.block) for sub in held] == [(x, first.block)]
        assert [e.hotkey for e in ranked_entries(s, b.settings, b.hotkey).entries] == [x]


def test_a_one_page_proof_from_a_validator_serving_it_to_every_asker_is_accepted(
        nodes, wallets, live_server):
    """A validator that serves its one-page proofs to every asker (since those proofs, and
    before they were asked for): c, which never reached the liar, asks it with
    `one_page=true`, accepts the proof it serves and excludes the liar."""
    liar, c = wallets["liar"], nodes["c"]
    y = digest_of("Y")
    first, revised = _verified_then_revised(wallets, y)
    _, signed = _signed(liar, [first, revised], 1)
    one_page = {"validator": liar.hotkey.ss58_address, "digest": y,
                "pages": [signed.to_json(), signed.to_json()]}
    asked: list[str] = []
    app = FastAPI()

    @app.get("/v1/equivocations")
    def proofs(request: Request) -> dict:
        asked.append(request.url.query)
        return {"proofs": [one_page]}

    url = live_server(app)
    peer = wallets["a"].hotkey.ss58_address  # a permitted validator serving that answer
    _, status = c.sync([Peer(c.hotkey, None, 1.0), Peer(peer, url, 1.0),
                        Peer(liar.hotkey.ss58_address, None, 1.0)])
    assert asked == ["one_page=true"]
    assert status.equivocations == {liar.hotkey.ss58_address: 1}
    assert status.refused(peer) == 0
    with c.store.session() as s:
        assert excluded(s) == {liar.hotkey.ss58_address}
        (proof,) = s.scalars(select(Equivocation)).all()
        assert (proof.validator, proof.digest) == (liar.hotkey.ss58_address, y)
