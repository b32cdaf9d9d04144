"""Three validators on 127.0.0.1 whose own measurements pick different leaders end with the
same leader once their signed measurements have propagated; a validator that reaches no
more than the quorum of the permitted stake ranks nothing and says so."""

from __future__ import annotations

import time

import httpx
from agreement_kit import NETUID, add_scored, digest_of, electorate_of
from sqlalchemy import func, select

from prism_challenge.agreement import routes as agreement_routes
from prism_challenge.agreement.fetch import PeerFetcher
from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.ranking import ranked_entries
from prism_challenge.agreement.status import AgreementStatus
from prism_challenge.agreement.sync import PeerSync
from prism_challenge.storage.tables import AgreementPeer, PeerMeasurement, Score, Submission
from prism_challenge.validator.epochs import run_epoch
from prism_challenge.validator.worker import EvaluationWorker
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.weights.plan import load_plan

# bpb of run Y (miner2, committed after X at 1.000) as each validator measured it: the
# dethrone margin (0.5%) needs Y <= 0.995
Y_BPB = {"a": 0.990, "b": 0.998, "c": 0.994}


def plan_of(node):
    with node.store.session() as s:
        return load_plan(s, node.metagraph, node.settings, hotkey=node.hotkey)


def test_three_validators_agree_on_the_median_although_their_own_leaders_differ(
        nodes, wallets, live_server):
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    trio = [nodes[n] for n in ("a", "b", "c")]
    for node in trio:
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=Y_BPB[node.name])
        node.serve(live_server)
    before = {n.name: plan_of(n).leader.hotkey for n in trio}
    assert before == {"a": m2, "b": m1, "c": m2}  # own measurements: a split

    for node in trio:
        stored, status = node.sync(electorate_of(node, [o for o in trio if o is not node]))
        assert stored == {o.hotkey: 2 for o in trio if o is not node}
        assert status.refused() == 0
    plans = {n.name: plan_of(n) for n in trio}
    assert {name: p.leader.hotkey for name, p in plans.items()} == {"a": m2, "b": m2, "c": m2}
    assert {p.leader.bpb for p in plans.values()} == {0.994}  # the median, on every one
    assert len({(tuple(p.uids), tuple(p.weights_u16)) for p in plans.values()}) == 1
    assert plans["a"].uids == [5] and plans["a"].weights_u16 == [65535]
    for node in trio:  # what each serves at /v1/weights is what it would set
        served = httpx.get(f"{node.url}/v1/weights", timeout=10).json()
        assert (served["leader"]["hotkey"], served["leader"]["bpb"]) == (m2, 0.994)
        board = httpx.get(f"{node.url}/v1/leaderboard", timeout=10).json()
        assert [(s["entry"]["hotkey"], s["entry"]["bpb"]) for s in board["standings"]] == [
            (m2, 0.994), (m1, 1.000)]
        page = httpx.get(f"{node.url}/dashboard", timeout=10).text
        assert "0.994" in page
    with trio[1].store.session() as s:
        ranked = ranked_entries(s, trio[1].settings, trio[1].hotkey)
    assert ranked.shared and "over 3 validators" in ranked.note


def test_a_validator_whose_peers_are_all_unreachable_ranks_nothing_and_says_so(
        nodes, wallets):
    """Alone it holds 1/3 of the permitted stake: its own measurement is a minority's, so
    it ranks nothing (its weights stay as last set) rather than pick its own leader."""
    b = nodes["b"]
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    add_scored(b.store, name="X", miner=m1, block=1, bpb=1.000)
    add_scored(b.store, name="Y", miner=m2, block=2, bpb=Y_BPB["b"])
    dead = [Peer(nodes[n].hotkey, "http://127.0.0.1:9", 1.0) for n in ("a", "c")]
    stored, status = b.sync([Peer(b.hotkey, None, 1.0)] + dead, timeout_s=2)
    assert stored == {nodes["a"].hotkey: 0, nodes["c"].hotkey: 0}
    assert status.refused() == 0 and sum(status.pages.values()) == 2
    with b.store.session() as s:
        ranked = ranked_entries(s, b.settings, b.hotkey)
        assert s.scalar(select(func.count()).select_from(PeerMeasurement)) == 0
    assert not ranked.shared and ranked.degraded and ranked.no_quorum
    assert ranked.entries == []
    assert "0 of 2 peers answered" in ranked.note
    assert "hold 33.3% of the permitted stake, not more than the quorum 66.7%" in ranked.note
    assert plan_of(b).leader is None  # the plan served would burn; the epoch offers none:
    offered = []

    kept_active = []

    class Recorder:  # the chain's seam: what the epoch would send
        def offer(self, plan, metagraph):
            offered.append(plan)

        def keep_active(self, metagraph):  # without a quorum: the last weights, if due
            kept_active.append(metagraph)

    live = b.settings.model_copy(update={"weights": b.settings.weights.model_copy(
        update={"dry_run": False})})
    status = AgreementStatus()
    run_epoch(live, b.store, b.metagraph, None, Recorder(), hotkey=b.hotkey, agreement=status)
    assert offered == [] and len(kept_active) == 1
    assert status.electorate == (1, 1 / 3)  # the /metrics gauges: b alone, a third
    run_epoch(live, b.store, b.metagraph, None, Recorder(), hotkey=None)  # own ranking
    assert [p.leader.hotkey for p in offered] == [m1]


def test_a_validator_reaching_only_a_minority_of_the_permitted_stake_does_not_rank_on_it(
        nodes, wallets, live_server):
    """Four permitted validators, b reaches only the liar (who serves a flattering Y): the
    two hold half the permitted stake, so b ranks nothing rather than follow the liar;
    once it also reaches a, three of four (75%) pass the quorum and Y ranks on the median."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c, liar = (nodes[n] for n in ("a", "b", "c", "liar"))
    for node, y in ((a, 0.996), (b, 0.998), (c, 0.997), (liar, 0.900)):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=y)
        node.serve(live_server)
    unreachable = Peer(c.hotkey, "http://127.0.0.1:9", 1.0)
    peers = [Peer(b.hotkey, None, 1.0), Peer(a.hotkey, "http://127.0.0.1:9", 1.0),
             unreachable, Peer(liar.hotkey, liar.url, 1.0)]
    stored, _ = b.sync(peers, timeout_s=2)
    assert stored == {a.hotkey: 0, c.hotkey: 0, liar.hotkey: 2}
    with b.store.session() as s:
        ranked = ranked_entries(s, b.settings, b.hotkey)
    assert ranked.no_quorum and ranked.entries == []
    assert "hold 50.0% of the permitted stake" in ranked.note

    peers[1] = Peer(a.hotkey, a.url, 1.0)
    stored, _ = b.sync(peers, timeout_s=2)
    assert stored[a.hotkey] == 2
    with b.store.session() as s:
        ranked = ranked_entries(s, b.settings, b.hotkey)
    assert ranked.shared and not ranked.no_quorum
    assert "(stake 3 of 4 permitted)" in ranked.note
    assert [(e.hotkey, e.bpb) for e in ranked.entries] == [(m1, 1.000), (m2, 0.996)]


def test_a_validator_that_left_the_electorate_no_longer_counts_in_the_permitted_stake(
        nodes, wallets, live_server):
    """c loses its permit: the next round drops its stake, and a and b (2 of 2) rank."""
    m1 = wallets["miner1"].hotkey.ss58_address
    a, b, c = (nodes[n] for n in ("a", "b", "c"))
    for node in (a, b):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        node.serve(live_server)
    a.sync(electorate_of(a, [b]) + [Peer(c.hotkey, "http://127.0.0.1:9", 1.0)], timeout_s=2)
    with a.store.session() as s:
        assert ranked_entries(s, a.settings, a.hotkey).no_quorum  # 2 of 3: not above 2/3
    a.sync(electorate_of(a, [b]))
    with a.store.session() as s:
        ranked = ranked_entries(s, a.settings, a.hotkey)
    assert "(stake 2 of 2 permitted)" in ranked.note
    assert [e.bpb for e in ranked.entries] == [1.000]


def test_a_run_not_yet_at_quorum_does_not_rank(nodes, wallets, live_server):
    """Only a and b of three hold the late run's measurements: 2/3 of the stake is not
    more than the quorum, so the run waits rather than ranking on a partial median."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c = (nodes[n] for n in ("a", "b", "c"))
    for node in (a, b, c):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        node.serve(live_server)
    for node in (a, b):
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=0.980)
    stored, _ = a.sync(electorate_of(a, [b, c]))
    assert stored == {b.hotkey: 2, c.hotkey: 1}
    assert plan_of(a).leader.hotkey == m1
    with a.store.session() as s:
        own = ranked_entries(s, a.settings, None).entries
        shared = ranked_entries(s, a.settings, a.hotkey).entries
    assert [(e.hotkey, e.bpb) for e in own] == [(m1, 1.000), (m2, 0.980)]
    assert [(e.hotkey, e.bpb) for e in shared] == [(m1, 1.000)]


def test_a_worker_queues_replays_from_the_ranking_the_weights_use(nodes, wallets, live_server,
                                                                  tmp_path):
    """Without a quorum the weights rank nothing, so a worker queues no replay either: it
    ranks as the epoch does, not on this validator's own scores alone."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    b, liar = nodes["b"], nodes["liar"]
    add_scored(b.store, name="X", miner=m1, block=1, bpb=1.000)
    z = add_scored(b.store, name="Z", miner=m2, block=2, bpb=0.900, verified=False)
    liar.serve(live_server)
    b.sync([Peer(b.hotkey, None, 1.0), Peer(liar.hotkey, liar.url, 1.0),
            Peer(nodes["a"].hotkey, "http://127.0.0.1:9", 1.0),
            Peer(nodes["c"].hotkey, "http://127.0.0.1:9", 1.0)], timeout_s=2)
    settings = b.settings.model_copy(update={"validator": b.settings.validator.model_copy(
        update={"work_dir": str(tmp_path / "runs")})})
    worker = EvaluationWorker(settings, b.store, None, None, metagraph=b.metagraph,
                              hotkey=b.hotkey)
    with b.store.session() as s:
        assert ranked_entries(s, settings, b.hotkey).no_quorum
        assert b.metagraph.is_registered(m2)
        assert worker._queue_replays(s) == []
        assert verification_jobs.queue_contenders(s, settings) == [z]  # own scores alone


def test_a_peer_on_other_scoring_rules_is_not_counted_and_is_read_again_once_on_these(
        nodes, wallets, live_server, monkeypatch):
    """Mid-upgrade, a peer that serves another scoring version is not reached (a validator
    without a quorum then keeps the weights as set instead of burning), and once it serves
    this version its pages are read from the start: its rows, re-keyed by the upgrade
    without a new change time, are not skipped behind an old cursor."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    a, b, c = (nodes[n] for n in ("a", "b", "c"))
    for node, y in ((a, 0.990), (b, 0.992), (c, 0.994)):
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=y)
        node.serve(live_server)
    cfg = b.settings.agreement
    fetcher = PeerFetcher(own_hotkey=b.hotkey, netuid=NETUID, timeout_s=5,
                          max_page_bytes=cfg.max_page_bytes, max_age_s=cfg.signature_max_age_s)
    sync = PeerSync(b.store, fetcher, AgreementStatus(), cfg.page_size, netuid=NETUID)
    electorate = electorate_of(b, [a, c])
    try:
        assert sync.round(electorate) == {a.hotkey: 2, c.hotkey: 2}
        monkeypatch.setattr(agreement_routes, "SCORING_VERSION", "1.0.0")  # another release
        with a.store.session() as s:  # re-keyed, as a migration does: no new change time
            for score in s.scalars(select(Score)):
                score.corpus = "demo@rekeyed"
        assert sync.round(electorate) == {a.hotkey: 0, c.hotkey: 0}
        later = time.time() + cfg.peer_stale_s + 1  # their last good pages have gone stale
        with b.store.session() as s:
            error = s.get(AgreementPeer, a.hotkey).last_error
            ranked = ranked_entries(s, b.settings, b.hotkey, now=later)
        assert "serves scoring version 1.0.0, this validator" in error
        assert ranked.no_quorum and ranked.entries == []  # weights stay as set: no burn
        monkeypatch.undo()  # a and c run these rules again
        assert sync.round(electorate) == {a.hotkey: 2, c.hotkey: 2}  # from the start
        with b.store.session() as s:
            assert {r.corpus for r in s.scalars(select(PeerMeasurement).where(
                PeerMeasurement.validator == a.hotkey))} == {"demo@rekeyed"}
    finally:
        fetcher.close()


def test_a_validator_that_scored_nothing_yet_ranks_what_its_peers_measured(
        nodes, wallets, live_server):
    """A new validator holds the runs (received, not yet scored) but no score of its own:
    it ranks them on its peers' measurements under the key they measure on, as the others
    do, instead of ranking nothing (a burn) until its first score."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    trio = [nodes[n] for n in ("a", "b", "c")]
    fresh = nodes["liar"]  # honest here: it has just started
    for node in trio:
        add_scored(node.store, name="X", miner=m1, block=1, bpb=1.000)
        add_scored(node.store, name="Y", miner=m2, block=2, bpb=Y_BPB[node.name])
        node.serve(live_server)
    with fresh.store.session() as s:
        for name, miner, block in (("X", m1, 1), ("Y", m2, 2)):
            s.add(Submission(digest=digest_of(name), hotkey=miner, status="received",
                             attempts=0, accepted_at=1.0, block=block, uid=block,
                             updated_at=1.0, reviewed="pending", name=name, bundle=b"x"))
    fresh.sync(electorate_of(fresh, trio))
    with fresh.store.session() as s:
        ranked = ranked_entries(s, fresh.settings, fresh.hotkey)
    assert ranked.shared and not ranked.no_quorum
    assert {e.hotkey: e.bpb for e in ranked.entries} == {m1: 1.000, m2: 0.994}
    # scored here never (scored_at 0: it chooses no key), measured by the peers (shown)
    assert all(e.scored_at == 0 and e.measured_at > 0 for e in ranked.entries)
    plan = plan_of(fresh)
    assert (plan.leader.hotkey, plan.leader.bpb) == (m2, 0.994)
