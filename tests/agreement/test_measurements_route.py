"""`GET /v1/measurements` on a live node: every scored run once across pages, each page
signed by the validator's hotkey over the exact request target and body."""

from __future__ import annotations

import json

import httpx
from agreement_kit import LONG_AGO, add_scored, digest_of
from bittensor import http_auth

from prism_challenge.agreement.wire import MeasurementsPage, cursor, target
from prism_challenge.scoring.version import SCORING_VERSION
from prism_challenge.storage.tables import Verification


def test_pages_cover_every_scored_run_once_and_are_signed_by_the_validator(
        nodes, wallets, live_server):
    a = nodes["a"]
    miner = wallets["miner1"].hotkey.ss58_address
    for i in range(5):
        add_scored(a.store, name=f"run{i}", miner=miner, block=10 + i, bpb=1.0 + i / 100,
                   verified=i % 2 == 0, at=LONG_AGO + i)
    url = a.serve(live_server)
    seen, after, pages = [], None, 0
    while True:
        asked = target(after, 2)
        response = httpx.get(url + asked, timeout=10)
        assert response.status_code == 200, response.text
        caller = http_auth.verify(dict(response.headers), response.content, method="GET",
                                  path=asked, self_hotkey_ss58="-", require_receiver=False,
                                  max_age=60, nonce_store=http_auth.InMemoryNonceStore(120))
        assert caller.hotkey_ss58 == a.hotkey
        page = MeasurementsPage.model_validate_json(response.content)
        assert (page.validator, page.netuid) == (a.hotkey, 7)
        assert len(page.rows) <= 2
        seen += page.rows
        pages += 1
        after = page.next
        if not page.more:
            break
    assert pages == 3
    assert after == cursor(LONG_AGO + 5, 5)  # run4, verified at +1: the next round starts here
    empty = MeasurementsPage.model_validate_json(httpx.get(url + target(after, 2)).content)
    assert (empty.rows, empty.next, empty.more) == ([], after, False)
    assert [r.digest for r in seen] == [digest_of(f"run{i}") for i in range(5)]
    assert [r.bpb for r in seen] == [1.0, 1.01, 1.02, 1.03, 1.04]
    assert [r.verified for r in seen] == [True, False, True, False, True]
    assert {(r.miner_hotkey, r.corpus, r.scoring_version, r.eligible) for r in seen} == {
        (miner, "demo", SCORING_VERSION, True)}
    assert [r.block for r in seen] == [10, 11, 12, 13, 14]
    assert seen[0].measured_at == LONG_AGO and seen[0].verified_at == LONG_AGO + 1


def test_a_run_whose_replay_ends_later_is_served_again_after_the_cursor(nodes, wallets,
                                                                       live_server):
    a = nodes["a"]
    miner = wallets["miner1"].hotkey.ss58_address
    sid = add_scored(a.store, name="late", miner=miner, block=3, bpb=0.9, verified=False)
    url = a.serve(live_server)
    first = MeasurementsPage.model_validate_json(httpx.get(url + target(None, 10)).content)
    assert [(r.verified, r.eligible) for r in first.rows] == [(False, True)]
    # a full page would carry a cursor; ask after the position of that row instead
    after = cursor(LONG_AGO, sid)
    assert MeasurementsPage.model_validate_json(
        httpx.get(url + target(after, 10)).content).rows == []
    with a.store.session() as s:
        s.add(Verification(submission_id=sid, status="failed", attempts=1, reason="peek",
                           created_at=LONG_AGO + 60, updated_at=LONG_AGO + 60))
    again = MeasurementsPage.model_validate_json(httpx.get(url + target(after, 10)).content)
    assert [(r.digest, r.verified, r.eligible) for r in again.rows] == [
        (digest_of("late"), False, False)]


def test_a_node_without_a_signer_or_with_serving_off_refuses_with_a_rule(nodes, live_server):
    from prism_challenge.api import ApiDeps
    from prism_challenge.validator.app import create_app

    a = nodes["a"]
    for deps in (ApiDeps(settings=a.settings, store=a.store, metagraph=a.metagraph),
                 ApiDeps(settings=a.settings.model_copy(update={
                     "agreement": a.settings.agreement.model_copy(update={"serve": False})}),
                     store=a.store, metagraph=a.metagraph, signer=a.wallet)):
        url = live_server(create_app(deps))
        response = httpx.get(url + "/v1/measurements")
        assert response.status_code == 404
        assert json.loads(response.text)["rule"] == "MEASUREMENTS_OFF"
    bad = httpx.get(url + "/v1/measurements?after=x:1")
    assert (bad.status_code, bad.json()["rule"]) == (422, "REQUEST")
