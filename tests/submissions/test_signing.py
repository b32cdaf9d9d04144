"""sr25519 request signing: bittensor wallets sign, substrate-interface verifies."""

from __future__ import annotations

import hashlib

import pytest
from substrateinterface import Keypair

from prism_challenge.intake.signing import (
    MalformedHeaders,
    SignedHeaders,
    canonical_message,
    sign_request,
    verify_signature,
)

BODY = b"PRISM-BUNDLE/1\nsome body"


def test_wallet_signature_verifies_with_substrate_interface_and_another_key_does_not(miner, rival):
    signed = sign_request(miner, netuid=7, body=BODY, timestamp=1_700_000_000, nonce="n" * 32)
    message = signed.message(BODY)
    raw = bytes.fromhex(signed.signature.removeprefix("0x"))
    assert Keypair(ss58_address=miner.ss58_address).verify(message, raw) is True
    assert verify_signature(miner.ss58_address, message, signed.signature) is True
    forged = "0x" + bytes(rival.sign(message)).hex()
    assert verify_signature(miner.ss58_address, message, forged) is False
    assert Keypair(ss58_address=rival.ss58_address).verify(message, raw) is False


def test_every_bound_value_is_in_the_signed_message(miner):
    signed = sign_request(miner, netuid=7, body=BODY, timestamp=1_700_000_000, nonce="n" * 32)
    assert signed.message(BODY) == canonical_message(
        netuid=7,
        hotkey=miner.ss58_address,
        nonce="n" * 32,
        timestamp=1_700_000_000,
        body_sha256=hashlib.sha256(BODY).hexdigest(),
    )
    base = signed.message(BODY)
    variants = [
        signed.message(BODY + b"x"),
        SignedHeaders(**{**signed.__dict__, "netuid": 8}).message(BODY),
        SignedHeaders(**{**signed.__dict__, "nonce": "m" * 32}).message(BODY),
        SignedHeaders(**{**signed.__dict__, "timestamp": 1_700_000_001}).message(BODY),
    ]
    for message in variants:
        assert message != base
        assert verify_signature(miner.ss58_address, message, signed.signature) is False


@pytest.mark.parametrize(
    "signature",
    ["", "0x", "zz" * 64, "0x" + "00" * 64, "0x" + "ab" * 63, "0x" + "ab" * 65, "\u00e9" * 128],
)
def test_malformed_signatures_are_invalid_not_errors(miner, signature):
    assert verify_signature(miner.ss58_address, b"message", signature) is False


def test_headers_round_trip_and_refuse_bad_shapes(miner):
    signed = sign_request(miner, netuid=3, body=BODY, timestamp=1_700_000_000)
    assert SignedHeaders.parse(signed.as_http()) == signed
    assert len(signed.nonce) == 32
    for header, value in [
        ("X-Prism-Hotkey", "not-an-address"),
        ("X-Prism-Timestamp", "soon"),
        ("X-Prism-Netuid", "-1"),
        ("X-Prism-Nonce", "short"),
        ("X-Prism-Nonce", "x" * 20 + "!"),
    ]:
        with pytest.raises(MalformedHeaders, match=header):
            SignedHeaders.parse({**signed.as_http(), header: value})
    missing = signed.as_http()
    del missing["X-Prism-Signature"]
    with pytest.raises(MalformedHeaders, match="X-Prism-Signature header is missing"):
        SignedHeaders.parse(missing)
