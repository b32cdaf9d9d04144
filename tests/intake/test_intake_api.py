"""POST/GET /v1/submissions on a live uvicorn server with real sr25519 keys, bittensor's
http_auth signatures and commitments in a real local ledger."""

from __future__ import annotations

import hashlib
import threading
import time

import httpx
import pytest
from sqlalchemy import select

from prism_challenge.api.errors import ApiError
from prism_challenge.bundle import Bundle
from prism_challenge.bundle.wire import encode
from prism_challenge.storage import Status, transition
from prism_challenge.storage.tables import Nonce, Score, Submission
from prism_challenge.submit import SubmissionClient, SubmitError

NETUID = 7
BLOCK = 4242


def refused(response: httpx.Response, status: int, rule: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["rule"] == rule, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_accepted_round_trip(node, miner, make_bundle):
    bundle = make_bundle("round-trip")
    before = node.clock()
    block = node.commit(miner, bundle.to_wire())
    with SubmissionClient(node.url, signer=miner) as client:
        receipt = client.submit(bundle)
        view = client.status(receipt.id)
        assert client.receiver == node.hotkey  # read from /v1/health
    assert (receipt.digest, receipt.hotkey, receipt.status) == (
        bundle.digest,
        miner.ss58_address,
        "received",
    )
    assert receipt.idempotent is False and receipt.block == block == 1
    assert before - 1 <= receipt.accepted_at <= node.clock() + 1
    assert (view.id, view.status, view.final, view.attempts) == (receipt.id, "received", False, 0)
    assert (view.digest, view.hotkey, view.block, view.score) == (
        bundle.digest,
        miner.ss58_address,
        block,
        None,
    )
    with node.store.session() as session:
        row = session.get(Submission, receipt.id)
        assert (row.block, row.uid) == (block, 1)  # precedence: commitment block, then uid
        assert row.bundle == bundle.to_wire()
        assert Bundle.from_wire(row.bundle).digest == row.digest == bundle.digest
        assert session.scalars(select(Nonce.hotkey)).all() == [miner.ss58_address]


def test_the_raw_response_is_201_and_the_digest_is_the_body_hash(node, miner, make_bundle):
    body = make_bundle("raw").to_wire()
    response = node.post(miner, body)
    assert response.status_code == 201
    assert response.json()["digest"] == hashlib.sha256(body).hexdigest()


def test_same_bundle_same_hotkey_is_idempotent(node, miner, make_bundle):
    bundle = make_bundle("again")
    first = node.post(miner, bundle.to_wire())
    assert first.status_code == 201
    counts = node.counts()
    second = node.post(miner, bundle.to_wire())
    assert second.status_code == 200
    assert second.json()["id"] == first.json()["id"]
    assert second.json()["idempotent"] is True
    assert node.counts() == (counts[0], counts[1] + 1)  # only the new nonce is stored


@pytest.mark.parametrize("reason, reopened", [
    ("infra: FileNotFoundError: bwrap (after 3 attempts)", True),
    ("infra failure: host faults on slots [0, 1]: Xid 79", True),
    ("unscorable record: no batches", False),
])
def test_the_same_bundle_after_an_infra_failure_is_queued_again(node, miner, make_bundle,
                                                                 reason, reopened):
    """A failure on the validator's side never costs the miner the bundle: uploading it again
    queues it with fresh attempts. Any other final state stays an idempotent repeat."""
    bundle = make_bundle("infra-" + reason[:5])
    first = node.post(miner, bundle.to_wire())
    sid = first.json()["id"]
    with node.store.session() as session:
        transition(session, sid, Status.QUEUED)
        for _ in range(3):
            transition(session, sid, Status.RUNNING)
            transition(session, sid, Status.QUEUED)
        transition(session, sid, Status.FAILED, reason=reason)
    second = node.post(miner, bundle.to_wire())
    assert second.status_code == (201 if reopened else 200), second.text
    body = second.json()
    assert (body["id"], body["idempotent"]) == (sid, not reopened)
    with node.store.session() as session:
        row = session.get(Submission, sid)
        expected = ("queued", 0) if reopened else ("failed", 3)
        assert (row.status, row.attempts) == expected
        assert session.query(Submission).count() == 1


def test_copy_from_another_hotkey_is_refused_and_the_first_keeps_precedence(
    node, miner, rival, make_bundle
):
    body = make_bundle("original").to_wire()
    original = node.post(miner, body).json()
    counts = node.counts()
    body_json = refused(node.post(rival, body), 409, "DUPLICATE")
    assert f"submission {original['id']}" in body_json["detail"]
    assert node.counts() == counts
    with node.store.session() as session:
        assert session.get(Submission, original["id"]).hotkey == miner.ss58_address


def test_an_exact_copy_that_arrived_first_hands_its_row_to_the_earlier_committer(
    node, miner, rival, make_bundle
):
    # The miner commits first (block 1) but its upload is slow; a copier who obtained the
    # bundle commits at block 2 and uploads first. The arrival order must decide nothing.
    body = make_bundle("raced").to_wire()
    assert node.commit(miner, body) == 1
    copy = node.post(rival, body).json()
    assert (copy["hotkey"], copy["block"]) == (rival.ss58_address, 2)
    taken = node.post(miner, body, commit=False)
    assert taken.status_code == 201, taken.text
    assert (taken.json()["id"], taken.json()["hotkey"], taken.json()["block"]) == (
        copy["id"], miner.ss58_address, 1)
    with node.store.session() as session:
        row = session.get(Submission, copy["id"])
        assert (row.hotkey, row.block, row.uid) == (miner.ss58_address, 1, 1)
    refused(node.post(rival, body, commit=False), 409, "DUPLICATE")


def test_no_commitment_waits_then_is_refused_and_leaves_nothing(node, miner, make_bundle):
    started = time.monotonic()
    body = refused(node.post(miner, make_bundle("uncommitted").to_wire(), commit=False),
                   409, "COMMITMENT_MISSING")
    assert time.monotonic() - started >= 0.25  # it waited commitment_wait_s (0.3 s)
    assert "within 0.3 s" in body["detail"] and "prism1:" in body["detail"]
    assert node.counts() == (0, 0)


def test_a_digest_other_than_the_latest_commitment_is_refused(node, miner, make_bundle):
    committed, sent = make_bundle("committed").to_wire(), make_bundle("sent").to_wire()
    block = node.commit(miner, committed)
    body = refused(node.post(miner, sent, commit=False), 409, "COMMITMENT_MISMATCH")
    assert f"block {block}" in body["detail"]
    node.commit(miner, sent)
    assert node.post(miner, sent, commit=False).status_code == 201
    # Only the latest commitment counts: the first bundle is no longer named.
    refused(node.post(miner, committed, commit=False), 409, "COMMITMENT_MISMATCH")
    assert node.counts()[0] == 1


def test_an_upload_waits_for_a_commitment_that_appears_in_time(make_node, miner, make_bundle):
    node = make_node(chain={"commitment_wait_s": 5.0})
    body = make_bundle("late-commit").to_wire()
    later = threading.Timer(0.5, node.commit, args=(miner, body))
    later.start()
    started = time.monotonic()
    response = node.post(miner, body, commit=False)
    later.join()
    assert response.status_code == 201, response.text
    assert 0.4 <= time.monotonic() - started < 4.5


def test_one_hotkey_has_one_upload_waiting_at_a_time(make_node, miner, make_bundle):
    node = make_node(chain={"commitment_wait_s": 2.0})
    results: list[httpx.Response] = []
    first = threading.Thread(target=lambda: results.append(
        node.post(miner, make_bundle("w1").to_wire(), commit=False)))
    first.start()
    time.sleep(0.5)
    second = node.post(miner, make_bundle("w2").to_wire(), commit=False)
    first.join()
    refused(second, 429, "COMMITMENT_WAIT")
    refused(results[0], 409, "COMMITMENT_MISSING")


def test_tampered_body_is_401(node, miner, make_bundle):
    signed_body = make_bundle("signed").to_wire()
    other_body = make_bundle("swapped").to_wire()
    node.commit(miner, other_body)
    headers = node.sign(miner, signed_body)
    response = httpx.post(f"{node.url}/v1/submissions", content=other_body, headers=headers)
    refused(response, 401, "SIGNATURE")
    assert node.counts() == (0, 0)


def test_replayed_request_is_409(node, miner, make_bundle):
    body = make_bundle("replay").to_wire()
    node.commit(miner, body)
    headers = node.sign(miner, body)
    url = f"{node.url}/v1/submissions"
    assert httpx.post(url, content=body, headers=headers).status_code == 201
    counts = node.counts()
    refused(httpx.post(url, content=body, headers=headers), 409, "NONCE_REPLAY")
    # The nonce is per hotkey: a new body under the same nonce is still a replay.
    refused(
        node.post(miner, make_bundle("other").to_wire(),
                  nonce_ns=int(headers["X-Bittensor-Nonce"])),
        409,
        "NONCE_REPLAY",
    )
    assert node.counts() == counts


def test_a_request_signed_for_another_validator_is_401_receiver(node, miner, rival, make_bundle):
    body = refused(node.post(miner, make_bundle().to_wire(), receiver=rival.ss58_address),
                   401, "RECEIVER")
    assert "/v1/health" in body["detail"]
    unbound = node.sign(miner, make_bundle().to_wire())
    del unbound["X-Bittensor-Receiver"]
    refused(httpx.post(f"{node.url}/v1/submissions", content=make_bundle().to_wire(),
                       headers=unbound), 401, "RECEIVER")
    assert node.counts() == (0, 0)


@pytest.mark.parametrize("skew", [-305, 305, -10_000])
def test_stale_or_future_timestamp_is_401(node, miner, make_bundle, skew):
    response = node.post(miner, make_bundle().to_wire(), timestamp=node.clock() + skew)
    body = refused(response, 401, "STALE")
    assert "clock" in body["detail"]
    assert node.counts() == (0, 0)


def test_freshness_window_follows_the_validator_clock(node, miner, make_bundle):
    stamp = node.clock()
    node.clock.offset = 290.0
    assert node.post(miner, make_bundle("a").to_wire(), timestamp=stamp).status_code == 201
    node.clock.offset = 310.0
    refused(node.post(miner, make_bundle("b").to_wire(), timestamp=stamp), 401, "STALE")


def test_unregistered_hotkey_is_403(node, stranger, make_bundle):
    body = refused(node.post(stranger, make_bundle().to_wire()), 403, "NOT_REGISTERED")
    assert stranger.ss58_address in body["detail"]
    assert node.counts() == (0, 0)


@pytest.mark.parametrize(("signature", "rule"), [
    ("0xnothex", "AUTH_HEADERS"), ("0x" + "00" * 64, "SIGNATURE"),
    ("0x" + "ab" * 10, "AUTH_HEADERS"), ("ab" * 200, "AUTH_HEADERS")])
def test_malformed_signature_is_401_never_500(node, miner, make_bundle, signature, rule):
    response = node.post(miner, make_bundle().to_wire(), **{"X-Bittensor-Signature": signature})
    refused(response, 401, rule)
    assert node.counts() == (0, 0)


def test_another_keys_signature_is_401(node, miner, rival, make_bundle):
    # Signed by the rival, claimed as the miner's.
    body = make_bundle().to_wire()
    node.commit(miner, body)
    headers = node.sign(rival, body)
    headers["X-Bittensor-Hotkey"] = miner.ss58_address
    refused(
        httpx.post(f"{node.url}/v1/submissions", content=body, headers=headers), 401, "SIGNATURE"
    )
    assert node.counts() == (0, 0)


def test_missing_headers_are_401(node, make_bundle):
    response = httpx.post(f"{node.url}/v1/submissions", content=make_bundle().to_wire())
    body = refused(response, 401, "AUTH_HEADERS")
    assert "X-Bittensor-" in body["detail"]


def test_oversize_body_is_413_declared_or_streamed(make_node, miner):
    node = make_node(max_body_bytes=4096)
    body = b"x" * 4097
    refused(node.post(miner, body), 413, "BODY_SIZE")
    # Chunked upload without a Content-Length is cut off while it streams.
    headers = node.sign(miner, body)

    def chunks():
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    response = httpx.post(f"{node.url}/v1/submissions", content=chunks(), headers=headers)
    assert "content-length" not in response.request.headers
    refused(response, 413, "BODY_SIZE")
    assert node.counts() == (0, 0)


def test_rate_limit_is_429_per_hotkey_and_reopens_after_the_window(node, miner, rival, make_bundle):
    for tag in ("r1", "r2", "r3"):
        assert node.post(miner, make_bundle(tag).to_wire()).status_code == 201
    counts = node.counts()
    response = node.post(miner, make_bundle("r4").to_wire())
    refused(response, 429, "RATE_LIMIT")
    assert 3500 <= int(response.headers["Retry-After"]) <= 3600
    assert node.counts() == counts
    assert node.post(rival, make_bundle("rival").to_wire()).status_code == 201  # per hotkey
    node.clock.offset = node.settings.intake.rate_limit_window_s + 1
    assert node.post(miner, make_bundle("r4").to_wire()).status_code == 201


GOOD = {"architecture.py": b"x = 1\n", "training.py": b"x = 1\n"}


@pytest.mark.parametrize(
    ("files", "rule", "file"),
    [
        ({**GOOD, "architecture.py": b"def f(ctx:\n"}, "BUNDLE_SYNTAX", "architecture.py"),
        ({**GOOD, "notes.py": b""}, "BUNDLE_FILES", "notes.py"),
        ({"architecture.py": b"x = 1\n"}, "BUNDLE_FILES", "training.py"),
        ({**GOOD, "training.py": b"\xc3\x28"}, "BUNDLE_UTF8", "training.py"),
    ],
)
def test_bad_bundle_is_422_naming_the_file_and_rule(node, miner, files, rule, file):
    body = refused(node.post(miner, encode(files)), 422, rule)
    assert file in body["detail"]
    assert node.counts() == (0, 0)


def test_garbage_body_is_422_wire(node, miner):
    refused(node.post(miner, b'{"json": true}'), 422, "BUNDLE_WIRE")
    assert node.counts() == (0, 0)


def test_checks_run_in_the_documented_order(node, miner, stranger, make_bundle):
    # A stale request from an unregistered hotkey with a bad bundle: freshness answers first.
    bad = encode({"architecture.py": b"(", "training.py": b"x = 1\n"})
    refused(node.post(stranger, bad, commit=False, timestamp=node.clock() - 1000), 401, "STALE")
    # Fresh and signed: membership comes before the bundle's validity.
    refused(node.post(stranger, bad, commit=False), 403, "NOT_REGISTERED")
    # The bundle's validity comes before its commitment (none was made here).
    refused(node.post(miner, bad, commit=False), 422, "BUNDLE_SYNTAX")
    # An uncommitted copy of another hotkey's bundle: the commitment is checked first.
    original = make_bundle("first").to_wire()
    assert node.post(miner, original).status_code == 201
    refused(node.post(stranger, original, commit=False), 403, "NOT_REGISTERED")


def test_nonces_are_pruned_after_their_window(node, miner, make_bundle):
    node.post(miner, make_bundle("n1").to_wire())
    node.clock.offset = 2 * node.settings.intake.freshness_s + 1
    node.post(miner, make_bundle("n2").to_wire())
    with node.store.session() as session:
        assert len(session.scalars(select(Nonce)).all()) == 1


def test_concurrent_repeats_store_one_row(node, miner, make_bundle):
    body = make_bundle("race").to_wire()
    results: list[httpx.Response] = []

    def send():
        results.append(node.post(miner, body))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in results) == [200, 200, 200, 201]
    assert len({r.json()["id"] for r in results}) == 1
    assert node.counts() == (1, 4)


def test_status_reports_reason_attempts_and_score(node, miner, make_bundle):
    node.commit(miner, make_bundle("scored").to_wire())
    with SubmissionClient(node.url, signer=miner, receiver=node.hotkey) as client:
        sid = client.submit(make_bundle("scored")).id
        with node.store.session() as session:
            transition(session, sid, Status.QUEUED)
            transition(session, sid, Status.RUNNING)
            transition(session, sid, Status.SCORED, reason="ok")
            session.add(
                Score(
                    submission_id=sid,
                    bpb=1.2345,
                    heldout_delta=0.5,
                    eligible=True,
                    reason=None,
                    corpus="demo",
                    detail={},
                    created_at=time.time(),
                )
            )
        view = client.status(sid)
    assert (view.status, view.final, view.reason, view.attempts) == ("scored", True, "ok", 1)
    assert view.score is not None
    assert (view.score.bpb, view.score.heldout_delta, view.score.corpus) == (1.2345, 0.5, "demo")


def test_unknown_submission_is_404_and_bad_id_is_422(node):
    refused(httpx.get(f"{node.url}/v1/submissions/999"), 404, "NOT_FOUND")
    refused(httpx.get(f"{node.url}/v1/submissions/abc"), 422, "REQUEST")
    refused(httpx.get(f"{node.url}/v1/nowhere"), 404, "NOT_FOUND")
    with SubmissionClient(node.url) as client, pytest.raises(SubmitError) as info:
        client.status(999)
    assert (info.value.status, info.value.rule) == (404, "NOT_FOUND")


def test_health(node):
    response = httpx.get(f"{node.url}/v1/health")
    assert response.status_code == 200
    assert response.json() | {"version": None} == {
        "status": "ok",
        "version": None,
        "netuid": NETUID,
        "mode": "local",
        "block": BLOCK,
        "hotkey": node.hotkey,
        "stale": False,
    }


def test_client_reports_refusals_by_rule(node, stranger, make_bundle):
    with SubmissionClient(node.url, signer=stranger) as client:
        with pytest.raises(SubmitError) as info:
            client.submit(make_bundle())
    assert (info.value.status, info.value.rule) == (403, "NOT_REGISTERED")
    with SubmissionClient("http://127.0.0.1:9", signer=stranger, receiver="x") as client:
        with pytest.raises(SubmitError) as info:
            client.submit(make_bundle())
    assert info.value.rule == "CONNECTION"


def test_client_tolerates_a_node_without_a_brief(live_server, intake_app):
    # A node whose API has no program.md route (404) is not an error for the client.
    url = live_server(intake_app())
    with SubmissionClient(url) as client:
        assert client.program_brief() is None and client.program_json() is None


def test_openapi_documents_the_routes(node):
    spec = httpx.get(f"{node.url}/openapi.json").json()
    assert {"/v1/submissions", "/v1/submissions/{submission_id}", "/v1/health"} <= set(
        spec["paths"]
    )


def test_bundles_are_parsed_only_for_requests_that_reach_the_bundle_check(
    store, wallets, make_bundle, monkeypatch, tmp_path
):
    # Anyone can make keys: a well-signed flood from unregistered or rate-limited hotkeys
    # must not cost an ast.parse (nor a wait for a commitment) each. Counted on the real
    # parser, through Intake itself.
    from prism_challenge.chain.ledger import LocalLedger
    from prism_challenge.chain.metagraph import StaticMetagraph
    from prism_challenge.chain.subnet import commitment_value
    from prism_challenge.config.settings import Settings
    from prism_challenge.intake.policy import IntakePolicy
    from prism_challenge.intake.service import Intake
    from prism_challenge.intake.signing import SUBMISSIONS_PATH, sign_submission

    calls = []
    real = Bundle.from_wire.__func__
    monkeypatch.setattr(
        Bundle, "from_wire", classmethod(lambda cls, d: calls.append(1) or real(cls, d))
    )
    miner, stranger = wallets["miner"], wallets["stranger"]
    policy = IntakePolicy.from_settings(
        Settings(chain={"netuid": NETUID}, intake={"rate_limit_count": 1})
    )
    metagraph = StaticMetagraph.of([miner.hotkey.ss58_address])
    ledger = LocalLedger(tmp_path / "ledger.db", metagraph)
    receiver = wallets["validator"].hotkey.ss58_address
    intake = Intake(store, metagraph, policy, hotkey=receiver, subnet=ledger)

    def send(wallet, tag):
        bundle = make_bundle(tag)
        ledger.commit(wallet, commitment_value(wallet.hotkey.ss58_address, bundle.digest))
        body = bundle.to_wire()
        headers = sign_submission(wallet, body, receiver=receiver)
        return intake.submit(headers, body, SUBMISSIONS_PATH)

    with pytest.raises(ApiError) as info:
        send(stranger, "s")
    assert (info.value.status, len(calls)) == (403, 0)
    assert send(miner, "first").idempotent is False
    assert len(calls) == 1  # parsed once, outside the transaction
    with pytest.raises(ApiError) as info:
        send(miner, "second")
    assert (info.value.status, len(calls)) == (429, 1)
