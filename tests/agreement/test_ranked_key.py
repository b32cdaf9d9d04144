"""The competition key weights are set on is the one a validator scores under now: a peer
publishing a run of an old key late (its `measured_at` recent) cannot move honest
validators' weights onto that old key, and a validator that scored nothing yet picks the
key the most stake measures under, ties decided by stake, not by the key's name."""

from __future__ import annotations

import time

from agreement_kit import digest_of, electorate_of, signed_page
from fastapi import FastAPI, Request

from prism_challenge.agreement.peers import Peer
from prism_challenge.agreement.wire import MEASUREMENTS_PATH, MeasurementRow
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Score, Submission, Verification
from prism_challenge.validator.epochs import run_epoch
from prism_challenge.verification import jobs as verification_jobs
from prism_challenge.weights.plan import load_plan

OLD, NEW = "demo@0ldk3y000000", "demo@n3wk3y000000"


def _add(store, name, miner, block, bpb, corpus, at):
    """A run scored (and verified) on this validator under competition key `corpus`."""
    with store.session() as s:
        sub = Submission(digest=digest_of(name), hotkey=miner, status="scored", attempts=1,
                         accepted_at=at, block=block, uid=block, updated_at=at,
                         reviewed="passed", name=name, bundle=b"x")
        s.add(sub)
        s.flush()
        s.add(Score(submission_id=sub.id, bpb=bpb, heldout_delta=0.5, eligible=True,
                    reason=None, corpus=corpus, detail={}, created_at=at))
        s.add(Verification(submission_id=sub.id, status="passed", attempts=1,
                           created_at=at + 1, updated_at=at + 1))


def _row(miner, name, bpb, corpus, at):
    return MeasurementRow(miner_hotkey=miner, digest=digest_of(name), bpb=bpb,
                          heldout_delta=0.5, eligible=True, verified=True, measured_at=at,
                          verified_at=at + 1, corpus=corpus, scoring_version=SCORING_VERSION)


def _serving(wallet, rows) -> FastAPI:
    """A validator's measurements endpoint serving `rows`, signed by `wallet`."""
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request):
        return signed_page(wallet, request, rows, next="1:1", more=False)

    return app


def _plan(node):
    with node.store.session() as s:
        p = load_plan(s, node.metagraph, node.settings, hotkey=node.hotkey)
    return p.corpus, (p.leader.hotkey if p.leader else None), p.uids, p.weights_u16


def test_a_late_old_key_row_does_not_move_the_weights_to_the_old_key(
        nodes, wallets, live_server):
    """Honest a, b, c (1 stake each) scored X (miner1) and W under the old key three weeks
    ago and Y (miner2) under the new key an hour ago; the liar (1 stake, 25%) serves the
    honest values, then a first publication of its row of W dated 301 s ago (settled at
    once). Every honest validator keeps setting weights on the new key: miner2, uid 5."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    t_old, t_new = time.time() - 20 * 86400, time.time() - 3600
    honest = [nodes[n] for n in ("a", "b", "c")]
    liar = nodes["liar"]
    for n in honest:
        _add(n.store, "X", m1, 1, 1.000, OLD, t_old)
        _add(n.store, "W", m1, 2, 1.050, OLD, t_old + 10)
        _add(n.store, "Y", m2, 3, 0.900, NEW, t_new)
        n.serve(live_server)
    late: dict = {"at": None}
    app = FastAPI()

    @app.get(MEASUREMENTS_PATH)
    def page(request: Request):
        rows = [_row(m1, "X", 1.000, OLD, t_old), _row(m2, "Y", 0.900, NEW, t_new)]
        if late["at"] is not None:
            rows.append(_row(m1, "W", 1.050, OLD, late["at"]))
        return signed_page(liar.wallet, request, rows, next="1:1", more=False)

    liar_url = live_server(app)

    def round_all():
        for n in honest:
            peers = electorate_of(n, [o for o in honest if o is not n])
            stored, status = n.sync(peers + [Peer(liar.hotkey, liar_url, 1.0)])
            assert status.refused() == 0, status.pages

    assert nodes["a"].metagraph.uid_of(m1) == 4 and nodes["a"].metagraph.uid_of(m2) == 5
    round_all()
    want = (NEW, m2, [5], [65535])
    assert {n.name: _plan(n) for n in honest} == {n.name: want for n in honest}
    late["at"] = time.time() - 301  # just past the settle window: counted at once
    round_all()
    assert {n.name: _plan(n) for n in honest} == {n.name: want for n in honest}
    for n in honest:  # the epoch loop sets the same weights; W is no contender anywhere
        plan = run_epoch(n.settings, n.store, n.metagraph, None, hotkey=n.hotkey)
        assert plan is not None
        assert (plan.corpus, plan.leader.hotkey, plan.uids, plan.weights_u16) == want
        with n.store.session() as s:
            assert verification_jobs.queue_contenders(
                s, n.settings, metagraph=n.metagraph, corpus=NEW) == []


def test_a_validator_with_no_score_yet_takes_the_key_of_the_heaviest_stake_on_a_tie(
        nodes, wallets, live_server):
    """a has scored nothing and holds runs P (miner1) and Q (miner2), both queued. b and c
    (1 stake each) measured P under key K_A; the liar (2 stake) measured Q under K_Z: an
    equal stake on each key. a ranks on K_Z, the key of the heaviest single validator,
    whatever the keys' names (K_A sorts first)."""
    k_a, k_z = "demo@aaaaaaaaaaaa", "demo@zzzzzzzzzzzz"
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    at = time.time() - 3600
    a = nodes["a"]
    a.settings = a.settings.model_copy(update={"agreement": a.settings.agreement.model_copy(
        update={"quorum": 0.3})})  # 2 of 5 stake ranks a run: both keys have a quorum
    with a.store.session() as s:
        for name, miner, block in (("P", m1, 1), ("Q", m2, 2)):
            s.add(Submission(digest=digest_of(name), hotkey=miner, status="queued",
                             attempts=0, accepted_at=at, block=block, uid=block,
                             updated_at=at, name=name, bundle=b"x"))
    served = {"b": [_row(m1, "P", 1.0, k_a, at)], "c": [_row(m1, "P", 1.0, k_a, at)],
              "liar": [_row(m2, "Q", 0.9, k_z, at)]}
    peers = [Peer(a.hotkey, None, 1.0)]
    for name, rows in served.items():
        url = live_server(_serving(nodes[name].wallet, rows))
        peers.append(Peer(nodes[name].hotkey, url, 2.0 if name == "liar" else 1.0))
    stored, status = a.sync(peers)
    assert status.refused() == 0, status.pages
    assert _plan(a) == (k_z, m2, [5], [65535])


def test_a_validator_that_moved_to_a_new_key_keeps_the_old_leader_until_it_has_a_quorum(
        nodes, wallets, live_server):
    """a, b and c scored X (miner1) under the old key; a alone has moved to the new data
    version and scored Y (miner2) under the new key, where Y has no quorum yet: a keeps the
    old key's leader paid (its own older key, chosen by its own score times), never burns.
    Once b and c have measured Y too, a ranks the new key."""
    m1, m2 = (wallets[n].hotkey.ss58_address for n in ("miner1", "miner2"))
    t_old, t_new = time.time() - 20 * 86400, time.time() - 3600
    honest = [nodes[n] for n in ("a", "b", "c")]
    for n in honest:
        _add(n.store, "X", m1, 1, 1.000, OLD, t_old)
        n.serve(live_server)
    a = nodes["a"]
    _add(a.store, "Y", m2, 2, 0.900, NEW, t_new)

    def plan_after_a_round():
        _, status = a.sync(electorate_of(a, honest[1:]))
        assert status.refused() == 0, status.pages
        with a.store.session() as s:
            plan = load_plan(s, a.metagraph, a.settings, hotkey=a.hotkey)
        return plan.corpus, plan.leader.hotkey if plan.leader else None, plan.uids

    assert plan_after_a_round() == (OLD, m1, [4])  # not NEW with nobody to pay (a burn)
    for n in honest[1:]:
        _add(n.store, "Y", m2, 2, 0.900, NEW, t_new)
    assert plan_after_a_round() == (NEW, m2, [5])
