"""Rows of runs that do not exist cannot keep a real run's bundle from being fetched: only
runs measured by permitted validators not excluded for equivocation are tried, and each
measuring validator gets its turn every poll (real servers on 127.0.0.1, real stores)."""

from __future__ import annotations

import hashlib

from agreement_kit import LONG_AGO, add_scored, electorate_of
from fixture_bundles import bundle as fixture_bundle
from sqlalchemy import select

from prism_challenge.agreement.bundles import MAX_PER_ROUND, BundleFetcher
from prism_challenge.agreement.peers import Peer
from prism_challenge.bundle import Bundle
from prism_challenge.chain.ledger import LocalLedger
from prism_challenge.chain.subnet import commitment_value
from prism_challenge.intake.policy import IntakePolicy
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Equivocation, PeerMeasurement, Submission


def junk(store, validator: str, miner: str, n: int) -> list[str]:
    """`n` rows of `validator` for runs that do not exist; their digests."""
    digests = [hashlib.sha256(f"{validator} junk {i}".encode()).hexdigest() for i in range(n)]
    with store.session() as s:
        for digest in digests:
            s.add(PeerMeasurement(validator=validator, digest=digest, miner_hotkey=miner,
                                  block=1, bpb=0.5, heldout_delta=0.0, eligible=True,
                                  measured_at=LONG_AGO, corpus="demo",
                                  scoring_version=SCORING_VERSION, fetched_at=LONG_AGO))
    return digests


def test_junk_rows_of_one_validator_do_not_starve_a_real_runs_bundle(
        nodes, wallets, live_server, tmp_path):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, c, d, liar = nodes["a"], nodes["c"], nodes["b"], nodes["liar"]
    ledger = LocalLedger(tmp_path / "ledger.db", a.metagraph)
    y = Bundle(fixture_bundle("tiny"))
    ledger.commit(wallets["miner2"], commitment_value(m2, y.digest))
    add_scored(a.store, name="Y", miner=m2, block=5, bpb=0.99, bundle=y)
    a.serve(live_server)
    a.sync(electorate_of(a, [d]))  # a learns d as a permitted validator
    # stored before a's real row: 40 junk rows of the liar (permitted, stake as large as
    # a's), 10 of c (excluded for equivocation) and 10 of a validator without a permit
    liar_junk = junk(d.store, liar.hotkey, m1, 40)
    excluded_junk = junk(d.store, c.hotkey, m1, 10)
    unpermitted_junk = junk(d.store, wallets["mallory"].hotkey.ss58_address, m1, 10)
    with d.store.session() as s:
        s.add(Equivocation(validator=c.hotkey, digest=excluded_junk[0], proof={},
                           signed_ns=0, until=4e9, found_at=LONG_AGO))
    clock = [1_000_000.0]
    fetcher = BundleFetcher(d.store, ledger, d.metagraph, d.wallet,
                            policy=IntakePolicy.from_settings(d.settings), settle_s=0.0,
                            timeout_s=5, clock=lambda: clock[0])
    electorate = [Peer(liar.hotkey, None, 1.0), Peer(a.hotkey, a.url, 1.0),
                  Peer(c.hotkey, None, 1.0)]
    try:
        d.sync(electorate_of(d, [a]))  # a's real row of Y, after all the junk
        assert len(fetcher.missing()) == 61
        stored = fetcher.round(electorate)
        clock[0] += 60
        tried_first = set(fetcher.retry_at)
        stored += fetcher.round(electorate)
    finally:
        fetcher.close()
    # before: the first 8 rows in row order, all junk, every poll (Y never fetched)
    assert (stored, fetcher.fetched) == (1, 1)
    with d.store.session() as s:
        assert s.scalar(select(Submission.hotkey).where(Submission.digest == y.digest)) == m2
    # the liar's junk had the other turns: 7 the first poll, 8 the next, never c's (excluded)
    # nor the unpermitted validator's
    assert tried_first <= set(liar_junk) and len(tried_first) == MAX_PER_ROUND - 1
    assert set(fetcher.retry_at) <= set(liar_junk)
    assert len(fetcher.retry_at) == 2 * MAX_PER_ROUND - 1
    assert not set(fetcher.retry_at) & set(excluded_junk + unpermitted_junk)
