"""Submissions are signed with bittensor's http_auth (btauth/1): a wallet's hotkey signs,
bittensor verifies, and every bound value (method, path, body, nonce, sender, receiver)
breaks the signature when changed."""

from __future__ import annotations

import time

import pytest
from bittensor import http_auth

from prism_challenge.intake.signing import HEADERS, SUBMISSIONS_PATH, sign_submission

BODY = b"PRISM-BUNDLE/1\nsome body"


def verify(headers, body=BODY, *, path=SUBMISSIONS_PATH, method="POST", receiver, now=None):
    return http_auth.verify(headers, body, method=method, path=path, self_hotkey_ss58=receiver,
                            nonce_store=http_auth.InMemoryNonceStore(), now_ns=now)


def test_a_wallet_signature_verifies_for_its_receiver_and_names_the_sender(wallets):
    receiver = wallets["validator"].hotkey.ss58_address
    headers = sign_submission(wallets["miner"], BODY, receiver=receiver)
    assert set(HEADERS) <= set(headers)
    caller = verify(headers, receiver=receiver)
    assert caller.hotkey_ss58 == wallets["miner"].hotkey.ss58_address
    assert abs(caller.nonce_ns - time.time_ns()) < 5e9


def test_every_bound_value_is_in_the_signed_payload(wallets):
    miner, receiver = wallets["miner"], wallets["validator"].hotkey.ss58_address
    headers = sign_submission(miner, BODY, receiver=receiver, nonce_ns=1_700_000_000_000_000_000)
    payload = http_auth.build_payload(
        scheme="sr25519", method="POST", path=SUBMISSIONS_PATH, body=BODY,
        nonce_ns=1_700_000_000_000_000_000, sender_ss58=miner.hotkey.ss58_address,
        receiver_ss58=receiver)
    signature = bytes.fromhex(headers["X-Bittensor-Signature"].removeprefix("0x"))
    assert miner.hotkey.verify(payload, signature)
    now = 1_700_000_000_000_000_000
    with pytest.raises(http_auth.BadSignature):
        verify(headers, BODY + b"x", receiver=receiver, now=now)
    with pytest.raises(http_auth.BadSignature):
        verify(headers, path="/v1/submissions?x=1", receiver=receiver, now=now)
    with pytest.raises(http_auth.BadSignature):
        verify(headers, method="PUT", receiver=receiver, now=now)
    with pytest.raises(http_auth.BadSignature):
        verify({**headers, "X-Bittensor-Nonce": str(now + 1)}, receiver=receiver, now=now)


def test_a_signature_for_one_validator_is_refused_by_another(wallets):
    headers = sign_submission(wallets["miner"], BODY,
                              receiver=wallets["validator"].hotkey.ss58_address)
    with pytest.raises(http_auth.WrongReceiver):
        verify(headers, receiver=wallets["rival"].hotkey.ss58_address)


def test_another_keys_signature_is_refused(wallets):
    receiver = wallets["validator"].hotkey.ss58_address
    forged = sign_submission(wallets["rival"], BODY, receiver=receiver)
    forged["X-Bittensor-Hotkey"] = wallets["miner"].hotkey.ss58_address
    with pytest.raises(http_auth.BadSignature):
        verify(forged, receiver=receiver)
