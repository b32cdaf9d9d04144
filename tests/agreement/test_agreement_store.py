"""The agreement's SQL on both backends (SQLite and a real PostgreSQL server): own rows in
change order behind a cursor, a peer page upserted once per (validator, digest), and the
aggregate ranking read back."""

from __future__ import annotations

from agreement_kit import LONG_AGO, add_scored, digest_of, settings
from bittensor.sp_core import Keypair
from sqlalchemy import select

from prism_challenge.agreement.own import own_rows
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.agreement.sync import _mark, store_page
from prism_challenge.agreement.wire import MeasurementRow, MeasurementsPage, parse_cursor
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import PeerMeasurement, Verification

KEYS = [Keypair.create_from_seed(bytes([i + 20]) * 32).ss58_address for i in range(4)]
OWN, PEER, MINER, OTHER = KEYS


def row(name: str, bpb: float, *, verified_at: float | None = LONG_AGO + 2) -> MeasurementRow:
    return MeasurementRow(miner_hotkey=MINER, digest=digest_of(name), block=1, bpb=bpb,
                          heldout_delta=0.4, eligible=True, verified=verified_at is not None,
                          measured_at=LONG_AGO, verified_at=verified_at, corpus="demo",
                          scoring_version=SCORING_VERSION)


def test_own_rows_peer_pages_and_the_aggregate_on_both_backends(any_store):
    first = add_scored(any_store, name="A", miner=MINER, block=1, bpb=1.0, verified=False)
    add_scored(any_store, name="B", miner=MINER, block=2, bpb=0.9, at=LONG_AGO + 10)
    with any_store.session() as s:
        rows = own_rows(s, limit=10, now=LONG_AGO + 100)
        assert [(r.row.digest, r.row.verified) for r in rows] == [
            (digest_of("A"), False), (digest_of("B"), True)]
        assert own_rows(s, now=LONG_AGO + 15) == rows[:1]  # B changed at +11: held back
        after = parse_cursor(f"{int(rows[0].changed_at * 1e6)}:{rows[0].submission_id}")
        assert [r.row.digest for r in own_rows(s, after=after)] == [digest_of("B")]
        s.add(Verification(submission_id=first, status="passed", attempts=1,
                           created_at=LONG_AGO + 20, updated_at=LONG_AGO + 20))
    with any_store.session() as s:
        assert [(r.row.digest, r.row.verified) for r in own_rows(s, after=after)] == [
            (digest_of("B"), True), (digest_of("A"), True)]  # A changed again, after B

    page = MeasurementsPage(validator=PEER, netuid=7, rows=[row("A", 1.2), row("B", 0.8)])
    with any_store.session() as s:
        assert store_page(s, page) == 2
        assert store_page(s, page.model_copy(update={"rows": [row("A", 1.1)]})) == 1
        _mark(s, Peer(OWN, None, 1.0), ok_at=LONG_AGO, error=None)
        _mark(s, Peer(PEER, "http://127.0.0.1:1", 1.0), ok_at=LONG_AGO, error=None)
    with any_store.session() as s:
        stored = {r.digest: r.bpb for r in s.scalars(select(PeerMeasurement))}
        assert stored == {digest_of("A"): 1.1, digest_of("B"): 0.8}
        ranked = ranked_entries(s, settings(peer_stale_s=10**6), OWN, now=LONG_AGO + 1000)
    assert ranked.shared
    # two equal stakes: the lower of the two measurements; both passed on both
    assert {e.digest: (e.bpb, e.verified) for e in ranked.entries} == {
        digest_of("A"): (1.0, True), digest_of("B"): (0.8, True)}
