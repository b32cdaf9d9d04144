"""A lying validator with a minority of the stake cannot move a run's aggregate outside
what the honest validators measured, and cannot make a run rank on its numbers alone."""

from __future__ import annotations

import random

from agreement_kit import add_scored, digest_of, electorate_of
from sqlalchemy import select

from prism_challenge.agreement.aggregate import Measurement, aggregate, weighted_median
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.scoring.leaderboard import Entry
from prism_challenge.storage.tables import Submission

HONEST_Y = {"a": 0.990, "b": 0.998, "c": 0.994}
STAKES = {"a": 1.0, "b": 1.0, "c": 1.0, "liar": 2.0}  # the liar: 40% of the stake


def test_a_minority_liar_cannot_move_the_aggregate_nor_rank_a_run_alone(
        nodes, wallets, live_server):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    everyone = [nodes[n] for n in ("a", "b", "c", "liar")]
    for node in everyone:
        lie = node.name == "liar"
        add_scored(node.store, name="X", miner=m1, block=1, bpb=0.1 if lie else 1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=5.0 if lie else HONEST_Y[
            node.name])
        node.serve(live_server)
    # Z: a run the liar claims to have measured (bpb 0.01); a holds it but nobody else
    # has scored it
    add_scored(nodes["liar"].store, name="Z", miner=m2, block=3, bpb=0.01)
    a = nodes["a"]
    with a.store.session() as s:
        s.add(Submission(digest=digest_of("Z"), hotkey=m2, status="queued", attempts=0,
                         accepted_at=1.0, block=3, uid=5, updated_at=1.0, bundle=b"z"))
    stored, status = a.sync(electorate_of(a, everyone[1:], STAKES))
    assert stored == {nodes["b"].hotkey: 2, nodes["c"].hotkey: 2, nodes["liar"].hotkey: 3}
    assert status.refused() == 0  # the liar's pages are genuinely signed: accepted
    with a.store.session() as s:
        ranked = {e.digest: e for e in ranked_entries(s, a.settings, a.hotkey).entries}
        z_row = s.scalar(select(Submission).where(Submission.digest == digest_of("Z")))
    assert z_row is not None and digest_of("Z") not in ranked  # 40% alone: no quorum
    assert ranked[digest_of("X")].bpb == 1.000
    # The liar (5.0, 2 units of 5) pulls the median to the highest honest value, no further
    assert ranked[digest_of("Y")].bpb == 0.998
    assert min(HONEST_Y.values()) <= ranked[digest_of("Y")].bpb <= max(HONEST_Y.values())


def _entry() -> Entry:
    return Entry(submission_id=1, hotkey="m", digest="0" * 64, accepted_at=0.0, bpb=0.0,
                 heldout_delta=0.0, eligible=True, corpus="demo")


def test_the_aggregate_stays_inside_the_honest_range_whatever_a_minority_reports():
    """10,000 random electorates: liars holding less than a third of the stake, honest
    validators the rest, any subset of measurements held. Whenever a run ranks, its bpb and
    delta lie between two honest measurements of the held set; liars alone never rank."""
    rng = random.Random(7)
    ranked_runs = 0
    for _ in range(10_000):
        n_honest, n_liars = rng.randint(1, 6), rng.randint(1, 3)
        honest = {f"h{i}": rng.uniform(0.1, 5) for i in range(n_honest)}
        liar_total = rng.uniform(0.01, 0.4999) * sum(honest.values())  # < 1/3 of all
        shares = [rng.random() + 1e-3 for _ in range(n_liars)]
        liars = {f"l{i}": liar_total * w / sum(shares) for i, w in enumerate(shares)}
        stakes = honest | liars
        truth = rng.uniform(0.8, 1.2)
        ms = [Measurement(v, truth * (1 + rng.gauss(0, 0.002)), rng.gauss(0.4, 0.01), True,
                          0.0, 0.0) for v in honest if rng.random() < 0.8]
        ms += [Measurement(v, rng.choice([0.0, 1e-6, 1e6, truth * rng.uniform(0, 3)]),
                           rng.uniform(-1e6, 1e6), True, 0.0, 0.0) for v in liars]
        out = aggregate(_entry(), ms, stakes, quorum=2 / 3, now=1.0)
        held = [m for m in ms if m.validator in honest]
        if out is None:
            continue
        ranked_runs += 1
        assert held, "a run ranked on liars' measurements alone"
        assert min(m.bpb for m in held) <= out.bpb <= max(m.bpb for m in held)
        assert (min(m.heldout_delta for m in held) <= out.heldout_delta
                <= max(m.heldout_delta for m in held))
        assert out.verified  # every measurement here says its replay passed
    assert ranked_runs > 3000


def test_weighted_median_values():
    assert weighted_median([(3.0, 1), (1.0, 1), (2.0, 1)]) == 2.0
    assert weighted_median([(1.0, 1), (2.0, 1)]) == 1.0  # an exact split: the lower one
    assert weighted_median([(1.0, 1), (2.0, 3)]) == 2.0
    assert weighted_median([(1.0, 0), (2.0, 1)]) == 2.0  # no stake, no say


def test_settling_and_verification_need_time_and_stake():
    stakes = {"a": 1.0, "b": 1.0, "c": 1.0}
    ms = [Measurement("a", 1.0, 0.1, True, 100.0, 150.0),
          Measurement("b", 1.1, 0.2, True, 100.0, None),
          Measurement("c", 1.2, 0.3, False, 180.0, 190.0)]
    e = _entry()
    assert aggregate(e, ms, stakes, quorum=0.5, now=150.0, settle_s=60.0) is None
    two = aggregate(e, ms, stakes, quorum=0.5, now=160.0, settle_s=60.0)
    assert (two.bpb, two.eligible, two.verified) == (1.0, True, False)
    three = aggregate(e, ms, stakes, quorum=0.5, now=250.0, settle_s=60.0)
    assert (three.bpb, three.heldout_delta, three.eligible, three.verified) == (
        1.1, 0.2, True, True)
    assert aggregate(e, ms, stakes, quorum=2 / 3, now=250.0, settle_s=60.0).verified is False
