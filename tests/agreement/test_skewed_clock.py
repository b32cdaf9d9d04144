"""A peer's clock running ahead cannot hold its measurement back: what it claims is bounded
by the receiver's clock (never later than the row's arrival), and fetching the same page
again moves nothing. Real servers on 127.0.0.1, real wallets, real SQLite."""

from __future__ import annotations

import time

from agreement_kit import add_scored, electorate_of
from sqlalchemy import select

from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.storage.tables import PeerMeasurement

AHEAD = 3600.0  # a's clock runs an hour fast


def test_a_clock_running_ahead_does_not_delay_the_measurement_nor_move_it_on_refetch(
        nodes, wallets, live_server):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c = (nodes[n] for n in ("a", "b", "c"))
    for node in (a, b, c):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
    add_scored(a.store, name="Y", miner=m2, block=2, bpb=0.990, at=time.time() + AHEAD - 60)
    add_scored(b.store, name="Y", miner=m2, block=2, bpb=0.994)
    add_scored(c.store, name="Y", miner=m2, block=2, bpb=0.998)
    a.serve(live_server, clock=lambda: time.time() + AHEAD)  # its pages' signatures are fresh
    c.serve(live_server)

    before = time.time()
    stored_rows, status = b.sync(electorate_of(b, [a, c]))
    after = time.time()
    assert stored_rows == {a.hotkey: 2, c.hotkey: 2}, status.pages
    with b.store.session() as s:
        row = s.scalar(select(PeerMeasurement).where(PeerMeasurement.validator == a.hotkey,
                                                     PeerMeasurement.bpb == 0.990))
        stored = (row.measured_at, row.verified_at)
    assert before <= stored[0] <= after and before <= stored[1] <= after  # not an hour ahead

    settle = b.settings.agreement.settle_s
    with b.store.session() as s:
        early = ranked_entries(s, b.settings, b.hotkey, now=after + settle / 2).entries
        settled = ranked_entries(s, b.settings, b.hotkey, now=after + settle + 1).entries
    assert [e.hotkey for e in early] == [m1]  # b and c alone: 2 of 3, not above 2/3
    assert [(e.hotkey, e.bpb, e.verification) for e in settled] == [
        (m1, 1.000, "passed"), (m2, 0.994, "passed")]  # not an hour later

    b.sync(electorate_of(b, [a, c]))  # the whole history again (a fresh cursor)
    with b.store.session() as s:
        row = s.scalar(select(PeerMeasurement).where(PeerMeasurement.validator == a.hotkey,
                                                     PeerMeasurement.bpb == 0.990))
        assert (row.measured_at, row.verified_at) == stored
