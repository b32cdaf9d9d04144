"""Relaying between validators on 127.0.0.1 (real wallets, real servers, real stores):
a validator that serves different signed pages to different peers is proven to equivocate
on every honest validator and left out of all their electorates; a run whose upload missed
one of four validators is fetched from a peer, checked against the miner's commitment, and
ranked there like everywhere else."""

from __future__ import annotations

import time

import httpx
import pytest
from agreement_kit import LONG_AGO, NETUID, Node, add_scored, digest_of, electorate_of, settings
from bittensor import http_auth
from fixture_bundles import bundle as fixture_bundle
from sqlalchemy import select

from prism_challenge.agreement.bundles import BundleFetcher
from prism_challenge.agreement.equivocation import check_proof, excluded
from prism_challenge.agreement.fetch import PeerFetcher
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.agreement.signed import PageInvalid
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import PeerSync, store_page
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage import Store
from prism_challenge.storage.tables import (
    Equivocation,
    PeerMeasurement,
    Score,
    Submission,
    Verification,
)
from prism_challenge.weights.plan import load_plan

# Y as each honest validator measured it; X stands at 1.000 and the dethrone margin (0.5%)
# needs Y <= 0.995: the honest median (0.996) keeps X, the liar's low 0.980 would make a
# validator that counts it rank Y at 0.993
HONEST_Y = {"a": 0.993, "b": 0.997, "c": 0.996}


def plan_of(node):
    with node.store.session() as s:
        return load_plan(s, node.metagraph, node.settings, hotkey=node.hotkey)


def test_an_equivocation_is_proven_relayed_and_excluded_on_every_honest_validator(
        nodes, wallets, live_server, tmp_path):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    honest = [nodes[n] for n in ("a", "b", "c")]
    liar_low = nodes["liar"]  # what a and b are shown
    liar_high = Node("liar", wallets["liar"], Store(f"sqlite:///{tmp_path / 'liar2'}.db"),
                     settings(), liar_low.metagraph)  # the same hotkey, shown to c
    for node, y in [(n, HONEST_Y[n.name]) for n in honest] + [(liar_low, 0.980),
                                                              (liar_high, 1.020)]:
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=y)
        node.serve(live_server)
    shown = {"a": liar_low, "b": liar_low, "c": liar_high}

    def electorate(node):
        return electorate_of(node, [o for o in honest if o is not node] + [shown[node.name]])

    first = {n.name: n.sync(electorate(n))[1] for n in honest}
    # a synced first and holds only the low page: it ranks Y on the liar's lie; c saw both
    # pages (the high one from the liar, the low one relayed by a) and has the proof
    assert plan_of(honest[0]).leader.hotkey == m2
    assert first["c"].equivocations == {liar_low.hotkey: 1}
    second = {n.name: n.sync(electorate(n))[1] for n in honest}
    assert second["a"].equivocations == second["b"].equivocations == {liar_low.hotkey: 1}

    for node in honest:
        with node.store.session() as s:
            proofs = s.scalars(select(Equivocation)).all()
            assert [(p.validator, p.digest) for p in proofs] == [(liar_low.hotkey,
                                                                 digest_of("Y"))]
            assert excluded(s) == {liar_low.hotkey}
            ranked = ranked_entries(s, node.settings, node.hotkey)
        assert "1 excluded for equivocating" in ranked.note
        plan = plan_of(node)  # the honest median 0.996 everywhere: X keeps the lead
        assert (plan.leader.hotkey, plan.leader.bpb) == (m1, 1.000)
        assert {e.digest: e.bpb for e in ranked.entries}[digest_of("Y")] == 0.996
        served = httpx.get(f"{node.url}/v1/equivocations", timeout=10).json()
        validator, digest, a, b = check_proof(
            served["proofs"][0], netuid=NETUID, own_hotkey=node.hotkey,
            now_ns=time.time_ns(), skew_s=60, max_bytes=1_000_000)
        assert (validator, digest) == (liar_low.hotkey, digest_of("Y"))
        assert a.body != b.body
        page = httpx.get(f"{node.url}/dashboard", timeout=10).text
        assert "signed two different measurements" in page and digest_of("Y")[:16] in page

    # anyone re-checks a proof: one with a page altered after signing is refused
    proof = httpx.get(f"{honest[0].url}/v1/equivocations", timeout=10).json()["proofs"][0]
    forged = {**proof, "pages": [proof["pages"][0], proof["pages"][0]]}
    with pytest.raises(PageInvalid, match="agree"):
        check_proof(forged, netuid=NETUID, own_hotkey=honest[0].hotkey,
                    now_ns=time.time_ns(), skew_s=60, max_bytes=1_000_000)
    liar_high.store.close()


def test_a_run_whose_upload_missed_one_of_four_validators_is_fetched_and_ranked_there(
        nodes, wallets, live_server, tmp_path):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    ledger = LocalLedger(tmp_path / "ledger.db", nodes["a"].metagraph)
    y = Bundle(fixture_bundle("tiny"))
    committed = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    trio = [nodes[n] for n in ("a", "b", "c")]
    d = nodes["liar"]  # an honest fourth validator here: the upload of Y never reached it
    for node, y_bpb in zip(trio, (0.990, 0.992, 0.994), strict=True):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=committed.block, bpb=y_bpb,
                   bundle=y)
    add_scored(d.store, name="X", miner=m1, block=1, bpb=1.000)
    four = trio + [d]
    for node in four:
        node.serve(live_server)
    for node in four:  # d does not fetch bundles yet: the node before this change
        node.sync(electorate_of(node, [o for o in four if o is not node]))
    assert {n.name: plan_of(n).leader.hotkey for n in four} == {
        "a": m2, "b": m2, "c": m2, "liar": m1}  # d keeps X for good

    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=5)
    try:
        d.sync(electorate_of(d, trio), bundles=fetcher)
    finally:
        fetcher.close()
    assert fetcher.fetched == 1
    with d.store.session() as s:
        row = s.scalars(select(Submission).where(Submission.digest == y.digest)).one()
        assert (row.hotkey, row.status, row.block, Bundle.from_wire(row.bundle).digest) == (
            m2, "received", committed.block, y.digest)  # queued for the gates like an upload
    plans = [plan_of(n) for n in four]
    assert {(p.leader.hotkey, p.leader.bpb) for p in plans} == {(m2, 0.992)}
    assert len({(tuple(p.uids), tuple(p.weights_u16)) for p in plans}) == 1


def _copy_reached_d(nodes, wallets, live_server, tmp_path, **serve_d):
    """Bundle Y committed by miner2, then by miner1 (a copier): a, b and c scored it as
    miner2's, d (honest here) as miner1's, the copier's upload alone having reached it.
    All four serve (d with `serve_d`) and know each other as permitted validators; returns
    (miner1, miner2, Y, [a, b, c], d, miner2's commitment, miner1's, and a BundleFetcher
    of d)."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    ledger = LocalLedger(tmp_path / "ledger.db", nodes["a"].metagraph)
    y = Bundle(fixture_bundle("tiny"))
    original = ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    copied = ledger.commit(wallets["miner1"], commitment_value(m1, y.digest))
    assert copied.block > original.block
    trio = [nodes[n] for n in ("a", "b", "c")]
    d = nodes["liar"]
    for node, y_bpb in zip(trio, (0.990, 0.992, 0.994), strict=True):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=original.block, bpb=y_bpb, bundle=y)
    add_scored(d.store, name="X", miner=m1, block=1, bpb=1.000)
    add_scored(d.store, name="Y", miner=m1, block=copied.block, bpb=0.992, bundle=y)
    four = trio + [d]
    for node in four:
        node.serve(live_server, **({} if node is not d else serve_d))
    for node in four:  # each learns the others as permitted validators (bundles are theirs)
        node.sync(electorate_of(node, [o for o in four if o is not node]))
    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=5)
    return m1, m2, y, trio, d, original, copied, fetcher


def test_a_copy_held_for_a_later_committer_passes_to_the_original_peers_know(
        nodes, wallets, live_server, tmp_path):
    """The original's upload missed d, where a copier's later commitment of the same bundle
    landed: the peer loop fetches the original's claim, the row passes to the earlier
    committer (as an upload would), and a later claim never takes it back or costs a fetch."""
    m1, m2, y, trio, d, original, copied, fetcher = _copy_reached_d(
        nodes, wallets, live_server, tmp_path)
    try:
        d.sync(electorate_of(d, trio), bundles=fetcher)
        assert fetcher.fetched == 1
        with d.store.session() as s:
            row = s.scalars(select(Submission).where(Submission.digest == y.digest)).one()
            assert (row.hotkey, row.block) == (m2, original.block)  # the earlier committer's
            # a peer's stale row of the copier's claim: no fetch, no change
            s.add(PeerMeasurement(validator="a-stale-peer", digest=y.digest,
                                  miner_hotkey=m1, block=copied.block, bpb=0.9,
                                  heldout_delta=0.5, eligible=True, measured_at=LONG_AGO,
                                  corpus="demo", scoring_version=SCORING_VERSION,
                                  fetched_at=LONG_AGO))
        fetcher.retry_at.clear()
        assert list(fetcher.missing()) == [(y.digest, m1)]
        asked, get = [], fetcher._get
        fetcher._get = lambda peer, digest, *more: asked.append(digest) or get(peer, digest,
                                                                                 *more)
        # (the stale peer counts as permitted: only runs permitted validators measured are
        # fetched, and the claim is what keeps this one from costing a fetch)
        stale_peer = Peer("a-stale-peer", None, 1.0)
        assert fetcher.round(electorate_of(d, trio) + [stale_peer]) == 0 and asked == []
        assert y.digest in fetcher.retry_at  # it was considered, then passed over
    finally:
        fetcher.close()
    with d.store.session() as s:
        row = s.scalars(select(Submission).where(Submission.digest == y.digest)).one()
        assert (row.hotkey, row.block) == (m2, original.block)


def test_a_peer_that_paged_past_a_row_sees_it_pass_to_the_earlier_committer(
        nodes, wallets, live_server, tmp_path):
    """A peer read d's row of Y under the copier before d learnt of the original; when the
    row passes to the earlier committer it is served again after that peer's cursor, so
    the peer's next round stores it under the original's hotkey, every value kept."""
    # d's clock runs a minute ahead: the row, changed just now, is past the serving lag
    m1, m2, y, trio, d, original, copied, fetcher = _copy_reached_d(
        nodes, wallets, live_server, tmp_path, clock=lambda: time.time() + 60)
    a = trio[0]
    cfg = a.settings.agreement
    a_fetcher = PeerFetcher(own_hotkey=a.hotkey, netuid=NETUID, timeout_s=5,
                            max_page_bytes=cfg.max_page_bytes, max_age_s=cfg.signature_max_age_s)
    a_loop = PeerSync(a.store, a_fetcher, AgreementStatus(), cfg.page_size, netuid=NETUID,
                      relay=True, skew_s=cfg.signature_max_age_s)  # its cursors kept

    def a_holds_of_d():
        with a.store.session() as s:
            row = s.scalars(select(PeerMeasurement).where(
                PeerMeasurement.validator == d.hotkey,
                PeerMeasurement.digest == y.digest)).one()
            return row.miner_hotkey, row.block, row.bpb, row.measured_at, row.verified_at

    try:
        assert a_loop.round(electorate_of(a, [d]))[d.hotkey] == 2  # X and Y, the copier's
        before = a_holds_of_d()
        assert before[:3] == (m1, copied.block, 0.992)
        try:
            d.sync(electorate_of(d, trio), bundles=fetcher)  # the original's claim: taken over
        finally:
            fetcher.close()
        with d.store.session() as s:
            assert s.scalars(select(Submission.hotkey).where(
                Submission.digest == y.digest)).one() == m2
        stored = a_loop.round(electorate_of(a, [d]))
    finally:
        a_fetcher.close()
    # before: the row's change time stayed where a's cursor had passed: nothing was served
    # again, and a kept the copier's row of d for good
    assert stored[d.hotkey] == 1
    assert a_holds_of_d() == (m2, original.block, 0.992, before[3], before[4])
    with a.store.session() as s:
        assert s.scalars(select(Equivocation)).all() == []


def test_bundles_are_served_to_permitted_validators_only(nodes, wallets, live_server):
    y = Bundle(fixture_bundle("tiny"))
    a = nodes["a"]
    add_scored(a.store, name="Y", miner=wallets["miner2"].hotkey.ss58_address, block=2,
               bpb=0.99, bundle=y)
    a.serve(live_server)
    got = httpx.get(f"{a.url}/v1/bundles/{y.digest}", timeout=10)
    assert (got.status_code, got.json()["rule"]) == (403, "PEER_AUTH")  # unsigned: refused
    path = f"/v1/bundles/{y.digest}"
    signed = http_auth.sign(wallets["miner1"], method="GET", path=path,
                            receiver_ss58=a.hotkey)
    got = httpx.get(f"{a.url}{path}", headers=signed, timeout=10)
    assert (got.status_code, got.json()["rule"]) == (403, "PEER_AUTH")  # a miner: refused
    a.sync(electorate_of(a, [nodes["b"]]))  # a now knows b as a permitted validator
    signed = http_auth.sign(wallets["b"], method="GET", path=path, receiver_ss58=a.hotkey)
    got = httpx.get(f"{a.url}{path}", headers=signed, timeout=10)
    assert got.status_code == 200 and Bundle.from_wire(got.content).digest == y.digest


def _pages_around(a, b, live_server, change):
    """The signed page `a` serves `b` before and after `change(session)` of a's store."""
    a.serve(live_server)
    fetcher = PeerFetcher(own_hotkey=b.hotkey, netuid=NETUID, timeout_s=5,
                          max_page_bytes=1_000_000, max_age_s=60)
    peer = Peer(a.hotkey, a.url, 1.0)
    try:
        before = fetcher.fetch(peer, None, 100)
        with a.store.session() as s:
            change(s)
        return before, fetcher.fetch(peer, None, 100)
    finally:
        fetcher.close()


def test_an_older_signed_page_relayed_late_changes_nothing_and_proves_nothing(
        nodes, wallets, live_server):
    """An honest row changes once its replay ends (here: it fails, so the run is no longer
    eligible); the earlier page, relayed after the later one, neither reverts it nor counts
    as equivocation (same bpb, held-out delta, scoring time and stream parts; eligibility
    only lost, in signing order)."""
    a, b = nodes["a"], nodes["b"]
    sid = add_scored(a.store, name="Y", miner=wallets["miner2"].hotkey.ss58_address,
                     block=2, bpb=0.99, verified=False)
    before, after = _pages_around(a, b, live_server, lambda s: s.add(Verification(
        submission_id=sid, status="failed", attempts=1, created_at=LONG_AGO + 5,
        updated_at=LONG_AGO + 5)))
    assert [r.eligible for r in before[0].rows] == [True]
    assert [r.eligible for r in after[0].rows] == [False]
    with b.store.session() as s:
        proofs: list = []
        store_page(s, after[0], signed=after[1], proofs=proofs)
        assert store_page(s, before[0], signed=before[1], proofs=proofs) == 0
        assert proofs == [] and s.scalars(select(Equivocation)).all() == []
        assert s.scalars(select(PeerMeasurement)).one().eligible is False


def _unverify(s, sid):
    s.get(Verification, sid).status = "queued"


def _make_eligible(s, sid):
    s.get(Score, sid).eligible = True


def _other_parts(s, sid):
    s.get(Score, sid).detail = {"stream_parts": [1.0, 1.1, 1.3]}


@pytest.mark.parametrize("step_back, verified, eligible", [
    (_unverify, True, True),  # a verified leader withdrawn from some peers
    (_make_eligible, False, False),  # a run failed here shown eligible again
    (_other_parts, True, True),  # other stream parts: another noise term in the dethrone rule
])
def test_a_later_page_that_takes_a_step_back_is_a_proof(nodes, wallets, live_server,
                                                        step_back, verified, eligible):
    """What follows from the replay moves one way; the stream parts never move. A validator
    whose later signed page unverifies a run, makes an ineligible run eligible or changes its
    stream parts signed what no honest one signs: the two pages are a proof, whichever of
    them reaches a peer first."""
    a, b, c = nodes["a"], nodes["b"], nodes["c"]
    sid = add_scored(a.store, name="Y", miner=wallets["miner2"].hotkey.ss58_address,
                     block=2, bpb=0.99, verified=verified, eligible=eligible,
                     parts=[1.0, 1.2, 1.1])
    first, second = _pages_around(a, b, live_server, lambda s: step_back(s, sid))
    assert first[0].rows[0] != second[0].rows[0]
    for node, order in ((b, (first, second)), (c, (second, first))):
        with node.store.session() as s:
            proofs: list = []
            for page, signed in order:
                store_page(s, page, signed=signed, proofs=proofs)
            assert proofs == [(a.hotkey, digest_of("Y"))]
            (stored,) = s.scalars(select(Equivocation)).all()
        check_proof(stored.proof, netuid=NETUID, own_hotkey=node.hotkey,
                    now_ns=time.time_ns(), skew_s=60, max_bytes=1_000_000)
